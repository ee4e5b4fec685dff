"""Keras 3 on JAX across two hosts: two real JAX processes on this machine
(`jax.distributed.initialize` on 127.0.0.1, 2 CPU devices each), each running
tests/support/jax_host.py, docs/guides/jax.md's recipe: `keras.distribution.DataParallel(
auto_shard_dataset=False)` and `tfpipe.build(..., hosts=tfpipe.Hosts.from_jax())` (num_hosts=
jax.process_count(), host_index=jax.process_index()).

Checked: each host reads only its files and its share of the global batch; `fit` trains on the
global batch asked for; padded `evaluate` counts every example once, without a warning; a run
killed mid-epoch and restarted (BackupAndRestore with tfpipe's Position) ends with the weights
of the uninterrupted run; the two ways the host share and Keras's sharding can disagree are
refused by name.
"""

from __future__ import annotations

import numpy as np
import pytest

import tfpipe

import support.jax_host as host  # the script the processes run: its constants
from support.jax_processes import run_two_hosts
from support.pipeline_data import shard_row_ids

pytest.importorskip("jax", reason='two-host JAX: pip install "jax[cpu]"')
tf = pytest.importorskip("tensorflow")

pytestmark = [pytest.mark.slow, pytest.mark.jax]


@pytest.fixture(scope="module")
def hosts(table_ds, tmp_path_factory) -> list[dict]:
    """What each of the two processes saw (process 0's first)."""
    work = tmp_path_factory.mktemp("jax-hosts")
    return run_two_hosts(host.__file__, table_ds, str(work), devices=2)


def test_each_host_reads_its_files_and_its_share_of_the_global_batch(hosts, table_ds):
    shards = shard_row_ids(table_ds)
    assert [(h["processes"], h["devices"], h["local"]) for h in hosts] == [(2, 4, 2)] * 2
    assert hosts[0]["files"] == ["train-00000-of-00004", "train-00002-of-00004"]
    assert hosts[1]["files"] == ["train-00001-of-00004", "train-00003-of-00004"]
    for i, h in enumerate(hosts):
        assert h["host_batch"] == host.GLOBAL_BATCH // 2
        mine = sorted(shards[i] + shards[i + 2])
        stream = [r for step in h["steps"] for r in step]
        assert sorted(stream[: len(mine)]) == mine  # one epoch of its own rows, each once
        assert set(stream) <= set(mine)


def test_fit_trains_on_the_global_batch(hosts):
    # The count metric sums over the global batch Keras assembles from both hosts' shares.
    for h in hosts:
        assert h["examples_per_epoch"] == [host.STEPS * host.GLOBAL_BATCH] * host.EPOCHS
    assert hosts[0]["weights"] == hosts[1]["weights"]  # one model, replicated


def test_padded_evaluate_counts_every_example_once(hosts, table_ds):
    """Host 0 holds 19 rows, host 1 18: at 2 rows a host, 10 and 9 batches; both run 10, the
    padding weighted 0. The accuracy is the trained model's on exactly the 37 rows."""
    for h in hosts:
        assert h["eval"]["batches"] == 10 and h["eval"]["warnings"] == []
        assert h["eval"]["count"] == 37
    x, y = next(iter(tfpipe.build(table_ds, batch_size=37, training=False, **host.FEATURES)))
    features = np.stack([x[k].numpy().astype(np.float32) for k in sorted(x)], axis=1)
    kernel, bias = (np.asarray(w, np.float32) for w in hosts[0]["weights"])
    accuracy = float(((features @ kernel + bias).argmax(1) == y.numpy()).mean())
    assert hosts[0]["eval"]["accuracy"] == pytest.approx(accuracy, abs=1e-6)


def test_keras_default_sharding_of_the_padded_global_eval(hosts):
    """Without num_hosts, every host reads the whole eval split and Keras keeps its share:
    possible once the last batch is padded (a partial one has no batch size to cut). Keras's
    own rebatch loses the length (tf.data's rebatch: cardinality unknown), hence its warning:
    one more reason for auto_shard_dataset=False."""
    for h in hosts:
        assert h["eval_auto_shard"]["count"] == 37
        assert all("ran out of data" in w for w in h["eval_auto_shard"]["warnings"])


def test_a_run_killed_mid_epoch_resumes_to_the_uninterrupted_weights(hosts):
    for h in hosts:
        assert h["resumed_weights"] == h["weights"]


def test_host_share_and_keras_sharding_disagreeing_is_refused(hosts):
    auto, whole = hosts[0]["refused"]
    assert "auto_shard_dataset=True" in auto and "DataParallel(auto_shard_dataset=False)" in auto
    assert "without num_hosts every host would read the same examples" in whole
    assert "num_hosts=jax.process_count(), host_index=jax.process_index()" in whole

"""Hosts without tf.distribute (`num_hosts`, `host_index`: what a JAX job knows) and static-shape
evaluation (`pad_remainder`): each host's share of the files and of the global batch, its
resumable order, and eval batches of one shape, as many on every host, the padding weighted 0.

The same share as `input_context` gives, so these tests compare the two; the two-process JAX
run is tests/pipeline/test_jax_hosts.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import tfpipe
from tfpipe.errors import ConfigError
from tfpipe.pipeline import ShardingWarning, plan

from support.pipeline_data import N_IMAGES, N_ROWS, shard_row_ids

tf = pytest.importorskip("tensorflow")

# The order's groups and windows fall inside an epoch of 37 (as in order/test_training_order.py).
STREAMED = {"cycle_length": 2, "shuffle_buffer": 13, "seed": 5, "cache": "none"}


def context(n: int, i: int):
    return tf.distribute.InputContext(num_input_pipelines=n, input_pipeline_id=i, num_replicas_in_sync=n)


def row_ids(ds, n: int | None = None) -> list[list[int]]:
    return [e[0]["row_id"].numpy().tolist() for e in (ds if n is None else ds.take(n))]


def test_each_host_reads_its_files_and_its_share_of_the_global_batch(table_ds):
    plans = [plan(table_ds, batch_size=8, num_hosts=2, host_index=i, **STREAMED) for i in range(2)]
    assert [p.batch_size for p in plans] == [4, 4] and all(p.global_batch_size == 8 for p in plans)
    assert [p.shard_by for p in plans] == ["file", "file"]
    files = [set(p.files) for p in plans]
    assert not files[0] & files[1] and len(files[0] | files[1]) == 4
    for i, p in enumerate(plans):
        # Exactly what an input_context of 2 pipelines gives (and its order's identity).
        same = plan(table_ds, batch_size=8, input_context=context(2, i), **STREAMED)
        assert p.files == same.files and p.order.identity() == same.order.identity()
        assert row_ids(p.dataset(), 12) == row_ids(same.dataset(), 12)
        assert {r for b in row_ids(p.dataset(), 12) for r in b} <= {
            r for part in shard_row_ids(table_ds)[i::2] for r in part
        }


@pytest.mark.filterwarnings("ignore::tfpipe.ShardingWarning")
@pytest.mark.parametrize(
    ("hosts", "batch", "shard_by"),
    [(2, 8, "file"), (8, 16, "record")],  # 4 shards: by file for 2 hosts, by record for 8
)
def test_start_step_holds_on_every_host(table_ds, hosts, batch, shard_by):
    for i in {0, hosts - 1}:
        kw = {"batch_size": batch, "num_hosts": hosts, "host_index": i, **STREAMED}
        p = plan(table_ds, **kw)
        assert p.shard_by == shard_by
        whole = row_ids(p.dataset(), 14)
        assert all(len(b) == batch // hosts for b in whole)
        assert row_ids(tfpipe.build(table_ds, start_step=9, **kw), 5) == whole[9:], i


def test_hosts_of_a_context_are_what_input_context_gives(table_ds):
    """One object for the three spellings: Hosts.from_context(ctx) is input_context=ctx, and
    Hosts(num_hosts=, host_index=) the keywords."""
    ctx = context(2, 1)
    hosts = tfpipe.Hosts.from_context(ctx)
    assert hosts == tfpipe.Hosts(num_hosts=2, host_index=1, num_replicas_in_sync=2) and not hosts.per_host
    a = plan(table_ds, batch_size=8, input_context=ctx, **STREAMED)
    b = plan(table_ds, batch_size=8, hosts=hosts, **STREAMED)
    assert (a.files, a.batch_size, a.order.identity()) == (b.files, b.batch_size, b.order.identity())
    with pytest.raises(
        ConfigError, match=r"input_context must be a tf.distribute.InputContext.*Received: object"
    ):
        tfpipe.Hosts.from_context(object())


def test_host_arguments_are_refused_by_name(table_ds):
    with pytest.raises(ConfigError, match=r"pass one or the other.*input_context=InputContext, num_hosts=2"):
        tfpipe.build(table_ds, batch_size=8, input_context=context(2, 0), num_hosts=2, host_index=0)
    with pytest.raises(
        ConfigError, match=r"come together .*jax.process_count.*Received: num_hosts=2, host_index=None"
    ):
        tfpipe.build(table_ds, batch_size=8, num_hosts=2)
    with pytest.raises(
        ConfigError, match=r"host_index must be an int in \[0, num_hosts - 1 = 1\]. Received: host_index=2"
    ):
        tfpipe.build(table_ds, batch_size=8, num_hosts=2, host_index=2)
    with pytest.raises(ConfigError, match=r"num_hosts must be an int >= 1. Received: num_hosts=0"):
        tfpipe.build(table_ds, batch_size=8, num_hosts=0, host_index=0)
    with pytest.raises(
        ConfigError,
        match=r"divide evenly among the num_hosts=3 hosts.*batch_size=8 \(8/3 = 2.66667\). Use 6 or 9",
    ):
        tfpipe.build(table_ds, batch_size=8, num_hosts=3, host_index=0)


# ---- static-shape evaluation ----


def test_eval_across_hosts_pads_to_one_shape_and_one_count(table_ds):
    """4 shards of 10/9/9/9 rows: host 0 reads 19, host 1 18; at 3 rows a host, 7 and 6 batches.
    Both yield 7 full batches, and the padding (weight 0) makes up the rest."""
    per_shard = shard_row_ids(table_ds)
    seen, weights = [], []
    for i in range(2):
        ds = tfpipe.build(table_ds, batch_size=6, training=False, num_hosts=2, host_index=i)
        assert int(ds.cardinality()) == 7
        batches = [tf.nest.map_structure(lambda t: t.numpy(), b) for b in ds]
        assert len(batches) == 7 and all(len(w) == 3 for _, _, w in batches)
        w = np.concatenate([w for _, _, w in batches])
        rows = np.concatenate([x["row_id"] for x, _, _ in batches])
        own = per_shard[i] + per_shard[i + 2]
        assert w.tolist() == [1.0] * len(own) + [0.0] * (21 - len(own))
        assert rows[: len(own)].tolist() == own  # source order, then the padding
        seen += own
        weights.append(w.sum())
    assert sorted(seen) == list(range(N_ROWS)) and sum(weights) == N_ROWS


def test_pad_remainder_on_one_host(image_ds):
    ds = tfpipe.build(image_ds, batch_size=8, training=False, image_size=16, pad_remainder=True)
    assert int(ds.cardinality()) == 5  # ceil(37 / 8)
    images, _, weights = ds.element_spec
    assert images.shape.as_list() == [8, 16, 16, 3] and weights.shape.as_list() == [8]
    w = np.concatenate([w.numpy() for _, _, w in ds])
    assert w.tolist() == [1.0] * N_IMAGES + [0.0] * (40 - N_IMAGES)
    # Without it, one host keeps the partial last batch, and (x, y).
    assert len(tfpipe.build(image_ds, batch_size=8, training=False, image_size=16).element_spec) == 2


def test_pad_remainder_refusals(table_ds, foreign_ds):
    with pytest.raises(
        ConfigError, match=r"training \(endless, its remainder dropped\) has only whole batches"
    ):
        tfpipe.build(table_ds, batch_size=8, pad_remainder=True)
    with pytest.raises(ConfigError, match=r"pass one\. Received: drop_remainder=True, pad_remainder=True"):
        tfpipe.build(table_ds, batch_size=8, training=False, pad_remainder=True, drop_remainder=True)
    # Hosts cannot agree on a number of batches without counts.
    with (
        pytest.raises(
            ConfigError, match=r"same number of eval batches.*records without a manifest have no count"
        ),
        pytest.warns(tfpipe.DefaultWarning),
    ):
        tfpipe.build(foreign_ds + "/train-*", batch_size=4, training=False, num_hosts=2, host_index=0)
    with pytest.raises(ConfigError, match="skip_corrupt=True may drop records"):
        tfpipe.build(table_ds, batch_size=8, training=False, num_hosts=2, host_index=0, skip_corrupt=True)


def test_record_sharded_eval_hosts_agree(table_ds):
    counts = []
    for i in range(5):
        with pytest.warns(ShardingWarning):
            p = plan(table_ds, batch_size=10, training=False, num_hosts=5, host_index=i)
        ds = p.dataset()
        batches = list(ds)
        counts.append(len(batches))
        assert int(ds.cardinality()) == len(batches)
    assert counts == [4] * 5  # ceil(8 / 2): hosts 0 and 1 read 8 rows, the others 7

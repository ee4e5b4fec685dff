"""Resuming text at step K: the rows before K are counted from the split's lengths file, with the
order applied to the lengths, so no shard is opened for the count (proved by damaging every
shard but the one being read, locally and on gs://, and by counting the twin's requests); the
start equals the uninterrupted run byte for byte in every packing mode and output form, from a
later epoch, with the memory cache and with several input pipelines; a dataset converted
without a lengths file counts the old way, reading every record before K, and says so."""

from __future__ import annotations

import collections
import itertools
import json
import os
import pathlib
import urllib.parse

import numpy as np
import pytest

import tfpipe
from tfpipe import storage
from tfpipe.modalities.text import stages as text_stages
from tfpipe.packing import reference
from tfpipe.pipeline import plan
from tfpipe.pipeline.order import resumable
from tfpipe.pipeline.order import stream as order_stream

tf = pytest.importorskip("tensorflow")

B, L = 8, 128
# Groups of one shard, chunks of 40 documents (~20 rows), windows of 60: a group of ~234
# documents spans several chunks and windows, and chunks cross group and epoch ends.
SMALL = {
    "batch_size": B,
    "sequence_length": L,
    "seed": 3,
    "cycle_length": 1,
    "chunk": 40,
    "shuffle_buffer": 60,
}
STREAMED = SMALL | {"cache": "none"}


def batches(ds, n):
    return [[t.numpy().tobytes() for t in tf.nest.flatten(e)] for e in ds.take(n)]


def tf_shuffle(n, seed):
    return order_stream.permutation(tf, n, tf.constant(seed, tf.int64)).numpy().tolist()


def plain_count(root, epochs, **kw):
    """The count in plain Python: the order's (epoch, file) and document of each position of the
    first `epochs` epochs, and the rows of each chunk (packing.reference), from the lengths file."""
    p = plan(root, **(STREAMED | kw))
    spec, size = p.order, text_stages.chunk_size(p.plan.decoder.packing)
    lengths = np.frombuffer(pathlib.Path(root, "lengths.train.u32").read_bytes(), "<u4").astype(np.int64)
    placed = list(itertools.islice(resumable.records(spec, 0, tf_shuffle), epochs * spec.examples))
    where = [(q.epoch, q.file) for q in placed]
    docs = np.array([spec.first_ids[q.file] + q.record for q in placed])
    rows = [
        reference.place(lengths[docs[c * size : (c + 1) * size]], L, "first_fit").rows
        for c in range(len(docs) // size)
    ]
    return spec, size, where, rows


def start_in_last_group(root, epoch=1):
    """(K, the shard read from K on, batches from K whose chunks stay in that shard's group): K
    is the first step whose chunk starts inside epoch `epoch`'s last group (one shard)."""
    spec, size, where, rows = plain_count(root, epoch + 1)
    last = where[-1]
    begin = where.index(last)  # the group's first position
    first_chunk = -(-begin // size)
    ends = np.cumsum(rows)
    k = -(-int(ends[first_chunk - 1]) // B)
    inside = [c for c in range(len(rows)) if c >= first_chunk and (c + 1) * size <= len(where)]
    n = (int(ends[inside[-1]]) - k * B) // B  # whole batches from K in those chunks
    assert n >= 2 and epoch * spec.examples < begin
    return k, spec.files[last[1]], n


def copy_dataset(src, root):
    """The dataset at `src` copied to `root` (local or gs://), every file the manifest names."""
    for name in os.listdir(src):
        if not name.startswith("."):
            storage.write_atomic(
                storage.join(root, name), pathlib.Path(src, name).read_bytes(), overwrite=True
            )
    return root


def damage_all_but(root, keep):
    """Every shard but `keep` overwritten with zeros of its size: any read of them fails."""
    damaged = []
    for path in tfpipe.Manifest.load(root).shard_paths("train"):
        if storage.basename(path) != storage.basename(keep):
            storage.write_atomic(path, b"\0" * storage.size(path), overwrite=True)
            damaged.append(storage.basename(path))
    return damaged


def without_lengths(root):
    """The manifest as tfpipe wrote it before the lengths file (the file itself left in place)."""
    path = storage.join(root, "tfpipe.json")
    obj = json.loads(storage.read_bytes(path))
    del obj["splits"]["train"]["text"]["lengths"]
    storage.write_atomic(path, json.dumps(obj).encode(), overwrite=True)


def shard_reads(gcs, ds, n) -> collections.Counter:
    """TensorFlow's downloads of each object of the dataset while `n` batches of `ds` are taken."""
    with gcs.recording() as log:
        batches(ds, n)
    return collections.Counter(
        urllib.parse.unquote(r.path.split("?")[0]).rsplit("/", 1)[-1]
        for r in log
        if r.route == "tls" and r.method == "GET" and r.bytes_out > 0
    )


@pytest.mark.parametrize("where", ["local", pytest.param("gs", marks=pytest.mark.gcs)])
def test_the_count_opens_no_shard(text_ds, tmp_path, request, where):
    """K in the second epoch's last group: every other shard damaged, the run from K is the
    uninterrupted one (the count read the lengths file, and the stream only that group's shard).
    The same manifest without its lengths entry counts the old way and trips on them. On gs://
    the twin's log says the same: one read of the lengths file, of the group's shard and of the
    next group's, read ahead; and with cache="memory" each shard loaded once (it was twice)."""
    gs = where == "gs"
    root = storage.join(request.getfixturevalue("gcs_bucket"), "t") if gs else str(tmp_path / "t")
    copy_dataset(text_ds, root)
    k, keep, n = start_in_last_group(text_ds)
    want = batches(tfpipe.build(root, **STREAMED), k + n)[k:]
    if gs:
        gcs = request.getfixturevalue("local_gcs")
        reads = shard_reads(gcs, tfpipe.build(root, start_step=k, **STREAMED), 1)
        shards = collections.Counter({name: reads[name] for name in reads if name.startswith("train-")})
        # The group's shard, and at most the next epoch's first (which may be the same), read ahead.
        spec = plan(root, **STREAMED).order
        ahead = storage.basename(spec.files[resumable.epoch_stream(spec, 2, tf_shuffle)[0][0]])
        assert reads["lengths.train.u32"] == 1 and shards[storage.basename(keep)] >= 1, reads
        assert shards - collections.Counter([storage.basename(keep), ahead]) == {}, reads
        reads = shard_reads(gcs, tfpipe.build(root, start_step=k, **SMALL, cache="memory"), 1)
        assert {name: reads[name] for name in reads if name.startswith("train-")} == dict.fromkeys(
            [f"train-0000{i}-of-00003" for i in range(3)], 1
        ), reads
    damaged = damage_all_but(root, keep)
    assert batches(tfpipe.build(root, start_step=k, **STREAMED), n) == want
    without_lengths(root)
    ds = tfpipe.build(root, start_step=k, **STREAMED)
    assert any("no lengths file" in note for note in plan(root, start_step=k, **STREAMED).notes)
    with pytest.raises(tf.errors.OpError, match="|".join(damaged)):
        batches(ds, 1)


def context(n, i):
    return tf.distribute.InputContext(num_input_pipelines=n, input_pipeline_id=i, num_replicas_in_sync=n)


# Each case: the dataset, build()'s options, the step (a later epoch) and the input pipelines.
CASES = {
    "causal_lm, cached": ("text_ds", {"output": "causal_lm", "cache": "memory"}, 50, None),
    "none, truncate": ("text_ds", {"packing": "none", "truncate": True}, 95, None),
    "concat, record sharding": ("text_ds", {"packing": "concat"}, 30, (4, 3)),
    "classifier, file sharding, Position": ("labeled_text_ds", {"truncate": True}, 70, (2, 1)),
}


@pytest.mark.slow  # ~10 s each: the default run keeps the damaged-shards test
@pytest.mark.parametrize("case", list(CASES))
def test_start_step_in_a_later_epoch_equals_the_uninterrupted_run(request, case):
    """Each mode and output form counts its rows as it packs them (the EOS, [CLS] and [SEP]
    added to the lengths, long documents cut or truncated), the cached stream and each input
    pipeline's share of the lengths (its own files, or its positions of the one stream)."""
    from tfpipe.resume import Position

    name, options, k, pipelines = CASES[case]
    kw = STREAMED | options
    if pipelines is not None:
        n, i = pipelines
        kw |= {"batch_size": n * B, "input_context": context(n, i)}
    want = batches(tfpipe.build(request.getfixturevalue(name), **kw), k + 3)[k:]
    start = Position(k) if "Position" in case else k
    assert batches(tfpipe.build(request.getfixturevalue(name), start_step=start, **kw), 3) == want


@pytest.mark.parametrize("step", [2**61, 2**62, 10**9])
def test_a_start_the_count_cannot_reach_is_refused_with_the_bound(text_ds, step):
    """2**61 and 2**62 rows' worth of steps wrapped in int64 (batch 0 came out), and 10**9
    walked every earlier epoch's placement for minutes: each is refused at build() with the
    bound, which is accepted itself; a Position beyond it fails when the iterator starts."""
    from tfpipe.errors import ConfigError
    from tfpipe.resume import Position

    p = plan(text_ds, **STREAMED)
    limit = text_stages.start_limit(p.order, p.plan.decoder.packing)
    assert 10 < limit < 10**9
    with pytest.raises(
        ConfigError,
        match=rf"start_step must be an int in \[0, {limit}\] or a tfpipe.Position for this text dataset: "
        rf"counting the packed rows.*Received: start_step={step}",
    ):
        plan(text_ds, start_step=step, **STREAMED)
    plan(text_ds, start_step=limit, **STREAMED)
    if step == 10**9:
        ds = tfpipe.build(text_ds, start_step=Position(step), **STREAMED)
        with pytest.raises(tf.errors.InvalidArgumentError, match=rf"must be at most {limit} for this text"):
            batches(ds, 1)

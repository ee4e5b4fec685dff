"""The resumable training order: a pure function of (seed, position) whatever the parallelism;
`start_step=K` equal to the uninterrupted run from batch K on; consumed shards unread and
skipped records undecoded; input pipelines; Position checkpoints; refusals by name."""

from __future__ import annotations

import functools
import json
import os
import pathlib
import shutil

import numpy as np
import pytest

import tfpipe
from tfpipe.errors import ConfigError
from tfpipe.pipeline import plan

from support.pipeline_data import N_ROWS

tf = pytest.importorskip("tensorflow")

# Groups of 2 of the 4 shards and windows of 13 records: their edges fall inside epochs of 37,
# and each shard is read in runs of 3 records (order.run_length), round-robin with the other.
SMALL = {"cycle_length": 2, "shuffle_buffer": 13, "seed": 5}
# Read the files as the order reaches them (cache="memory", which loads every record when the
# iterator starts, is compared with this in the first test).
STREAMED = SMALL | {"cache": "none"}


def batches(ds, n: int) -> list[list]:
    """The raw bytes of every tensor of the first n elements (string tensors: their values)."""
    return [
        [t.numpy().tolist() if t.dtype == tf.string else t.numpy().tobytes() for t in tf.nest.flatten(e)]
        for e in ds.take(n)
    ]


def row_ids(ds, n: int) -> list[list[int]]:
    return [features["row_id"].numpy().tolist() for features, _ in ds.take(n)]


@functools.cache  # one pipeline for the module's tests that read it (the table is made once a session)
def streamed_rows(table_ds: str) -> tuple[int, ...]:
    """The table's row_ids one at a time (batch_size=1, STREAMED), the first 5 x 16 positions of
    the global stream: more than epoch 0 (N_ROWS)."""
    return tuple(b[0] for b in row_ids(tfpipe.build(table_ds, batch_size=1, **STREAMED), 5 * 16))


def options(kind: str) -> dict:
    return {"image_size": 16} if kind == "images" else {}


@pytest.mark.parametrize("kind", ["images", "table"])
def test_start_step_is_the_uninterrupted_run_from_k_on(image_ds, table_ds, kind):
    data = image_ds if kind == "images" else table_ds
    kw = {"batch_size": 4, **STREAMED, **options(kind)}
    whole = batches(tfpipe.build(data, **kw), 24)  # 9 steps an epoch: into the third epoch
    cached = kw | {"cache": "memory"}
    assert batches(tfpipe.build(data, **cached), 24) == whole  # the in-memory cache: the same order
    # 8: 90% of an epoch, streamed; 20: in the third epoch, from the cache.
    assert batches(tfpipe.build(data, start_step=8, **kw), 16) == whole[8:]
    assert batches(tfpipe.build(data, start_step=20, **cached), 4) == whole[20:]


def test_the_order_does_not_depend_on_parallelism(image_ds):
    kw = {"batch_size": 4, "image_size": 16, **SMALL}
    want = batches(tfpipe.build(image_ds, **kw), 12)
    for setting in (
        {"read_parallelism": 1, "map_parallelism": 1, "prefetch": 1},
        {"map_parallelism": 2, "read_parallelism": 2, "private_threadpool_size": 1, "cpu_budget": 1},
        {"max_intra_op_parallelism": 0, "deterministic": True, "cache": "memory"},
    ):
        assert batches(tfpipe.build(image_ds, **kw, **setting), 12) == want, setting


def test_the_cached_order_loads_the_records_once_for_every_iterator(table_ds, tmp_path):
    """cache="memory": the first iterator loads the records and the dataset keeps them, so
    another `iter()` (each Keras epoch or validation) reads no shard (version 2 loaded again,
    every iterator)."""
    root = str(tmp_path / "t")
    shutil.copytree(table_ds, root)
    ds = tfpipe.build(root, batch_size=4, **(SMALL | {"cache": "memory"}))
    first = batches(ds, 3)
    for name in os.listdir(root):
        if name != "tfpipe.json":
            os.remove(os.path.join(root, name))
    assert batches(ds, 3) == first


def test_every_example_once_per_epoch_and_each_epoch_its_own_order(table_ds):
    ids = [i for batch in row_ids(tfpipe.build(table_ds, batch_size=1, **SMALL), 4 * N_ROWS) for i in batch]
    epochs = [ids[e * N_ROWS : (e + 1) * N_ROWS] for e in range(4)]
    assert all(sorted(e) == list(range(N_ROWS)) for e in epochs)
    assert len({tuple(e) for e in epochs}) == 4
    # Epoch 2 on its own, from its first position: a function of (seed, position) alone.
    later = row_ids(tfpipe.build(table_ds, batch_size=1, start_step=2 * N_ROWS, **SMALL), N_ROWS)
    assert [b[0] for b in later] == epochs[2]
    other = row_ids(tfpipe.build(table_ds, batch_size=1, **(SMALL | {"seed": 6})), N_ROWS)
    assert [b[0] for b in other] != epochs[0]


# Recorded with TF 2.21 and Pillow's JPEG encoder on this project's machine kind, for
# order.ORDER_VERSION 2 (permutations by Philox shuffles keyed by structured seeds). A change
# here means seeded runs no longer reproduce old ones, and positions saved by older runs mean
# other examples: bump order.ORDER_VERSION and say so in the changelog.
GOLDEN_ROWS = [[19, 26, 36, 23], [16, 10, 4, 29], [7, 27, 17, 11]]
GOLDEN_LABELS = [[2, 0, 1, 1], [0, 0, 1, 2], [2, 2, 0, 1]]
GOLDEN_SUMS = [
    [78967, 79768, 47060, 76812],
    [101758, 79826, 92670, 135183],
    [107924, 129829, 86651, 103393],
]


def test_golden_order_and_augmentation(image_ds, table_ds):
    assert row_ids(tfpipe.build(table_ds, batch_size=4, seed=1234), 3) == GOLDEN_ROWS
    images = tfpipe.build(image_ds, batch_size=4, image_size=16, seed=1234)
    got = [
        (y.numpy().tolist(), x.numpy().astype(np.int64).sum(axis=(1, 2, 3)).tolist())
        for x, y in images.take(3)
    ]
    assert [labels for labels, _ in got] == GOLDEN_LABELS
    assert [sums for _, sums in got] == GOLDEN_SUMS


def shard_of_rows(root: str) -> dict[int, str]:
    """row_id -> the name of the shard holding it (rows were written in order)."""
    manifest = tfpipe.Manifest.load(root)
    out, first = {}, 0
    for shard in manifest.splits["train"].shards:
        out.update({first + r: shard.name for r in range(shard.examples)})
        first += shard.examples
    return out


def first_group(table_ds: str) -> tuple[set[str], int]:
    """The shards of epoch 0's first group (cycle_length=2) and the records it holds."""
    ids = streamed_rows(table_ds)[:N_ROWS]
    where = shard_of_rows(table_ds)
    first = {where[ids[0]]}
    for i in ids:  # the group's 2 shards are read before any other
        if where[i] not in first and len(first) == 2:
            break
        first.add(where[i])
    size = sum(1 for i in ids if where[i] in first)
    return first, size


@pytest.mark.parametrize("where", ["local", pytest.param("gs", marks=pytest.mark.gcs)])
def test_consumed_shards_are_not_read(table_ds, tmp_path, request, where):
    """The first group's shards are overwritten with zeros of the same size: a start in the
    second group yields the rest of epoch 0 as before, and only epoch 1 trips on them. (Read
    ahead may reach epoch 1 early, but its errors wait for their place in the stream.)"""
    from tfpipe import storage

    if where == "gs":
        root = storage.join(request.getfixturevalue("gcs_bucket"), "t")
        for name in os.listdir(table_ds):
            storage.write_atomic(storage.join(root, name), pathlib.Path(table_ds, name).read_bytes())
    else:
        root = str(shutil.copytree(table_ds, tmp_path / "t"))
    consumed, size = first_group(table_ds)
    k = -(-size // 4)  # the first step wholly inside the second group
    want = row_ids(tfpipe.build(root, batch_size=4, **STREAMED), 9)
    for name in consumed:  # the same size, other bytes: any read of them fails
        path = storage.join(root, name)
        storage.write_atomic(path, b"\0" * storage.size(path), overwrite=True)
    ds = tfpipe.build(root, batch_size=4, start_step=k, **STREAMED)
    assert row_ids(ds, 9 - k) == want[k:]  # the rest of epoch 0, from the second group
    with pytest.raises(tf.errors.InvalidArgumentError, match="|".join(sorted(consumed))):
        row_ids(ds, 9 - k + 6)  # epoch 1 reads them again


def test_skipped_records_are_not_parsed_or_decoded(table_ds):
    """start_step skips serialized records: a preset that counts what it decodes sees the
    first batch, and the few read ahead, never the 90% of an epoch before it."""
    decoded = tf.Variable(0, dtype=tf.int64)

    def count(features, training):
        decoded.assign_add(1)
        return features["row_id"], features["label"]

    counting = tfpipe.Preset(
        name="counting",
        spec={"row_id": tf.io.FixedLenFeature([], tf.int64), "label": tf.io.FixedLenFeature([], tf.int64)},
        map_fn=count,
        batched=False,
    )
    ds = tfpipe.build(
        table_ds, preset=counting, batch_size=2, start_step=16, map_parallelism=1, prefetch=1, **STREAMED
    )
    want = tfpipe.build(table_ds, preset=counting, batch_size=2, **STREAMED)
    next(iter(ds))
    assert 2 <= int(decoded.numpy()) <= 8, int(decoded.numpy())  # 32 records were skipped
    got = [x.numpy().tolist() for x, _ in ds.take(3)]
    assert got == [x.numpy().tolist() for x, _ in want.skip(16).take(3)]


def context(n: int, i: int, replicas: int):
    return tf.distribute.InputContext(
        num_input_pipelines=n, input_pipeline_id=i, num_replicas_in_sync=replicas
    )


def test_input_pipelines_resume_their_own_files(table_ds):
    """Two input pipelines of four shards share them by file; each feeds two of four
    replicas, so it yields two per-replica batches of 2 per step of the global batch 8."""
    for i in range(2):
        kw = {"batch_size": 8, "input_context": context(2, i, 4), **STREAMED}
        whole = row_ids(tfpipe.build(table_ds, **kw), 14)
        assert row_ids(tfpipe.build(table_ds, start_step=4, **kw), 6) == whole[8:], i


def test_input_pipelines_resume_their_share_of_records(table_ds):
    """Eight pipelines for four shards share by record: pipeline i keeps positions i mod 8 of
    the one global stream, so its step k holds positions 16k + i + 8j."""
    stream = streamed_rows(table_ds)
    for i in (0, 5):
        got = row_ids(
            tfpipe.build(table_ds, batch_size=16, start_step=3, input_context=context(8, i, 8), **STREAMED), 2
        )
        assert got == [[stream[16 * k + i + 8 * j] for j in range(2)] for k in (3, 4)], i


def test_position_checkpoint_roundtrip_in_a_custom_loop(table_ds, tmp_path):
    position = tfpipe.resume.Position()
    ds = tfpipe.build(table_ds, batch_size=4, start_step=position, **SMALL)
    want = row_ids(tfpipe.build(table_ds, batch_size=4, **SMALL), 12)
    ckpt = tf.train.Checkpoint(input=position)
    it = iter(ds)
    for _ in range(5):
        next(it)
        position.advance()
    path = ckpt.save(str(tmp_path / "ckpt"))
    size = sum(f.stat().st_size for f in tmp_path.iterdir() if f.name.startswith("ckpt"))
    assert size < 2000  # the step and what it means: no buffer, no records

    restarted = tfpipe.resume.Position()
    again = tfpipe.build(table_ds, batch_size=4, start_step=restarted, **SMALL)  # built before restore
    tf.train.Checkpoint(input=restarted).restore(path).assert_consumed()
    assert restarted.step == 5
    assert row_ids(again, 7) == want[5:]  # the step is read when the iterator starts

    # Restored before build: checked when a pipeline binds.
    early = tfpipe.resume.Position()
    tf.train.Checkpoint(input=early).restore(path)
    with pytest.raises(ConfigError, match=r"global batch_size = 4, this pipeline with 8"):
        tfpipe.build(table_ds, batch_size=8, start_step=early, **SMALL)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"batch_size": 8}, r"the global batch_size = 4, this pipeline with 8"),
        ({"seed": 6}, r"the seed = 5, this pipeline with 6"),
        (
            {"shuffle_buffer": 9},
            r"the window \(shuffle_buffer, capped by ram_budget\) = 13, this pipeline with 9",
        ),
        (
            {"pipelines": 4},
            r"the number of input pipelines \(num_hosts, or input_context.num_input_pipelines\) = 2, "
            "this pipeline with 4",
        ),
        ({"data": "images"}, r"the data \(shard names, counts, sizes, checksums\)"),
    ],
)
def test_a_changed_position_meaning_is_refused_by_name(table_ds, image_ds, tmp_path, change, message):
    saved = tfpipe.resume.Position()
    tfpipe.build(table_ds, batch_size=4, start_step=saved, input_context=context(2, 0, 2), **SMALL)
    saved.advance(3)
    path = tf.train.Checkpoint(input=saved).save(str(tmp_path / "c"))

    position = tfpipe.resume.Position()
    n = change.pop("pipelines", 2)
    data = image_ds if change.pop("data", None) else table_ds
    kw = SMALL | {"batch_size": 4, "input_context": context(n, 0, n)} | change
    tfpipe.build(data, start_step=position, **kw, **({"image_size": 16} if data == image_ds else {}))
    with pytest.raises(
        ConfigError, match="Cannot resume the input: the restored checkpoint counts steps with " + message
    ):
        tf.train.Checkpoint(input=position).restore(path)


def test_a_position_saved_by_an_older_order_is_refused_naming_both_versions(table_ds, tmp_path):
    """A checkpoint of order version 1 (SplitMix64-keyed permutations) means other examples at
    the same step: refused by name, whether restored after build() or before it."""
    from tfpipe.pipeline.order.resumable import ORDER_VERSION

    assert ORDER_VERSION == 2
    now = plan(table_ds, batch_size=4, **SMALL).order.identity()
    old = tfpipe.resume.Position(7)
    old.bind(now | {"order_version": 1})
    path = tf.train.Checkpoint(input=old).save(str(tmp_path / "v1"))
    message = (
        r"Cannot resume the input: the restored checkpoint counts steps with the resumable order's "
        r"version = 1, this pipeline with 2\. .*this tfpipe orders records differently"
    )
    position = tfpipe.resume.Position()
    tfpipe.build(table_ds, batch_size=4, start_step=position, **SMALL)
    with pytest.raises(ConfigError, match=message):
        tf.train.Checkpoint(input=position).restore(path)
    early = tfpipe.resume.Position()
    tf.train.Checkpoint(input=early).restore(path)
    with pytest.raises(ConfigError, match=message):
        tfpipe.build(table_ds, batch_size=4, start_step=early, **SMALL)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"training": False, "start_step": 3}, "start_step resumes training; eval"),
        (
            {"order": "shuffle_buffer", "start_step": 3},
            "start_step needs order='resumable'.*order='shuffle_buffer'",
        ),
        ({"skip_corrupt": True, "start_step": 3}, "start_step cannot be used with skip_corrupt=True"),
        ({"seed": None, "start_step": 3}, "start_step needs seed="),
        ({"start_step": -1}, r"start_step must be an int >= 0 or a tfpipe.Position. Received: start_step=-1"),
        ({"start_step": "3"}, r"start_step must be an int >= 0 or a tfpipe.Position. Received: str '3'"),
        ({"start_step": True}, r"Received: bool True"),
        (  # 4 records a step: beyond 2**62 // 4 the int64 stream position would overflow
            {"start_step": 2**62},
            r"start_step must be an int in \[0, 1152921504606846976\] or a tfpipe.Position: the stream "
            r"position of the order.*2\*\*62.*Received: start_step=4611686018427387904",
        ),
        (
            {"service": "grpc://localhost:1", "start_step": 3},
            "start_step needs order='resumable'.*tf.data service",
        ),
        (
            {"deterministic": False, "order": "resumable"},
            "order='resumable' is not possible here: deterministic=False",
        ),
        ({"cache": "disk:/tmp/x", "start_step": 1}, r"caches in memory only"),
        ({"cache": "memory", "skip_corrupt": True, "order": "resumable"}, "skip_corrupt may drop some"),
        ({"order": "random"}, r"order must be one of \('resumable', 'shuffle_buffer'\)"),
    ],
)
def test_what_the_resumable_order_cannot_do_is_refused(table_ds, kwargs, message):
    with pytest.raises(ConfigError, match=message):
        plan(table_ds, batch_size=4, **(SMALL | kwargs))


def test_foreign_files_and_other_settings_keep_the_shuffle_buffer_saying_why(foreign_ds, table_ds):
    with pytest.warns(tfpipe.pipeline.DefaultWarning):
        p = plan(os.path.join(foreign_ds, "train-*"), batch_size=4, image_size=16)
    assert p.config.order == "shuffle_buffer" and p.order is None
    assert (
        "order='shuffle_buffer', not the default 'resumable': files without a tfpipe manifest" in p.describe()
    )
    with pytest.raises(
        ConfigError, match="start_step needs order='resumable', which is not possible here: files"
    ):
        plan(os.path.join(foreign_ds, "train-*"), batch_size=4, image_size=16, seed=1, start_step=2)
    for setting, why in (
        ({"deterministic": False}, "deterministic=False"),
        ({"cache": "disk:/tmp/c"}, "disk"),
    ):
        q = plan(table_ds, batch_size=4, **setting)
        assert q.config.order == "shuffle_buffer" and why in q.describe()
    r = plan(table_ds, batch_size=4)
    assert r.config.order == "resumable" and r.config.deterministic is True
    assert f"order: resumable, seed {r.config.seed}" in r.describe() and "drew seed=" in r.describe()
    assert "starting at step 0 (order version 2)" in r.describe()
    assert r.cache == "memory"  # 37 rows fit: the resumable order caches them in memory


@pytest.mark.slow
def test_keras_callback_refuses_a_restart_with_other_settings(table_ds, tmp_path):
    import keras

    backup = str(tmp_path / "backup")
    os.makedirs(backup)
    first = tfpipe.resume.Position()
    tfpipe.build(table_ds, batch_size=4, start_step=first, **SMALL)
    state = {"identity": first.identity, "end_step": 27, "start_step": 0}
    pathlib.Path(backup, tfpipe.resume.STATE_NAME).write_text(json.dumps(state))

    position = tfpipe.resume.Position()
    ds = tfpipe.build(
        table_ds, batch_size=4, start_step=position, features=["float32_0"], **(SMALL | {"seed": 9})
    )
    inputs = {"float32_0": keras.Input((), name="float32_0")}
    model = keras.Model(inputs, keras.layers.Dense(3)(keras.ops.expand_dims(inputs["float32_0"], -1)))
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    with pytest.raises(
        ConfigError, match=r"the interrupted run \(.*tfpipe_input.json\) counts steps with the seed = 5"
    ):
        model.fit(
            ds,
            epochs=1,
            steps_per_epoch=2,
            verbose=0,
            callbacks=[tfpipe.resume.KerasCallback(position, backup)],
        )
    with pytest.raises(ConfigError, match=r"needs the tfpipe\.resume\.Position the dataset was built with"):
        tfpipe.resume.KerasCallback(ds, backup)

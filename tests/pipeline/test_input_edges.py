"""build() on the edges of its input: sharding across input pipelines, corrupt data, bad
arguments, the cache decision, and gs:// through the local GCS emulator."""

from __future__ import annotations

import os
import pathlib
import shutil

import numpy as np
import pytest

import tfpipe
from tfpipe.errors import ConfigError, DataError, ManifestError
from tfpipe.pipeline import PipelineConfig, ShardingWarning, plan, skipped

from support.pipeline_data import N_IMAGES, N_ROWS, corrupt_shard, image_row, jpeg, rewrite_manifest_dataset

tf = pytest.importorskip("tensorflow")


def ids(ds) -> list[int]:
    return [int(i) for features, _ in ds for i in features["row_id"].numpy()]


def context(pipelines: int, index: int, replicas: int | None = None):
    return tf.distribute.InputContext(
        num_input_pipelines=pipelines, input_pipeline_id=index, num_replicas_in_sync=replicas or pipelines
    )


# ---- sharding across input pipelines ----


def test_input_context_shards_by_file(table_ds):
    parts = []
    for i in range(2):
        p = plan(table_ds, batch_size=8, training=False, input_context=context(2, i))
        assert p.shard_by == "file" and p.batch_size == 4 and p.global_batch_size == 8
        assert len(p.files) == 2
        parts.append(ids(p.dataset()))
        assert (
            p.options().experimental_distribute.auto_shard_policy == tf.data.experimental.AutoShardPolicy.OFF
        )
    assert not set(parts[0]) & set(parts[1])
    assert sorted(parts[0] + parts[1]) == list(range(N_ROWS))
    # Training: each pipeline keeps to its own files across epochs.
    train = plan(table_ds, batch_size=8, input_context=context(2, 0), seed=1)
    seen = {i for features, _ in train.dataset().take(20) for i in features["row_id"].numpy()}
    assert seen == set(parts[0])


def test_input_context_falls_back_to_records_with_a_warning(table_ds):
    parts = []
    for i in range(5):  # 5 pipelines, 4 files
        with pytest.warns(ShardingWarning, match="sharding by record instead of by file"):
            p = plan(table_ds, batch_size=5, training=False, input_context=context(5, i))
        assert p.shard_by == "record" and p.batch_size == 1
        assert [s.name for s in p.stages][:4] == ["list_files", "interleave", "shard", "cache"]
        part = ids(p.dataset())
        assert len(part) == p.examples
        parts.append(part)
    flat = [x for part in parts for x in part]
    assert sorted(flat) == list(range(N_ROWS))  # every record exactly once across pipelines


def test_per_replica_batch_must_divide_evenly(table_ds):
    with pytest.raises(ConfigError, match=r"divide evenly among the 4 replicas.*batch_size=10.*Use 8 or 12"):
        plan(table_ds, batch_size=10, input_context=context(1, 0, replicas=4))
    p = plan(table_ds, batch_size=12, input_context=context(2, 1, replicas=4))
    assert p.batch_size == 3
    assert p.dataset().element_spec[1].shape == (3,)


# ---- corrupt data ----


def test_corrupt_shard_error_names_the_shard(image_ds, tmp_path):
    root = shutil.copytree(image_ds, tmp_path / "ds")
    bad = corrupt_shard(str(root), 2, "crc")
    ds = tfpipe.build(str(root), batch_size=4, training=False, image_size=16)
    with pytest.raises(tf.errors.InvalidArgumentError, match="Corrupt TFRecord shard") as e:
        for _ in ds:
            pass
    assert bad in str(e.value) and "skip_corrupt=True" in str(e.value)
    assert "read 1 of 9 records, then hit bad data" in str(e.value)


def test_truncated_shard_is_refused_by_size_before_reading(image_ds, tmp_path):
    root = shutil.copytree(image_ds, tmp_path / "ds")
    bad = corrupt_shard(str(root), 2, "truncate")
    listed = tfpipe.Manifest.load(str(root)).splits["train"].shards[2].bytes
    with pytest.raises(DataError, match=f"{bad} holds {listed - 100} bytes where the manifest says {listed}"):
        tfpipe.build(str(root), batch_size=4, training=False, image_size=16)


def test_skip_corrupt_shard_counts_lost_records(image_ds, tmp_path):
    root = shutil.copytree(image_ds, tmp_path / "ds")
    corrupt_shard(str(root), 1, "crc")  # second record of shard 1 is bad: 1 read, the rest lost
    manifest = tfpipe.Manifest.load(str(root))
    in_shard = manifest.splits["train"].shards[1].examples
    ds = tfpipe.build(str(root), batch_size=4, training=False, image_size=16, skip_corrupt=True)
    n = sum(int(y.shape[0]) for _, y in ds)
    counts = skipped(ds)
    assert counts.corrupt_shards == 1 and counts.records_lost == in_shard - 1
    assert n == N_IMAGES - counts.records_lost
    assert counts.records == counts.records_lost


def test_corrupt_foreign_shard_is_found_by_size(foreign_ds, tmp_path):
    for name in os.listdir(foreign_ds):
        shutil.copy(os.path.join(foreign_ds, name), tmp_path / name)
    path = str(tmp_path / sorted(os.listdir(tmp_path))[0])
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 50)
    with pytest.raises(tf.errors.InvalidArgumentError, match="Corrupt TFRecord shard") as e:
        for _ in tfpipe.build(str(tmp_path / "train-*"), batch_size=4, training=False, image_size=16):
            pass
    assert path in str(e.value)
    ds = tfpipe.build(
        str(tmp_path / "train-*"), batch_size=4, training=False, image_size=16, skip_corrupt=True
    )
    for _ in ds:
        pass
    counts = skipped(ds)
    assert counts.corrupt_shards == 1 and counts.bytes_lost > 0 and counts.records_lost == 0


def bad_image_dataset(root: str) -> str:
    rows = [image_row(i, 1 + i % 3) for i in range(9)]
    good = jpeg(100)
    rows[4] = image_row(4, 2, encoded=good[: len(good) // 2])  # truncated
    rows[7] = image_row(7, 1, encoded=b"not a jpeg at all")
    return rewrite_manifest_dataset(root, [rows[:5], rows[5:]])


def test_undecodable_image_error_names_shard_and_file(tmp_path):
    root = bad_image_dataset(str(tmp_path / "ds"))
    ds = tfpipe.build(root, batch_size=3, training=False, image_size=16)
    with pytest.raises(tf.errors.InvalidArgumentError, match="Undecodable image") as e:
        for _ in ds:
            pass
    message = str(e.value)
    # Decoding runs in parallel, so either bad record may be met first.
    assert ("train-00000-of-00002" in message and "img_004.JPEG" in message) or (
        "train-00001-of-00002" in message and "img_007.JPEG" in message
    )


def test_skip_corrupt_images_counts_them(tmp_path):
    root = bad_image_dataset(str(tmp_path / "ds"))
    for training in (False, True):
        ds = tfpipe.build(root, batch_size=3, training=training, image_size=16, skip_corrupt=True)
        labels = [y.numpy() for _, y in ds.take(20 if training else -1)]
        if not training:
            assert sum(len(y) for y in labels) == 7
            counts = skipped(ds)
            assert counts.bad_images == 2 and counts.failed_decodes == 0 and counts.records == 2
        else:
            assert skipped(ds).bad_images >= 2  # every epoch meets them again
    with pytest.raises(ConfigError, match="skipped\\(\\) needs the dataset"):
        skipped(tf.data.Dataset.range(3))


# ---- bad arguments ----


def test_missing_manifest_and_files(tmp_path, image_ds):
    with pytest.raises(ManifestError, match=r"has no tfpipe.json"):
        tfpipe.build(str(tmp_path), batch_size=4)
    with pytest.raises(ManifestError, match="does not exist"):
        tfpipe.build(str(tmp_path / "nowhere"), batch_size=4)
    with pytest.raises(DataError, match="No files match"):
        tfpipe.build(str(tmp_path / "train-*"), batch_size=4)
    with pytest.raises(DataError, match=r"do not exist: \[.*missing-file"):
        tfpipe.build([str(tmp_path / "missing-file")], batch_size=4)
    root = shutil.copytree(image_ds, tmp_path / "ds")
    gone = tfpipe.Manifest.load(str(root)).shard_paths("train")[3]
    os.remove(gone)
    with pytest.raises(DataError, match=f"listed in .*tfpipe.json.*{os.path.basename(gone)}"):
        tfpipe.build(str(root), batch_size=4)
    with pytest.raises(ManifestError, match="has no split 'test'"):
        tfpipe.build(image_ds, batch_size=4, split="test")


def test_preset_keys_absent_from_records(table_ds, image_ds, foreign_ds):
    with pytest.raises(
        DataError, match=r"Preset 'imagenet' needs feature\(s\) \['image/encoded'.*manifest schema"
    ):
        tfpipe.build(table_ds, preset="imagenet", batch_size=4)
    with pytest.raises(DataError, match="first record of"):
        tfpipe.build(
            os.path.join(foreign_ds, "train-*"), preset="imagenet", batch_size=4, image_key="image/jpeg"
        )
    with pytest.raises(DataError, match=r"parses feature 'image/class/synset' as int64.*hold bytes"):
        tfpipe.build(image_ds, preset="imagenet", batch_size=4, label_key="image/class/synset")


@pytest.mark.parametrize("batch_size", [0, -3, 2.5, True, None])
def test_batch_size_must_be_positive(image_ds, batch_size):
    with pytest.raises(ConfigError, match=f"batch_size must be a positive int.*{batch_size!r}"):
        tfpipe.build(image_ds, batch_size=batch_size)


def test_config_validation_names_field_and_value(image_ds):
    for kwargs, field in [
        ({"cache": "ram"}, "cache"),
        ({"cycle_length": 0}, "cycle_length"),
        ({"seed": "7"}, "seed"),
        ({"processing_mode": "x"}, "processing_mode"),
        ({"map_parallelism": 0}, "map_parallelism"),
        ({"deterministic": 1}, "deterministic"),
        ({"cache": "disk:"}, "cache"),
    ]:
        with pytest.raises(ConfigError, match=f"{field} must be .* Received: {field}="):
            PipelineConfig(**kwargs)
    with pytest.raises(ConfigError, match=r"Unknown option.*'imagesize'.*'imagenet'"):
        tfpipe.build(image_ds, batch_size=4, imagesize=32)
    with pytest.raises(ConfigError, match="preset must be one of"):
        tfpipe.build(image_ds, batch_size=4, preset="nope")
    with pytest.raises(DataError, match="fewer than one batch of 64 records with drop_remainder=True"):
        tfpipe.build(image_ds, batch_size=64, training=False, drop_remainder=True)


# ---- cache ----


def test_cache_auto_follows_the_ram_budget(image_ds, tmp_path):
    buffered = {
        "order": "shuffle_buffer"
    }  # the resumable order does not cache (order/test_training_order.py)
    assert plan(image_ds, batch_size=4, **buffered).cache == "memory"
    manifest_bytes = tfpipe.Manifest.load(image_ds).splits["train"].bytes
    assert plan(image_ds, batch_size=4, ram_budget=2 * manifest_bytes + 2, **buffered).cache == "memory"
    assert plan(image_ds, batch_size=4, ram_budget=2 * manifest_bytes - 2, **buffered).cache == "none"
    disk = plan(image_ds, batch_size=4, training=False, image_size=16, cache=f"disk:{tmp_path}/c")
    first = [y.numpy().tolist() for _, y in disk.dataset()]
    assert first == [y.numpy().tolist() for _, y in disk.dataset()]
    assert any(name.startswith("c") for name in os.listdir(tmp_path))


# ---- gs:// ----


@pytest.mark.gcs
def test_reads_gs_dataset_and_glob(image_ds, foreign_ds, gcs_bucket):
    from tfpipe import storage

    dest = gcs_bucket + "/imagenet"
    for name in os.listdir(image_ds):
        storage.write_atomic(
            storage.join(dest, name), pathlib.Path(os.path.join(image_ds, name)).read_bytes()
        )
    for name in os.listdir(foreign_ds):
        storage.write_atomic(
            storage.join(gcs_bucket, "foreign", name),
            pathlib.Path(os.path.join(foreign_ds, name)).read_bytes(),
        )
    ds = tfpipe.build(dest, batch_size=8, training=False, image_size=16)
    labels = np.concatenate([y.numpy() for _, y in ds])
    assert np.bincount(labels).tolist() == [13, 12, 12]
    assert tfpipe.steps_per_epoch(dest, 8) == 4
    foreign = tfpipe.build(gcs_bucket + "/foreign/train-*", batch_size=8, training=False, image_size=16)
    assert sum(int(y.shape[0]) for _, y in foreign) == N_IMAGES
    train = tfpipe.build(dest, batch_size=8, image_size=16)
    assert next(iter(train))[0].shape == (8, 16, 16, 3)


def test_gzip_shards_read_and_corruption_is_named(table_ds, tmp_path):
    csv = os.path.join(os.path.dirname(table_ds), "table.csv")
    dest = str(tmp_path / "gz")
    tfpipe.convert(csv, dest, label="label", missing="fill", num_shards=3, compression="gzip", workers=1)
    p = plan(dest, batch_size=8, training=False)
    assert p.source.compression == "GZIP" and p.files[0].endswith(".gz")
    assert sorted(ids(p.dataset())) == list(range(N_ROWS))
    path = p.files[1]
    data = bytearray(pathlib.Path(path).read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size: only reading finds it
    with open(path, "wb") as f:
        f.write(bytes(data))
    with pytest.raises(tf.errors.InvalidArgumentError, match="Corrupt TFRecord shard") as e:
        ids(tfpipe.build(dest, batch_size=8, training=False))
    assert path in str(e.value)
    with open(path, "wb") as f:
        f.write(bytes(data[: len(data) // 2]))
    with pytest.raises(
        DataError, match=f"{path} holds {len(data) // 2} bytes where the manifest says {len(data)}"
    ):
        tfpipe.build(dest, batch_size=8, training=False)

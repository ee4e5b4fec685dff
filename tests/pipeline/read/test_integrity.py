"""build() never reads silently wrong data: globs and lists of tfpipe's own shards go through
their manifest, eval keeps the source order and knows its length, partial sets and swapped
or miscounted shards are refused by name, foreign label defaults are said out loud."""

from __future__ import annotations

import glob
import json
import os
import pathlib
import random
import shutil
import warnings

import numpy as np
import pytest

import tfpipe
from tfpipe.errors import DataError, ManifestError
from tfpipe.pipeline import DefaultWarning, plan, skipped

from support.pipeline_data import PHOTOS_PER_CLASS, image_row, jpeg, shard_row_ids, write_tf_examples

tf = pytest.importorskip("tensorflow")


def labels_of(ds) -> list[int]:
    return [int(v) for _, y in ds for v in y.numpy()]


def ids(ds) -> list[int]:
    return [int(i) for features, _ in ds for i in features["row_id"].numpy()]


# ---- item 1: globs and lists of tfpipe's own shards use the manifest ----


def test_glob_and_list_of_own_shards_read_through_the_manifest(photos_ds):
    assert tfpipe.Manifest.load(photos_ds).label_offset == 0  # the "images" layout: 0-based
    expected = labels_of(
        tfpipe.build(photos_ds, preset="imagenet", batch_size=64, training=False, image_size=16)
    )
    files = sorted(glob.glob(os.path.join(photos_ds, "train-*")))
    shuffled = random.Random(3).sample(files, len(files))
    for data in (os.path.join(photos_ds, "train-*"), shuffled):
        with warnings.catch_warnings():
            warnings.simplefilter("error", DefaultWarning)  # no foreign default applies
            p = plan(data, preset="imagenet", batch_size=64, training=False, image_size=16)
        assert p.source.manifest is not None and p.source.split == "train"
        assert list(p.files) == files  # manifest order, whatever order the list had
        assert "read through" in p.describe() and "label_offset=0 from the manifest" in p.describe()
        got = labels_of(p.dataset())
        assert got == expected and set(got) == {0, 1, 2}
        assert np.bincount(got).tolist() == PHOTOS_PER_CLASS
    assert tfpipe.steps_per_epoch(os.path.join(photos_ds, "train-*"), 4) == 4


def test_glob_with_files_the_manifest_does_not_list_is_refused(photos_ds, tmp_path):
    root = shutil.copytree(photos_ds, tmp_path / "out")
    shutil.copy(root / "train-00000-of-00003", root / "train-extra")
    with pytest.raises(DataError, match=r"does not list: \[.*train-extra"):
        tfpipe.build(str(root / "train-*"), batch_size=4, image_size=16)
    with pytest.raises(DataError, match=r"split='validation', but .* holds shards of split 'train'"):
        tfpipe.build(sorted(glob.glob(str(root / "train-0*"))), batch_size=4, split="validation")
    with pytest.raises(DataError, match="more than once"):
        tfpipe.build([str(root / "train-00000-of-00003")] * 2, batch_size=4)


def test_tfds_style_label_key_is_read_as_stored(tmp_path):
    # TFDS's imagenet2012 records: "image" and a 0-based "label", written by TF itself.
    rows = [{"image": jpeg(i, (32, 24)), "label": i % 3} for i in range(11)]
    path = str(tmp_path / "imagenet2012-validation.tfrecord-00000-of-00001")
    write_tf_examples(path, rows)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DefaultWarning)
        p = plan(
            path,
            preset="imagenet",
            batch_size=4,
            training=False,
            image_size=16,
            image_key="image",
            label_key="label",
        )
    assert labels_of(p.dataset()) == [i % 3 for i in range(11)]
    assert "read as stored (label_offset=0)" in p.describe()


def test_a_label_beyond_int32_is_refused_not_wrapped(tmp_path):
    # int64 labels become int32 at the label guard: 2**31 + 5 would wrap to a negative id.
    rows = [{"image": jpeg(i, (32, 24)), "label": (1 << 31) + 5 if i == 2 else i} for i in range(5)]
    path = str(tmp_path / "wide-00000-of-00001")
    write_tf_examples(path, rows)
    ds = tfpipe.build(
        path,
        preset="imagenet",
        batch_size=5,
        training=False,
        image_size=16,
        image_key="image",
        label_key="label",
    )
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=r"Labels beyond int32 .*Largest label:\] \[2147483653\]"
    ):
        labels_of(ds)


def test_foreign_default_offset_below_zero_is_an_error(tmp_path):
    # imagenet_to_gcs keys but 0-based labels: the default offset 1 would give -1.
    rows = [image_row(i, i % 3, jpeg(i, (32, 24))) for i in range(7)]
    path = str(tmp_path / "train-00000-of-00001")
    write_tf_examples(path, rows)
    with pytest.warns(DefaultWarning, match="label_offset=1"):
        ds = tfpipe.build(path, batch_size=4, training=False, image_size=16)
    with pytest.raises(
        tf.errors.InvalidArgumentError, match="Labels below 0 after subtracting label_offset=1"
    ):
        labels_of(ds)
    assert sorted(
        set(labels_of(tfpipe.build(path, batch_size=4, training=False, image_size=16, label_offset=0)))
    ) == [0, 1, 2]


# ---- item 6: eval keeps the source order ----


def test_eval_yields_records_in_manifest_order(table_ds):
    per_shard = shard_row_ids(table_ds)
    assert len(per_shard) == 4 and all(per_shard)
    expected = [i for shard in per_shard for i in shard]
    assert ids(tfpipe.build(table_ds, batch_size=8, training=False)) == expected
    # The same with several input pipelines: each reads its own shards, in order.
    for i in range(2):
        ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=i, num_replicas_in_sync=2)
        part = ids(tfpipe.build(table_ds, batch_size=8, training=False, input_context=ctx))
        assert part == per_shard[i] + per_shard[i + 2]


def test_eval_images_line_up_with_the_source(image_ds):
    files = tfpipe.Manifest.load(image_ds).shard_paths("train")
    spec = {"image/class/label": tf.io.FixedLenFeature([], tf.int64)}
    stored = [
        int(tf.io.parse_single_example(r, spec)["image/class/label"]) - 1
        for f in files
        for r in tf.data.TFRecordDataset(f)
    ]
    assert labels_of(tfpipe.build(image_ds, batch_size=5, training=False, image_size=16)) == stored


# ---- item 7: the eval dataset knows its length ----


def test_eval_cardinality_from_the_manifest(table_ds, image_ds):
    assert int(tfpipe.build(table_ds, batch_size=8, training=False).cardinality()) == 5  # ceil(37/8)
    assert int(tfpipe.build(table_ds, batch_size=8, training=False, drop_remainder=True).cardinality()) == 4
    ctx = tf.distribute.InputContext(num_input_pipelines=5, input_pipeline_id=1, num_replicas_in_sync=5)
    with pytest.warns(tfpipe.pipeline.ShardingWarning):
        p = plan(table_ds, batch_size=5, training=False, input_context=ctx)
    assert int(p.dataset().cardinality()) == p.examples == len(ids(p.dataset()))
    images = tfpipe.build(image_ds, batch_size=8, training=False, image_size=16)
    assert int(images.cardinality()) == 5
    # skip_corrupt may drop records, so the length is not asserted, and that is said.
    lossy = plan(image_ds, batch_size=8, training=False, image_size=16, skip_corrupt=True)
    assert int(lossy.dataset().cardinality()) == tf.data.UNKNOWN_CARDINALITY
    assert "length is unknown" in lossy.describe()


def test_keras_evaluate_does_not_run_out_of_data(table_ds):
    import keras

    val = tfpipe.build(table_ds, batch_size=8, training=False, features=["float32_0"], mask_suffix="_missing")
    inputs = {k: keras.Input((), name=k, dtype=v.dtype.name) for k, v in val.element_spec[0].items()}
    x = keras.layers.Concatenate()(
        [keras.ops.expand_dims(keras.ops.cast(v, "float32"), -1) for v in inputs.values()]
    )
    model = keras.Model(inputs, keras.layers.Dense(3)(x))
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.evaluate(val, verbose=0)
        model.evaluate(val, verbose=0)
    assert not [w for w in caught if "ran out of data" in str(w.message)]


# ---- item 15: no partial sets ----


def test_interrupted_conversion_is_not_read_through_a_glob(table_ds, tmp_path):
    # What a kill leaves: some shards committed, no manifest (it is written last).
    root = shutil.copytree(table_ds, tmp_path / "out")
    os.remove(root / "tfpipe.json")
    os.remove(root / "train-00001-of-00004")
    os.remove(root / "train-00003-of-00004")
    with pytest.raises(
        DataError, match=r"2 of the 4 shards named train-NNNNN-of-00004 .*missing indices \[1, 3\]"
    ):
        tfpipe.build(str(root / "train-*"), batch_size=8, training=False)
    with pytest.raises(ManifestError, match=r"did not finish.*--resume") as e:
        tfpipe.build(str(root), batch_size=8)
    assert "train-*" not in str(e.value)


def test_partial_glob_of_a_manifest_split_names_the_missing_shards(table_ds):
    with pytest.raises(
        DataError, match=r"holds 2 of the 4 shards of split 'train' .*missing shard indices \[0, 2\]"
    ):
        tfpipe.build(os.path.join(table_ds, "train-0000[13]-*"), batch_size=8, training=False)


def test_foreign_set_with_out_of_range_index_is_refused(tmp_path):
    for k in (0, 1, 2):
        write_tf_examples(str(tmp_path / f"data-{k:05d}-of-00002"), [{"x": k}])
    with pytest.raises(DataError, match=r"shards named data-NNNNN-of-00002 .*indices \[2\] out of range"):
        tfpipe.build(str(tmp_path / "data-*"), preset="tabular", label="x", batch_size=1, training=False)


# ---- item 16 and counts: swapped or miscounted shards ----


def same_count_siblings(root: str) -> tuple[int, int]:
    shards = tfpipe.Manifest.load(root).splits["train"].shards
    for a in range(len(shards)):
        for b in range(len(shards)):
            if a != b and shards[a].examples == shards[b].examples and shards[a].bytes != shards[b].bytes:
                return a, b
    raise AssertionError("fixture has no same-count siblings of different sizes")


def test_shard_swapped_for_a_same_count_sibling_is_refused(image_ds, tmp_path):
    root = str(shutil.copytree(image_ds, tmp_path / "ds"))
    a, b = same_count_siblings(root)
    paths = tfpipe.Manifest.load(root).shard_paths("train")
    shutil.copy(paths[b], paths[a])
    with pytest.raises(
        DataError, match=f"{paths[a]} holds {os.path.getsize(paths[b])} bytes where the manifest says"
    ):
        tfpipe.build(root, batch_size=4, training=False, image_size=16)


def test_wrong_count_says_what_was_found(table_ds, tmp_path):
    root = str(shutil.copytree(table_ds, tmp_path / "ds"))
    manifest_path = os.path.join(root, "tfpipe.json")
    obj = json.loads(pathlib.Path(manifest_path).read_text())
    shard = obj["splits"]["train"]["shards"][1]
    real = shard["examples"]
    shard["examples"] += 2
    obj["splits"]["train"]["examples"] += 2
    pathlib.Path(manifest_path).write_text(json.dumps(obj))
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
        ids(tfpipe.build(root, batch_size=8, training=False))
    message = str(e.value)
    assert f"reads cleanly to its end but holds {real} records in {shard['bytes']} bytes" in message
    assert f"the manifest says {real + 2} records" in message and shard["name"] in message
    assert "CRC" not in message
    # skip_corrupt does not hide it either: this is not corruption.
    with pytest.raises(tf.errors.InvalidArgumentError, match="reads cleanly to its end"):
        ids(tfpipe.build(root, batch_size=8, training=False, skip_corrupt=True))


def test_corrupt_shard_counts_and_order_with_skip_corrupt(table_ds, tmp_path):
    root = str(shutil.copytree(table_ds, tmp_path / "ds"))
    per_shard = shard_row_ids(root)
    path = tfpipe.Manifest.load(root).shard_paths("train")[2]
    data = bytearray(pathlib.Path(path).read_bytes())
    data[len(data) - 8] ^= 0xFF  # inside the last record: the shard loses only that one
    pathlib.Path(path).write_bytes(bytes(data))
    ds = tfpipe.build(root, batch_size=8, training=False, skip_corrupt=True)
    got = ids(ds)
    assert got == per_shard[0] + per_shard[1] + per_shard[2][:-1] + per_shard[3]
    counts = skipped(ds)
    assert counts.corrupt_shards == 1 and counts.records_lost == 1


def test_wrong_count_in_a_gzip_shard_is_found_by_its_trailer(table_ds, tmp_path):
    csv = os.path.join(os.path.dirname(table_ds), "table.csv")
    root = str(tmp_path / "gz")
    tfpipe.convert(csv, root, label="label", missing="fill", num_shards=3, compression="gzip", workers=1)
    manifest_path = os.path.join(root, "tfpipe.json")
    obj = json.loads(pathlib.Path(manifest_path).read_text())
    shard = obj["splits"]["train"]["shards"][1]
    shard["examples"] -= 1
    obj["splits"]["train"]["examples"] -= 1
    pathlib.Path(manifest_path).write_text(json.dumps(obj))
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
        ids(tfpipe.build(root, batch_size=8, training=False))
    assert (
        f"{shard['name']} reads cleanly to its end but holds {shard['examples'] + 1} records, "
        f"where the manifest says {shard['examples']}"
    ) in str(e.value)

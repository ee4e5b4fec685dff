"""Image folder conversion: the imagenet_to_gcs layout, oddities, labels, workers, resizing."""

import os
import pathlib

import numpy as np
import pandas as pd
import pytest

import tfpipe
from tfpipe.convert.detect import detect_format
from tfpipe.errors import DataError
from tfpipe.format.manifest import Manifest
from tfpipe.testing import fake_data

from support.cli import run_cli

CLASSES, PER_CLASS = 3, [5, 4, 6]  # 15 good images + the oddities


@pytest.fixture(scope="module")
def tf():
    from tfpipe._tf import tf as load

    return load()


@pytest.fixture(scope="module")
def imagenet_tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("ilsvrc") / "train"
    fake_data.write_image_folder(root, classes=CLASSES, per_class=PER_CLASS, size=(64, 48))
    odd = fake_data.write_oddities(root, classes=fake_data.class_names(CLASSES), generic=False)
    return str(root), odd


@pytest.fixture(scope="module")
def converted(imagenet_tree, tmp_path_factory):
    src, _ = imagenet_tree
    dest = str(tmp_path_factory.mktemp("out"))
    return tfpipe.convert(src, dest, num_shards=4, workers=1)


def records(tf, manifest, split="train"):
    ds = tf.data.TFRecordDataset(manifest.shard_paths(split), compression_type=manifest.tf_compression)
    spec = manifest.schema.parse_spec()
    return [{k: v.numpy() for k, v in tf.io.parse_single_example(r, spec).items()} for r in ds]


def test_imagenet_layout_keys_labels_and_pixels(tf, converted, imagenet_tree):
    _, odd = imagenet_tree
    assert converted.layout == "imagenet" and converted.label_offset == 1
    synsets = fake_data.class_names(CLASSES)
    assert converted.class_names == tuple(synsets)
    recs = records(tf, converted)
    good = sum(PER_CLASS) + 4  # + cmyk, grayscale, png_as_jpeg, progressive
    assert len(recs) == converted.splits["train"].examples == good
    for r in recs:
        assert r["image/class/label"] == synsets.index(r["image/class/synset"].decode()) + 1  # 1-based
        assert r["image/format"] == b"JPEG" and r["image/colorspace"] == b"RGB" and r["image/channels"] == 3
        img = tf.io.decode_jpeg(r["image/encoded"]).numpy()
        assert img.shape == (r["image/height"], r["image/width"], 3) == (48, 64, 3)
        assert r["image/filename"].decode().startswith(r["image/class/synset"].decode())
        assert tf.io.extract_jpeg_shape(r["image/encoded"]).numpy().tolist() == [48, 64, 3]
    names = {r["image/filename"].decode() for r in recs}
    for kind in ("cmyk", "grayscale", "png_as_jpeg", "progressive"):
        assert os.path.basename(odd[kind]) in names, kind


def test_undecodable_files_are_skipped_with_reasons(converted, imagenet_tree):
    _, odd = imagenet_tree
    skipped = {s.input: s.reason for s in converted.splits["train"].skipped}
    assert set(skipped) == {odd[k] for k in fake_data.UNDECODABLE_ODDITIES}
    assert "empty" in skipped[odd["empty"]]
    assert "truncated" in skipped[odd["truncated"]].lower()
    assert skipped[odd["not_image"]]


def test_every_shard_mixes_classes(tf, converted):
    for path in converted.shard_paths("train"):
        ds = tf.data.TFRecordDataset(path)
        labels = {
            tf.io.parse_single_example(r, converted.schema.parse_spec())["image/class/label"].numpy()
            for r in ds
        }
        assert len(labels) >= 2, path
    counts = [s.examples for s in converted.splits["train"].shards]
    assert sum(counts) == 19


def test_strict_fails_naming_the_file(imagenet_tree, tmp_path):
    src, _ = imagenet_tree
    with pytest.raises(DataError, match=r"_odd_(truncated|empty|not_image)\.JPEG: .*--strict"):
        tfpipe.convert(src, str(tmp_path / "out"), num_shards=2, strict=True, workers=1)
    assert not (tmp_path / "out" / "tfpipe.json").exists()


def test_output_bytes_do_not_depend_on_workers(converted, imagenet_tree, tmp_path):
    src, _ = imagenet_tree
    two = tfpipe.convert(src, str(tmp_path / "w2"), num_shards=4, workers=2)
    assert [s.checksum for s in two.splits["train"].shards] == [
        s.checksum for s in converted.splits["train"].shards
    ]
    for a, b in zip(two.shard_paths("train"), converted.shard_paths("train"), strict=True):
        assert pathlib.Path(a).read_bytes() == pathlib.Path(b).read_bytes()


def test_generic_images_format_zero_based_and_offset(tf, tmp_path):
    src = tmp_path / "pets"
    fake_data.write_image_folder(src, classes=2, per_class=3, size=(40, 30), imagenet_names=False)
    odd = fake_data.write_oddities(src, classes=fake_data.class_names(2, imagenet_names=False), generic=True)
    assert detect_format(str(src)) == "images"
    m = tfpipe.convert(str(src), str(tmp_path / "out"), num_shards=2)
    assert m.layout == "images" and m.label_offset == 0
    recs = records(tf, m)
    by_name = {r["image/filename"].decode(): r for r in recs}
    for kind in ("gif", "bmp", "webp", "rgba_png"):
        r = by_name[os.path.basename(odd[kind])]
        assert tf.io.decode_jpeg(r["image/encoded"]).shape == (48, 64, 3), kind  # oddities are 64x48
    assert {r["image/class/label"] for r in recs} == {0, 1}
    shifted = tfpipe.convert(str(src), str(tmp_path / "out1"), num_shards=2, label_offset=1)
    assert {r["image/class/label"] for r in records(tf, shifted)} == {1, 2}


def test_validation_split_joins_train_with_the_same_labels(tf, tmp_path):
    val = tmp_path / "val"
    pairs = fake_data.write_validation_flat(
        val, tmp_path / "labels.txt", classes=CLASSES, count=7, size=(64, 48)
    )
    dest = tmp_path / "both"
    train_src = tmp_path / "train"
    fake_data.write_image_folder(train_src, classes=CLASSES, per_class=2, size=(64, 48))
    tfpipe.convert(str(train_src), str(dest), num_shards=2)
    m = tfpipe.convert(
        str(val), str(dest), split="validation", labels_file=str(tmp_path / "labels.txt"), num_shards=2
    )
    assert set(m.splits) == {"train", "validation"}
    assert sorted(os.listdir(dest)) == sorted(
        [
            "tfpipe.json",
            "train-00000-of-00002",
            "train-00001-of-00002",
            "validation-00000-of-00002",
            "validation-00001-of-00002",
        ]
    )
    want = {os.path.basename(p): m.class_names.index(s) + 1 for p, s in pairs}
    got = {r["image/filename"].decode(): r["image/class/label"] for r in records(tf, m, "validation")}
    assert got == want


def test_resize_shorter_shrinks_only_larger_images(tf, tmp_path):
    src = tmp_path / "big"
    fake_data.write_image_folder(src / "a", classes=1, per_class=2, size=(200, 120))
    fake_data.write_image_folder(src / "b", classes=1, per_class=1, size=(60, 50))
    flat = tmp_path / "flat"
    for sub, cls in (("a", "n0a"), ("b", "n0b")):
        for root, _, files in os.walk(src / sub):
            for f in files:
                os.makedirs(flat / cls, exist_ok=True)
                os.replace(os.path.join(root, f), flat / cls / f)
    m = tfpipe.convert(str(flat), str(tmp_path / "out"), resize_shorter=64, num_shards=1, format="images")
    dims = sorted((r["image/height"], r["image/width"]) for r in records(tf, m))
    assert dims == [(50, 60), (64, 107), (64, 107)]
    assert m.splits["train"].options["resize_shorter"] == 64


def test_detect_format_by_content(imagenet_tree, tmp_path):
    src, _ = imagenet_tree
    assert detect_format(src) == "imagenet"
    pd.DataFrame({"a": [1]}).to_parquet(tmp_path / "t.data")
    assert detect_format(str(tmp_path / "t.data")) == "parquet"  # by magic bytes, not suffix
    (tmp_path / "t.csv").write_text("a\n1\n")
    assert detect_format(str(tmp_path / "t.csv")) == "csv"
    with pytest.raises(DataError, match="does not exist"):
        detect_format(str(tmp_path / "nope"))


@pytest.mark.slow
def test_cli_convert_prints_summary_with_skips(imagenet_tree, tmp_path):
    src, odd = imagenet_tree
    out = run_cli("convert", src, tmp_path / "o", "--num-shards", "3", "--quiet")
    assert out.returncode == 0, out.stderr
    assert "converted 19 examples into 3 shards" in out.stdout and "3 skipped" in out.stdout
    assert f"skipped {odd['empty']}" in out.stdout
    manifest = Manifest.load(str(tmp_path / "o"))
    assert manifest.splits["train"].examples == 19
    inspect = run_cli("inspect", tmp_path / "o", "--verify")
    assert inspect.returncode == 0 and "verify: 3 of 3 shards ok" in inspect.stdout


def test_header_check_copies_whole_jpegs_and_still_catches_truncation(tf, imagenet_tree, converted, tmp_path):
    src, odd = imagenet_tree
    fast = tfpipe.convert(src, str(tmp_path / "fast"), num_shards=4, workers=1, check="header")
    assert [s.checksum for s in fast.splits["train"].shards] == [
        s.checksum for s in converted.splits["train"].shards
    ]
    assert {s.input for s in fast.splits["train"].skipped} == {odd[k] for k in fake_data.UNDECODABLE_ODDITIES}
    assert fast.splits["train"].options["check"] == "header"


def test_trusted_passthrough_structure_rules():
    from tfpipe.modalities.images.convert.decode import normalize_image, trusted_passthrough

    rgb = fake_data.encode_jpeg(np.full((30, 40, 3), 128, np.uint8))
    out = trusted_passthrough(rgb)
    assert out is not None and out.jpeg == rgb and (out.height, out.width) == (30, 40)
    assert trusted_passthrough(rgb[:-10]) is None  # no end marker: the decode path judges it
    assert trusted_passthrough(rgb, resize_shorter=20) is None  # needs a resize
    assert normalize_image(rgb).reencoded is False  # the decoding path agrees it passes through

"""Small datasets shared by the tests/pipeline/ and tests/presets/ modules (fixtures
registered by conftest.py; the helpers are imported).

Odd counts on purpose: 37 images in 4 shards (13/12/12 per class), a 37-row table in 4 shards.
Images are 64x48 JPEGs, so decode is cheap and every test stays fast.
"""

from __future__ import annotations

import io
import os
import pathlib
import shutil

import numpy as np
import pytest
from PIL import Image

import tfpipe
from tfpipe.format.codec import encode_example
from tfpipe.format.manifest import Manifest
from tfpipe.format.schema import IMAGE_SCHEMA
from tfpipe.format.tfrecord import frame_record
from tfpipe.testing import fake_data

PER_CLASS = [13, 12, 12]
N_IMAGES = sum(PER_CLASS)
N_ROWS = 37
PHOTOS_PER_CLASS = [7, 6, 6]
FOREIGN_FILES = 3


# The fixtures below reach every test module through conftest.py's pytest_plugins, one
# instance a session; the memo also remakes a dataset that a test removed.
_MADE: dict[str, str] = {}


def _once(key: str, make) -> str:
    if key not in _MADE or not os.path.exists(_MADE[key]):
        _MADE[key] = make()
    return _MADE[key]


def jpeg(seed: int, size: tuple[int, int] = (64, 48)) -> bytes:
    rng = np.random.default_rng(seed)
    pixels = fake_data.natural_image(rng, size[1], size[0])
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", quality=90)
    return out.getvalue()


def image_row(i: int, label: int, encoded: bytes | None = None) -> dict:
    """One imagenet_to_gcs record; `label` is stored as given (1-based in that layout)."""
    return {
        "image/encoded": encoded if encoded is not None else jpeg(i),
        "image/format": "JPEG",
        "image/filename": f"img_{i:03d}.JPEG",
        "image/class/label": label,
        "image/class/synset": f"n{label:08d}",
        "image/height": 48,
        "image/width": 64,
        "image/colorspace": "RGB",
        "image/channels": 3,
    }


def write_shard(path: str, rows: list[dict]) -> None:
    with open(path, "wb") as f:
        for row in rows:
            f.write(frame_record(encode_example(row, IMAGE_SCHEMA)))


@pytest.fixture(scope="session")
def image_ds(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A converted imagenet-layout dataset: 37 images, 3 classes, 4 shards, 1-based labels."""
    return _once("images", lambda: _make_images(tmp_path_factory))


def _make_images(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("images")
    fake_data.write_image_folder(root / "src", classes=3, per_class=PER_CLASS, size=(64, 48))
    dest = str(root / "ds")
    tfpipe.convert(str(root / "src"), dest, format="imagenet", num_shards=4, workers=1)
    return dest


@pytest.fixture(scope="session")
def foreign_ds(tmp_path_factory: pytest.TempPathFactory) -> str:
    """imagenet_to_gcs-style shards without a manifest: 3 files, 1-based labels 1..3."""
    return _once("foreign", lambda: _make_foreign(tmp_path_factory))


def _make_foreign(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("foreign")
    rows = [image_row(i, 1 + i % 3) for i in range(N_IMAGES)]
    for k in range(FOREIGN_FILES):
        write_shard(str(root / f"train-{k:05d}-of-{FOREIGN_FILES:05d}"), rows[k::FOREIGN_FILES])
    return str(root)


@pytest.fixture(scope="session")
def photos_ds(tmp_path_factory: pytest.TempPathFactory) -> str:
    """`tfpipe convert photos/ out/ --num-shards 3` of a plain class tree: the "images"
    layout, 0-based labels, 19 images (7/6/6) of 32x24 in 3 shards."""
    return _once("photos", lambda: _make_photos(tmp_path_factory))


def _make_photos(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("photos")
    fake_data.write_image_folder(
        root / "photos", classes=3, per_class=PHOTOS_PER_CLASS, size=(32, 24), imagenet_names=False
    )
    dest = str(root / "out")
    tfpipe.convert(str(root / "photos"), dest, num_shards=3, workers=1)
    return dest


def write_tf_examples(path: str, rows: list[dict]) -> None:
    """Writes records the way other tools do: tf.io.TFRecordWriter and tf.train.Example."""
    import tensorflow as tf

    def feature(value):
        if isinstance(value, (bytes, str)):
            value = value.encode() if isinstance(value, str) else value
            return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))

    with tf.io.TFRecordWriter(path) as writer:
        for row in rows:
            example = tf.train.Example(
                features=tf.train.Features(feature={k: feature(v) for k, v in row.items()})
            )
            writer.write(example.SerializeToString())


@pytest.fixture(scope="session")
def table_ds(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A converted 37-row table with nulls filled (masks) and a `row_id` column, 4 shards."""
    return _once("table", lambda: _make_table(tmp_path_factory))


def _make_table(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("table")
    df = fake_data.make_table(N_ROWS, columns=8, with_nulls=True, label_classes=3)
    df.insert(0, "row_id", np.arange(N_ROWS, dtype=np.int64))
    csv = fake_data.write_table(df, root / "table.csv")
    dest = str(root / "ds")
    tfpipe.convert(csv, dest, label="label", missing="fill", num_shards=4, workers=1)
    return dest


def copy_dataset(src: str, dest: str) -> str:
    shutil.copytree(src, dest)
    return dest


def corrupt_shard(root: str, index: int, how: str) -> str:
    """Damages shard `index` of a manifest dataset in place; returns its path.

    how: "truncate" cuts the file mid-record; "crc" flips a byte inside the second record.
    """
    manifest = Manifest.load(root)
    path = manifest.shard_paths("train")[index]
    data = bytearray(pathlib.Path(path).read_bytes())
    if how == "truncate":
        data = data[: len(data) - 100]
    else:
        first_len = int.from_bytes(data[:8], "little")
        data[12 + first_len + 4 + 12 + 20] ^= 0xFF
    with open(path, "wb") as f:
        f.write(bytes(data))
    return path


def rewrite_manifest_dataset(root: str, rows_per_shard: list[list[dict]]) -> str:
    """Writes image rows as a manifest dataset (used for bad-image records)."""
    import hashlib

    from tfpipe.format.manifest import ShardInfo, Split
    from tfpipe.format.shardnames import shard_name
    from tfpipe.format.tfrecord import frame_record as _frame

    os.makedirs(root, exist_ok=True)
    shards = []
    for k, rows in enumerate(rows_per_shard):
        name = shard_name("train", k, len(rows_per_shard))
        blob = b"".join(_frame(encode_example(r, IMAGE_SCHEMA)) for r in rows)
        with open(os.path.join(root, name), "wb") as f:
            f.write(blob)
        shards.append(ShardInfo(name, len(rows), len(blob), "sha256:" + hashlib.sha256(blob).hexdigest()))
    Manifest(
        root=root,
        layout="imagenet",
        schema=IMAGE_SCHEMA,
        label_offset=1,
        splits={"train": Split(tuple(shards))},
    ).save()
    return root


def shard_row_ids(root: str) -> list[list[int]]:
    """Each shard's row ids, read straight from the files in manifest order."""
    import tensorflow as tf

    spec = {"row_id": tf.io.FixedLenFeature([], tf.int64)}
    return [
        [int(tf.io.parse_single_example(r, spec)["row_id"]) for r in tf.data.TFRecordDataset(path)]
        for path in tfpipe.Manifest.load(root).shard_paths("train")
    ]

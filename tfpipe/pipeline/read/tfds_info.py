"""A TensorFlow Datasets (TFDS) dataset folder, read as a source: `build()` on the version folder
TFDS prepared (`~/tensorflow_datasets/<name>/<version>/`, local or gs://, holding
`dataset_info.json`) reads its records with what TFDS wrote about them, without importing TFDS:

- `dataset_info.json`: the splits, each split's shard files (`filepathTemplate`, by default
  `{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}`) and records per shard (`shardLengths`), so
  `steps_per_epoch`, the eval length and `start_step` work as on a tfpipe dataset; the file
  format (only TFRecord is read: ArrayRecord and Parquet are refused by name); the supervised
  keys (input, label).
- `features.json`: which features are images (their encoding and dtype) and class labels;
  `<feature>.labels.txt`: the class names.

TFDS's `Image` feature stores PNG by default (JPEG when the builder says so); the image preset
decodes both. Labels of a `ClassLabel` are 0-based, and read as stored.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from typing import Any

from tfpipe import storage
from tfpipe.errors import DataError

INFO_NAME = "dataset_info.json"
FEATURES_NAME = "features.json"
DEFAULT_TEMPLATE = "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"
# TFDS numbers shards with at least 5 digits (naming._num_digits_needed).
_DIGITS = 5
# A version folder's name: "1.0.0".
VERSION = re.compile(r"\d+\.\d+\.\d+")


@dataclasses.dataclass(frozen=True, slots=True)
class TfdsSplit:
    """One split: its shard files (in order), records per shard (None when the info has no
    `shardLengths`), and its bytes."""

    files: tuple[str, ...]
    counts: tuple[int, ...] | None
    bytes: int | None


@dataclasses.dataclass(frozen=True, slots=True)
class TfdsImage:
    """An `Image` feature: "png" or "jpeg" (None: TFDS's default, PNG), dtype, channels."""

    encoding: str | None
    dtype: str
    channels: int | None


@dataclasses.dataclass(frozen=True, slots=True)
class TfdsInfo:
    """What TFDS wrote about a prepared dataset (see the module doc).

    Attributes:
      root: the version folder.
      name, version: the dataset's.
      splits: split name -> TfdsSplit.
      images: image feature key -> TfdsImage.
      labels: class-label feature key -> its class names ("" where TFDS kept no names).
      supervised: (input key, label key), or None.
    """

    root: str
    name: str
    version: str
    splits: Mapping[str, TfdsSplit]
    images: Mapping[str, TfdsImage]
    labels: Mapping[str, tuple[str, ...]]
    supervised: tuple[str, str] | None

    @property
    def where(self) -> str:
        return storage.join(self.root, INFO_NAME)

    @property
    def image_key(self) -> str | None:
        """The image the dataset's supervised keys name, else its only image feature."""
        if self.supervised and self.supervised[0] in self.images:
            return self.supervised[0]
        return next(iter(self.images)) if len(self.images) == 1 else None

    @property
    def label_key(self) -> str | None:
        """The label the supervised keys name, else the only class label."""
        if self.supervised and self.supervised[1] in self.labels:
            return self.supervised[1]
        return next(iter(self.labels)) if len(self.labels) == 1 else None

    @property
    def class_names(self) -> tuple[str, ...]:
        key = self.label_key
        return self.labels.get(key, ()) if key else ()

    @property
    def preset_options(self) -> dict[str, str]:
        """The image preset's keys this dataset names (`PresetContext.suggested`)."""
        keys = {"image_key": self.image_key, "label_key": self.label_key}
        return {k: v for k, v in keys.items() if v is not None}

    def split(self, name: str) -> TfdsSplit:
        try:
            return self.splits[name]
        except KeyError:
            raise DataError(f"{self.where} has no split {name!r}; it has {sorted(self.splits)}") from None


def is_tfds(path: str) -> bool:
    """`path` is a folder TFDS prepared (it holds dataset_info.json)."""
    return storage.exists(storage.join(path, INFO_NAME))


def load(root: str) -> TfdsInfo:
    """Reads a TFDS version folder's dataset_info.json and features.json.

    Raises:
      DataError: the info is not JSON or names a format other than TFRecord, naming the file.
    """
    where = storage.join(root, INFO_NAME)
    info = _json(where)
    name = str(info.get("name", ""))
    fmt = str(info.get("fileFormat", "tfrecord") or "tfrecord")
    if fmt != "tfrecord":
        raise DataError(
            f"{where}: the dataset was prepared as {fmt!r} files; tfpipe reads TFRecord. Prepare it "
            "with `builder.download_and_prepare(file_format='tfrecord')` (TFDS's default). "
            f"Received: fileFormat={fmt!r}"
        )
    splits = {}
    for entry in info.get("splits", []):
        split = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(split, str) or not split:
            raise DataError(f"{where}: expected each split to name itself. Received: {str(entry)[:200]}")
        splits[split] = _split(root, name, split, entry, where)
    images, labels = _features(root)
    return TfdsInfo(
        root=root,
        name=name,
        version=str(info.get("version", "")),
        splits=splits,
        images=images,
        labels=labels,
        supervised=_supervised(info),
    )


def _json(path: str) -> dict[str, Any]:
    try:
        obj = json.loads(storage.read_bytes(path))
    except FileNotFoundError:
        return {}
    except ValueError as e:
        raise DataError(f"{path} is not valid JSON: {e}") from None
    if not isinstance(obj, dict):
        raise DataError(f"{path}: expected a JSON object. Received: {str(obj)[:200]}")
    return obj


def _split(root: str, name: str, split: str, entry: Mapping[str, Any], where: str) -> TfdsSplit:
    """A split's files from its template and shard count; its counts from shardLengths."""
    lengths = entry.get("shardLengths")
    counts = tuple(int(n) for n in lengths) if lengths else None
    shards = len(counts) if counts is not None else int(entry.get("numShards", 0) or 0)
    if not shards:
        raise DataError(
            f"{where}: split {split!r} names no shards (no shardLengths or numShards): the TFDS "
            "preparation did not finish, or this info is not TFDS's."
        )
    template = str(entry.get("filepathTemplate") or DEFAULT_TEMPLATE)
    digits = max(_DIGITS, len(str(shards)))
    files = []
    for i in range(shards):
        index, count = f"{i:0{digits}d}", f"{shards:0{digits}d}"
        relative = template.format(
            DATASET=name,
            SPLIT=split,
            FILEFORMAT="tfrecord",
            SHARD_INDEX=index,
            NUM_SHARDS=count,
            SHARD_X_OF_Y=f"{index}-of-{count}",
        )
        files.append(storage.join(root, relative))
    size = entry.get("numBytes")
    return TfdsSplit(tuple(files), counts, int(size) if size is not None else None)


def _features(root: str) -> tuple[dict[str, TfdsImage], dict[str, tuple[str, ...]]]:
    """Image and class-label features from features.json, nested dicts flattened as TFDS
    flattens them into records ("a/b")."""
    images: dict[str, TfdsImage] = {}
    labels: dict[str, tuple[str, ...]] = {}

    def walk(features: Mapping[str, Any], prefix: str) -> None:
        for key, spec in features.items():
            name = f"{prefix}{key}"
            kind = str(spec.get("pythonClassName", "")).rsplit(".", 1)[-1]
            if kind == "FeaturesDict":
                walk(spec.get("featuresDict", {}).get("features", {}), f"{name}/")
            elif kind == "Image":
                image = spec.get("image", {})
                dims = image.get("shape", {}).get("dimensions", [])
                channels = int(dims[-1]) if dims and int(dims[-1]) > 0 else None
                images[name] = TfdsImage(
                    image.get("encodingFormat"), str(image.get("dtype", "uint8")), channels
                )
            elif kind == "ClassLabel":
                labels[name] = _class_names(root, name, spec.get("classLabel", {}))

    walk(_json(storage.join(root, FEATURES_NAME)).get("featuresDict", {}).get("features", {}), "")
    return images, labels


def _class_names(root: str, key: str, spec: Mapping[str, Any]) -> tuple[str, ...]:
    """A class label's names from `<feature>.labels.txt` (TFDS writes them there), else empty
    names for `numClasses`."""
    for name in (key, key.replace("/", "-")):
        try:
            text = storage.read_bytes(storage.join(root, f"{name}.labels.txt")).decode()
        except FileNotFoundError:
            continue
        return tuple(line.strip() for line in text.splitlines() if line.strip())
    return ("",) * int(spec.get("numClasses", 0) or 0)


def _supervised(info: Mapping[str, Any]) -> tuple[str, str] | None:
    """(input, label) from supervisedKeys, when both are plain feature keys."""
    keys = info.get("supervisedKeys", {})
    items = keys.get("tuple", {}).get("items", []) if isinstance(keys, dict) else []
    names = [item.get("featureKey") for item in items if isinstance(item, dict)]
    if len(names) == 2 and all(isinstance(n, str) for n in names):
        return names[0], names[1]
    if isinstance(keys, dict) and isinstance(keys.get("input"), str) and isinstance(keys.get("output"), str):
        return keys["input"], keys["output"]  # the older form
    return None

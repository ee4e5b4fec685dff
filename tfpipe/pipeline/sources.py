"""Resolving `build()`'s `data` argument into shard files, sizes, counts and feature keys.

`data` is one of:
- a directory (local or gs://) holding `tfpipe.json`: the manifest gives the shards, their
  record counts and sizes, the schema, the compression and the label offset;
- a glob (`gs://b/imagenet/train-*`), a single TFRecord file, or a list of them, written by
  another tool. The first record is read to learn the feature keys, and gzip is recognised
  from the file's magic bytes.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import posixpath
from collections.abc import Mapping, Sequence
from typing import Any

from tfpipe import storage
from tfpipe.errors import DataError, ManifestError
from tfpipe.manifest import MANIFEST_NAME, Manifest
from tfpipe.schema import MISSING_SUFFIX, Field, Schema

GLOB_CHARS = "*?["
UNKNOWN = -1
GZIP_MAGIC = b"\x1f\x8b"


@dataclasses.dataclass(frozen=True, slots=True)
class Source:
    """The files one `build()` call reads, and what is known about them.

    Attributes:
      files: shard paths, in manifest (or sorted) order.
      sizes: bytes per file (UNKNOWN if not known).
      counts: records per file (UNKNOWN without a manifest).
      compression: "" or "GZIP" (TFRecordDataset's compression_type).
      manifest: the manifest, or None for foreign files.
      split: the manifest split read, or None.
      keys: feature key -> dtype ("int64", "float32" or "bytes") the records hold.
      schema: the manifest schema, or one inferred from the first record.
      where: the data argument, for messages.
    """

    files: tuple[str, ...]
    sizes: tuple[int, ...]
    counts: tuple[int, ...]
    compression: str
    manifest: Manifest | None
    split: str | None
    keys: Mapping[str, str]
    schema: Schema | None
    where: str

    @property
    def examples(self) -> int | None:
        return None if UNKNOWN in self.counts else sum(self.counts)

    @property
    def bytes(self) -> int | None:
        return None if UNKNOWN in self.sizes else sum(self.sizes)


def default_split(manifest: Manifest, training: bool) -> str:
    """"train" for training; "validation", "test" or the only split for eval."""
    names = list(manifest.splits)
    wanted = ("train",) if training else ("validation", "test")
    for name in wanted:
        if name in manifest.splits:
            return name
    if len(names) == 1:
        return names[0]
    raise ManifestError(
        f"{storage.join(manifest.root, MANIFEST_NAME)} has no {' or '.join(map(repr, wanted))} split; "
        f"pass split=<name>. Received splits: {names}"
    )


def resolve(data: str | Sequence[str] | Any, *, split: str | None, training: bool) -> Source:
    """Turns `data` into a Source.

    Raises:
      ManifestError: a directory without `tfpipe.json`, or an unknown split.
      DataError: no files match, a listed or manifest shard is missing, or a file is not a
        TFRecord file; the message names the path.
    """
    if isinstance(data, (list, tuple)):
        files = [str(f) for f in data]
        if not files:
            raise DataError("data is an empty list: expected TFRecord file paths.")
        return _foreign(files, where=f"{len(files)} listed file(s)", split=split)
    if hasattr(data, "__fspath__"):
        data = str(data)
    if not isinstance(data, str) or not data:
        raise DataError(
            "data must be a dataset directory, a glob or a list of TFRecord files. "
            f"Received: {type(data).__name__} {data!r}"
        )
    path = data.rstrip("/") if data not in ("/",) else data
    if any(c in storage.basename(path) for c in GLOB_CHARS):
        files = storage.glob(path)
        if not files:
            raise DataError(f"No files match {data!r}: expected TFRecord shards there.")
        return _foreign(files, where=data, split=split)
    if storage.exists(storage.join(path, MANIFEST_NAME)):
        return _from_manifest(Manifest.load(path), split=split, training=training)
    if _is_file(path):
        return _foreign([path], where=data, split=split)
    raise ManifestError(
        f"Expected a tfpipe dataset directory (with {MANIFEST_NAME}), a glob or TFRecord files. "
        f"Received: {data!r}, which " + ("has no " + MANIFEST_NAME if _is_dir(path) else "does not exist")
        + ". Convert with `tfpipe convert`, or pass shard files or a glob such as "
        + repr(storage.join(path, "train-*"))
    )


def _is_file(path: str) -> bool:
    if storage.is_gcs(path):
        return storage.exists(path)
    import os

    return os.path.isfile(path)


def _is_dir(path: str) -> bool:
    if storage.is_gcs(path):
        return bool(storage.listdir(path))
    import os

    return os.path.isdir(path)


def _from_manifest(manifest: Manifest, *, split: str | None, training: bool) -> Source:
    name = split or default_split(manifest, training)
    info = manifest.split(name)
    if not info.shards:
        raise ManifestError(f"{storage.join(manifest.root, MANIFEST_NAME)}: split {name!r} has no shards")
    files = manifest.shard_paths(name)
    _check_exist(files, f"listed in {storage.join(manifest.root, MANIFEST_NAME)} (split {name!r})")
    keys = {f.name: f.dtype for f in manifest.schema.fields}
    keys |= {f.mask_name: "int64" for f in manifest.schema.fields if f.has_mask}
    return Source(
        files=tuple(files),
        sizes=tuple(s.bytes for s in info.shards),
        counts=tuple(s.examples for s in info.shards),
        compression=manifest.tf_compression,
        manifest=manifest,
        split=name,
        keys=keys,
        schema=manifest.schema,
        where=manifest.root,
    )


def _foreign(files: list[str], *, where: str, split: str | None) -> Source:
    if split is not None:
        raise DataError(
            f"split={split!r} selects a split of a tfpipe manifest, but {where} has none; "
            "pass the split's files (or a glob) instead."
        )
    _check_exist(files, "given as data")
    sizes = _sizes(files)
    empty = [f for f, s in zip(files, sizes, strict=True) if s == 0]
    if len(empty) == len(files):
        raise DataError(f"Every file in {where} is empty: expected TFRecord records. Received: {files[:3]}")
    first = files[sizes.index(next(s for s in sizes if s))]
    compression = "GZIP" if _head(first, 2) == GZIP_MAGIC else ""
    record = _first_record(first, compression)
    schema = _infer_schema(record, first)
    keys = {f.name: f.dtype for f in schema.fields}
    keys |= {f.mask_name: "int64" for f in schema.fields if f.has_mask}
    return Source(
        files=tuple(files),
        sizes=tuple(sizes),
        counts=(UNKNOWN,) * len(files),
        compression=compression,
        manifest=None,
        split=None,
        keys=keys,
        schema=schema,
        where=where,
    )


def _check_exist(files: list[str], what: str) -> None:
    by_dir: dict[str, list[str]] = {}
    for f in files:
        parent = f.rstrip("/").rsplit("/", 1)[0] if "/" in f else "."
        by_dir.setdefault(parent, []).append(f)
    missing = []
    for parent, group in by_dir.items():
        present = set(storage.listdir(parent))
        missing += [f for f in group if storage.basename(f) not in present]
    if missing:
        raise DataError(
            f"{len(missing)} shard file(s) {what} do not exist: {missing[:5]}"
            + (" ..." if len(missing) > 5 else "")
        )


def _sizes(files: list[str]) -> list[int]:
    if not any(storage.is_gcs(f) for f in files):
        return [storage.size(f) for f in files]
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        return list(pool.map(storage.size, files))


def _head(path: str, n: int) -> bytes:
    from tfpipe._tf import tf

    with tf().io.gfile.GFile(path, "rb") as f:
        return f.read(n)


def _first_record(path: str, compression: str) -> bytes:
    from tfpipe._tf import tf

    tf_ = tf()
    try:
        for record in tf_.data.TFRecordDataset(path, compression_type=compression).take(1):
            return bytes(record.numpy())
    except (tf_.errors.DataLossError, tf_.errors.InvalidArgumentError) as e:
        raise DataError(
            f"{path}: expected a TFRecord file; its first record is unreadable "
            f"({e.message.splitlines()[0][:200]})"
        ) from None
    raise DataError(f"{path}: expected TFRecord records; the file holds none")


def _infer_schema(record: bytes, path: str) -> Schema:
    """A schema from one serialized tf.train.Example: kinds from the protobuf, shapes from
    the value counts (a single value is a scalar)."""
    from tfpipe._tf import tf

    tf_ = tf()
    try:
        example = tf_.train.Example.FromString(record)
    except Exception as e:  # noqa: BLE001 - protobuf raises DecodeError
        raise DataError(f"{path}: record 0 is not a tf.train.Example ({e})") from None
    fields = []
    kinds = {"bytes_list": "bytes", "float_list": "float32", "int64_list": "int64"}
    for name in sorted(example.features.feature):
        feature = example.features.feature[name]
        kind = feature.WhichOneof("kind")
        if kind is None:
            continue
        n = len(getattr(feature, kind).value)
        fields.append(Field(name, kinds[kind], () if n == 1 else (n,)))
    if not fields:
        raise DataError(f"{path}: record 0 is a tf.train.Example with no features")
    # A `<col>/missing` int64 beside `<col>` is a tfpipe null mask: fold it into the field.
    names = {f.name for f in fields}
    masked = {f.name[: -len(MISSING_SUFFIX)] for f in fields
              if f.name.endswith(MISSING_SUFFIX) and f.name[: -len(MISSING_SUFFIX)] in names}
    fields = [dataclasses.replace(f, has_mask=f.name in masked) for f in fields
              if not (f.name.endswith(MISSING_SUFFIX) and f.name[: -len(MISSING_SUFFIX)] in masked)]
    return Schema(tuple(fields))


def relative(path: str, root: str | None) -> str:
    """`path` relative to `root` when it lies under it, for short messages."""
    if root and path.startswith(root.rstrip("/") + "/"):
        return posixpath.relpath(path, root)
    return path

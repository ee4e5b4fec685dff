"""Resolving `build()`'s `data` argument into shard files, sizes, counts and feature keys.

`data` is one of:
- a directory (local or gs://) holding `tfpipe.json`: the manifest gives the shards, their
  record counts and sizes, the schema, the compression and the label offset;
- a glob (`gs://b/imagenet/train-*`, `data/d*/train-*`: wildcards in any part of the path),
  a single TFRecord file, or a list of them. A path that exists is taken as it is written,
  so `loc[1]` or `run?` name that folder, not a pattern. When they all
  lie in one directory holding `tfpipe.json` and it lists them, they are read through that
  manifest, exactly as the directory form (all of one split's shards, in manifest order).
  Otherwise they are foreign files: the first record is read to learn the feature keys, and
  gzip is recognised from the file's magic bytes.

A glob or list never reads part of a sharded set without saying so: files named
`<name>-NNNNN-of-MMMMM` (tfpipe's, TFDS's and imagenet_to_gcs's convention) must come with
every index of their set, or the call is refused naming the missing indices. An interrupted
conversion leaves exactly such a partial set.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

from tfpipe import storage
from tfpipe.errors import DataError, ManifestError, TfpipeError
from tfpipe.format.manifest import MANIFEST_NAME, Manifest
from tfpipe.format.schema import Schema
from tfpipe.format.shardnames import ShardName, check_shard_sets, few
from tfpipe.pipeline.read import records, tfds_info
from tfpipe.pipeline.read.sharding import UNKNOWN
from tfpipe.pipeline.read.tfds_info import TfdsInfo
from tfpipe.plural import counted

GLOB_CHARS = "*?["
GZIP_MAGIC = b"\x1f\x8b"


@dataclasses.dataclass(frozen=True, slots=True)
class ResolvedData:
    """The files one `build()` call reads, and what is known about them.

    Attributes:
      files: shard paths, in manifest (or given, or sorted glob) order.
      sizes: bytes per file (UNKNOWN if not known).
      counts: records per file (UNKNOWN without a manifest).
      compression: "" or "GZIP" (TFRecordDataset's compression_type).
      manifest: the manifest, or None for foreign files.
      split: the manifest split read, or None.
      keys: feature key -> dtype (a `schema.Dtype`) the records hold.
      schema: the manifest schema, or one inferred from the first record.
      where: the data argument (or the manifest's directory), for messages.
      notes: how `data` was resolved, for `Pipeline.describe()`.
      tfds: a TFDS dataset's info (the records' counts, images and labels), or None.
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
    notes: tuple[str, ...] = ()
    tfds: TfdsInfo | None = None

    @property
    def class_names(self) -> tuple[str, ...]:
        """The class names by label: the manifest's, or a TFDS dataset's label's."""
        if self.manifest is not None:
            return self.manifest.class_names
        return self.tfds.class_names if self.tfds is not None else ()

    @property
    def counts_known(self) -> bool:
        """Every file's record count is known (a tfpipe manifest, or a TFDS dataset_info.json)."""
        return UNKNOWN not in self.counts

    @property
    def examples(self) -> int | None:
        return None if UNKNOWN in self.counts else sum(self.counts)

    @property
    def bytes(self) -> int | None:
        return None if UNKNOWN in self.sizes else sum(self.sizes)

    @property
    def on_gcs(self) -> bool:
        """Some file is read through TensorFlow's gs:// filesystem."""
        return any(storage.is_gcs(f) for f in self.files)


def default_split(manifest: Manifest, training: bool) -> str:
    """ "train" for training; "validation", "test" or the only split for eval."""
    return split_among(list(manifest.splits), training, storage.join(manifest.root, MANIFEST_NAME))


def split_among(names: list[str], training: bool, where: str) -> str:
    """The default split of `names` (see `default_split`); `where` names the file listing them."""
    wanted = ("train",) if training else ("validation", "test")
    for name in wanted:
        if name in names:
            return name
    if len(names) == 1:
        return names[0]
    raise ManifestError(
        f"{where} has no {' or '.join(map(repr, wanted))} split; pass split=<name>. Received splits: {names}"
    )


DataKind = Literal["glob", "dataset", "tfds", "file", "folder", "missing"]


@dataclasses.dataclass(frozen=True, slots=True)
class DataPath:
    """What a `data` path names: decided here once, for `build()` and for `tfpipe bench`.

    Attributes:
      path: the path as it is read: without trailing slashes (a root, "/" or "gs://", as written).
      kind: "glob" (wildcards, and no such path: a pattern; a path that exists is taken as
        written), "dataset" (a folder holding tfpipe.json), "tfds" (a folder TFDS prepared,
        holding dataset_info.json), "file", "folder" (without either) or "missing".
      manifest: the dataset's manifest, for "dataset".
    """

    path: str
    kind: DataKind
    manifest: Manifest | None = None


def data_path(data: str) -> DataPath:
    """What the path `data` names (see DataPath).

    Raises:
      InvalidPath: a gs:// path GCS would refuse (no bucket, a bad bucket name).
    """
    stripped = data.rstrip("/")
    path = data if not stripped or stripped.endswith(":") else stripped
    if storage.has_wildcards(path) and not _exists(path):
        return DataPath(path, "glob")
    manifest = Manifest.find(path)
    if manifest is not None:
        return DataPath(path, "dataset", manifest)
    if tfds_info.is_tfds(path):
        return DataPath(path, "tfds")
    if _is_file(path):
        return DataPath(path, "file")
    return DataPath(path, "folder" if _is_dir(path) else "missing")


def resolve(data: str | Sequence[str] | Any, *, split: str | None, training: bool) -> ResolvedData:
    """Turns `data` into a ResolvedData.

    Raises:
      ManifestError: a directory without `tfpipe.json`, or an unknown split.
      DataError: no files match, a listed or manifest shard is missing, not a regular file or
        of the wrong size, a sharded set is incomplete, or a file is not a TFRecord file; the
        message names the path.
      StorageError: gs:// refused the request (e.g. no access to the bucket).
    """
    if isinstance(data, (list, tuple)):
        files = [os.fspath(f) if hasattr(f, "__fspath__") else f for f in data]
        if not files or not all(isinstance(f, str) and f for f in files):
            raise DataError(f"data as a list must hold TFRecord file paths. Received: {data!r}"[:300])
        where = f"{len(files)} listed file(s)"
        with _storage_errors(where):
            return _from_files(files, where=where, split=split, training=training)
    if hasattr(data, "__fspath__"):
        data = os.fspath(data)
    if not isinstance(data, str) or not data:
        raise DataError(
            "data must be a dataset directory, a glob or a list of TFRecord files. "
            f"Received: {type(data).__name__} {data!r}"
        )
    with _storage_errors(data):
        named = data_path(data)
        if named.kind == "glob":
            try:
                files = storage.glob(named.path)
            except FileNotFoundError:
                files = []
            if not files:
                raise DataError(f"No files match {data!r}: expected TFRecord shards there.")
            return _from_files(files, where=data, split=split, training=training)
        if named.manifest is not None:
            return _from_manifest(named.manifest, split=split, training=training)
        if named.kind == "tfds":
            return _from_tfds(tfds_info.load(named.path), split=split, training=training)
        if named.kind == "file":
            return _from_files([named.path], where=data, split=split, training=training)
        raise ManifestError(_no_dataset_message(data, named))


@contextlib.contextmanager
def _storage_errors(where: str) -> Iterator[None]:
    """gs:// failures as one-line tfpipe errors naming the input (a missing bucket, no access)."""
    try:
        yield
    except TfpipeError:
        raise
    except FileNotFoundError as e:
        raise DataError(f"{where}: {e.filename or e} does not exist (no such bucket or path).") from None
    except Exception as e:  # only the storage client's own errors are translated; others re-raised
        if type(e).__module__.startswith(("google.", "requests.", "urllib3.")):
            first = str(e).splitlines()[0][:300] if str(e) else type(e).__name__
            raise storage.StorageError(f"{where}: storage refused the request: {first}") from None
        raise


def _no_dataset_message(data: str, named: DataPath) -> str:
    path = named.path
    if named.kind == "missing":
        return (
            f"Expected a tfpipe dataset directory (with {MANIFEST_NAME}), a glob or TFRecord "
            f"files. Received: {data!r}, which does not exist."
        )
    names = storage.listdir(path)
    versions = sorted(
        n.rstrip("/")
        for n in names
        if tfds_info.VERSION.fullmatch(n.rstrip("/")) and tfds_info.is_tfds(storage.join(path, n.rstrip("/")))
    )
    if versions:
        return (
            f"{data!r} is a TFDS dataset's folder: build() reads one of its prepared versions. "
            f"Pass the version folder that holds {tfds_info.INFO_NAME}: "
            + ", ".join(repr(storage.join(path, v)) for v in versions[:5])
        )
    if any(n.startswith(storage.HIDDEN_PREFIX) and ".tmp-" in n for n in names) or any(
        _tfpipe_shard(n) for n in names
    ):
        return (
            f"{data!r} has no {MANIFEST_NAME} but holds shards: a `tfpipe convert` into it did "
            "not finish (the manifest is written last, and a partial dataset is never read). "
            "Finish it with `tfpipe convert SRC DEST --resume` (resume=True)."
        )
    shards = [ShardName.parse(n) for n in names]
    foreign = sorted({shard.pattern for shard in shards if shard is not None})
    if foreign:
        return (
            f"{data!r} has no {MANIFEST_NAME} (tfpipe's) or {tfds_info.INFO_NAME} (TFDS's), and holds "
            f"TFRecord shards another tool wrote ({', '.join(foreign[:3])}): pass every shard of one set "
            f"as a glob, e.g. {storage.join(path, foreign[0].split('-N', 1)[0] + '-*')!r}."
        )
    return (
        f"Expected a tfpipe dataset directory (with {MANIFEST_NAME}), a glob or TFRecord files. "
        f"Received: {data!r}, which has no {MANIFEST_NAME}. Convert with `tfpipe convert`, or "
        "pass the TFRecord files another tool wrote (a list, or a glob matching every shard)."
    )


def _tfpipe_shard(name: str) -> bool:
    """A name `tfpipe convert` writes: `{split}-{index:05d}-of-{count:05d}` (`.gz`). TFDS's
    (`mnist-train.tfrecord-00000-of-00001`) hold a dot in the stem."""
    shard = ShardName.parse(name)
    return shard is not None and "." not in shard.stem and shard.suffix in ("", ".gz") and shard.digits == 5


def _exists(path: str) -> bool:
    return _is_file(path) or _is_dir(path)


def _is_file(path: str) -> bool:
    if storage.is_gcs(path):
        return storage.exists(path)
    return os.path.exists(path) and not os.path.isdir(path)


def _is_dir(path: str) -> bool:
    if storage.is_gcs(path):
        return bool(storage.listdir(path))
    return os.path.isdir(path)


def _norm(path: str) -> str:
    """A path spelled one way, so a listed file can be compared with a manifest's shard."""
    return path if storage.is_gcs(path) else os.path.normpath(os.path.abspath(path))


def _from_manifest(manifest: Manifest, *, split: str | None, training: bool) -> ResolvedData:
    name = split or default_split(manifest, training)
    info = manifest.split(name)
    where = storage.join(manifest.root, MANIFEST_NAME)
    if not info.shards:
        raise ManifestError(f"{where}: split {name!r} has no shards")
    files = manifest.shard_paths(name)
    sizes = tuple(s.bytes for s in info.shards)
    records.check_files(files, f"listed in {where} (split {name!r})", expected_sizes=sizes)
    return ResolvedData(
        files=tuple(files),
        sizes=sizes,
        counts=tuple(s.examples for s in info.shards),
        compression=manifest.tf_compression,
        manifest=manifest,
        split=name,
        keys=manifest.schema.feature_dtypes(),
        schema=manifest.schema,
        where=manifest.root,
    )


def _from_tfds(
    info: TfdsInfo, *, split: str | None, training: bool, where: str | None = None
) -> ResolvedData:
    """A split of a TFDS dataset folder: its shards from dataset_info.json, with their record
    counts, and the feature keys of its first record."""
    name = split or split_among(list(info.splits), training, info.where)
    s = info.split(name)
    listed = f"listed in {info.where} (split {name!r})"
    sizes = records.check_files(s.files, listed)
    if sizes is None:
        sizes = records.sizes(list(s.files))
    counts = s.counts if s.counts is not None else (UNKNOWN,) * len(s.files)
    first = s.files[sizes.index(next((n for n in sizes if n), sizes[0]))]
    schema = records.infer_schema(records.first_record(first, ""), first)
    held = f"{sum(counts)} records" if s.counts is not None else "record counts unknown (no shardLengths)"
    note = (
        f"{where or info.root}: TFDS dataset {info.name} {info.version}, split {name!r}: {held} in "
        f"{len(s.files)} shard(s), from its {tfds_info.INFO_NAME}"
    )
    return ResolvedData(
        files=s.files,
        sizes=tuple(sizes),
        counts=tuple(counts),
        compression="",
        manifest=None,
        split=name,
        keys=schema.feature_dtypes(),
        schema=schema,
        where=info.root,
        notes=(note,),
        tfds=info,
    )


def _tfds_split_of(files: list[str], where: str) -> tuple[TfdsInfo, str] | None:
    """The TFDS dataset and split whose shards `files` are, every one of them, when they lie
    in a TFDS version folder; None otherwise."""
    parents = {records.parent(f) for f in files}
    if len(parents) != 1 or not tfds_info.is_tfds(next(iter(parents))):
        return None
    info = tfds_info.load(next(iter(parents)))
    given = sorted(_norm(f) for f in files)
    for name, s in info.splits.items():
        if sorted(_norm(f) for f in s.files) == given:
            return info, name
    return None


def _from_files(files: list[str], *, where: str, split: str | None, training: bool) -> ResolvedData:
    """A glob's or list's files: through their directory's manifest when it lists them."""
    seen: set[str] = set()
    twice = []
    for f in files:
        if _norm(f) in seen:
            twice.append(f)
        seen.add(_norm(f))
    if twice:
        raise DataError(f"{where} names file(s) more than once, which would read them twice: {twice[:5]}")
    manifest = _manifest_of(files, where)
    if manifest is not None:
        return _listed_in_manifest(files, manifest, where=where, split=split, training=training)
    check_shard_sets(files, where, DataError)
    tfds = _tfds_split_of(files, where)
    if tfds is not None and split in (None, tfds[1]):
        return _from_tfds(tfds[0], split=tfds[1], training=training, where=where)
    if split is not None:
        raise DataError(
            f"split={split!r} selects a split of a tfpipe manifest, but {where} has none; "
            "pass the split's files (or a glob) instead."
        )
    sizes = records.check_files(files, "given as data")
    return _foreign(files, where=where, sizes=sizes if sizes is not None else records.sizes(files))


def _manifest_of(files: list[str], where: str) -> Manifest | None:
    """The manifest of the one directory holding every file, if there is one."""
    parents = sorted({records.parent(f) for f in files})
    with_manifest = [p for p in parents if storage.exists(storage.join(p, MANIFEST_NAME))]
    if not with_manifest:
        return None
    if len(parents) > 1:
        raise DataError(
            f"{where} spans several directories, and {with_manifest} hold a tfpipe manifest: "
            "build() reads one tfpipe dataset at a time (pass its directory). Combine datasets "
            "with tf.data, e.g. tf.data.Dataset.sample_from_datasets."
        )
    return Manifest.load(parents[0])


def _listed_in_manifest(
    files: list[str], manifest: Manifest, *, where: str, split: str | None, training: bool
) -> ResolvedData:
    mpath = storage.join(manifest.root, MANIFEST_NAME)
    index = {
        _norm(storage.join(manifest.root, s.name)): (name, i)
        for name, info in manifest.splits.items()
        for i, s in enumerate(info.shards)
    }
    unlisted = [f for f in files if _norm(f) not in index]
    if unlisted:
        raise DataError(
            f"{where} includes file(s) that {mpath} does not list: {unlisted[:5]}. A directory "
            "holding a tfpipe manifest is read through it: pass the directory (with split=...) "
            "or only the shards it lists."
        )
    splits = list(dict.fromkeys(index[_norm(f)][0] for f in files))
    if len(splits) > 1:
        raise DataError(
            f"{where} mixes shards of splits {splits} of {mpath}: pass one split's "
            "shards, or the directory with split=..."
        )
    name = splits[0]
    if split is not None and split != name:
        raise DataError(f"split={split!r}, but {where} holds shards of split {name!r} of {mpath}.")
    shards = manifest.split(name).shards
    have = {index[_norm(f)][1] for f in files}
    missing = [i for i in range(len(shards)) if i not in have]
    if missing:
        got = sum(shards[i].examples for i in have)
        raise DataError(
            f"{where} holds {len(have)} of the {len(shards)} shards of split {name!r} listed in "
            f"{mpath} ({got} of {manifest.split(name).examples} records): missing shard indices "
            f"{few(missing)} ({shards[missing[0]].name}, ...). A partial split is refused, since "
            "it would read without error; pass every shard, or the directory."
        )
    src = _from_manifest(manifest, split=name, training=training)
    note = f"{where} read through {mpath}: split {name!r}, {counted(len(shards), 'shard')} in manifest order"
    return dataclasses.replace(src, notes=(note,))


def _foreign(files: list[str], *, where: str, sizes: list[int]) -> ResolvedData:
    empty = [f for f, s in zip(files, sizes, strict=True) if s == 0]
    if len(empty) == len(files):
        raise DataError(f"Every file in {where} is empty: expected TFRecord records. Received: {files[:3]}")
    first = files[sizes.index(next(s for s in sizes if s))]
    compression = "GZIP" if records.head(first, 2) == GZIP_MAGIC else ""
    record = records.first_record(first, compression)
    schema = records.infer_schema(record, first)
    return ResolvedData(
        files=tuple(files),
        sizes=tuple(sizes),
        counts=(UNKNOWN,) * len(files),
        compression=compression,
        manifest=None,
        split=None,
        keys=schema.feature_dtypes(),
        schema=schema,
        where=where,
    )

"""TFRecord files as `build()` finds them: checked to exist as regular files of the expected
size, their sizes, and what the first record of files without a manifest holds (its feature keys
and dtypes, as a Schema; gzip told from the file's magic bytes)."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import stat
from collections.abc import Sequence

from tfpipe import storage
from tfpipe._tf import tf
from tfpipe.errors import DataError
from tfpipe.format.schema import MISSING_SUFFIX, Field, Schema, dtype_of_feature_list


def parent(path: str) -> str:
    """The folder of a path (local or gs://), "." for a bare name."""
    return path.rstrip("/").rsplit("/", 1)[0] if "/" in path else "."


def check_files(
    files: Sequence[str], what: str, expected_sizes: Sequence[int] | None = None
) -> list[int] | None:
    """Checks that `files` exist; local ones must be regular files (a FIFO or a device would
    block the reader) of the expected size. Returns local sizes (None for gs:// files)."""
    if any(storage.is_gcs(f) for f in files):
        check_listed(list(files), what)
        return None
    sizes, missing, wrong = [], [], []
    for i, f in enumerate(files):
        try:
            st = os.stat(f)
        except FileNotFoundError:
            missing.append(f)
            continue
        if not stat.S_ISREG(st.st_mode):
            kind = {
                stat.S_IFDIR: "a directory",
                stat.S_IFIFO: "a FIFO",
                stat.S_IFSOCK: "a socket",
                stat.S_IFCHR: "a character device",
                stat.S_IFBLK: "a block device",
            }
            raise DataError(
                f"{f} ({what}) is {kind.get(stat.S_IFMT(st.st_mode), 'not a regular file')}: "
                "expected a regular TFRecord file."
            )
        sizes.append(st.st_size)
        if expected_sizes is not None and st.st_size != expected_sizes[i]:
            wrong.append(f"{f} holds {st.st_size} bytes where the manifest says {expected_sizes[i]}")
    if missing:
        raise DataError(
            f"{len(missing)} shard file(s) {what} do not exist: {missing[:5]}"
            + (" ..." if len(missing) > 5 else "")
        )
    if wrong:
        raise DataError(
            f"{len(wrong)} shard file(s) {what} are not the files it describes: "
            + "; ".join(wrong[:3])
            + (" ..." if len(wrong) > 3 else "")
            + ". Re-convert, or check with `tfpipe inspect --verify`."
        )
    return sizes


def check_listed(files: list[str], what: str) -> None:
    by_dir: dict[str, list[str]] = {}
    for f in files:
        by_dir.setdefault(parent(f), []).append(f)
    missing = []
    for folder, group in by_dir.items():
        present = set(storage.listdir(folder))
        missing += [f for f in group if storage.basename(f) not in present]
    if missing:
        raise DataError(
            f"{len(missing)} shard file(s) {what} do not exist: {missing[:5]}"
            + (" ..." if len(missing) > 5 else "")
        )


def sizes(files: list[str]) -> list[int]:
    if not any(storage.is_gcs(f) for f in files):
        return [storage.size(f) for f in files]
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        return list(pool.map(storage.size, files))


def head(path: str, n: int) -> bytes:
    tf_ = tf()
    try:
        with tf_.io.gfile.GFile(path, "rb") as f:
            return f.read(n)
    except tf_.errors.OpError as e:
        raise DataError(f"{path}: cannot be read ({e.message.splitlines()[0][:200]})") from None


def first_record(path: str, compression: str) -> bytes:
    tf_ = tf()
    try:
        for record in tf_.data.TFRecordDataset(path, compression_type=compression).take(1):
            return bytes(record.numpy())
    except (tf_.errors.DataLossError, tf_.errors.InvalidArgumentError) as e:
        raise DataError(
            f"{path}: expected a TFRecord file; its first record is unreadable "
            f"({e.message.splitlines()[0][:200]})"
        ) from None
    except tf_.errors.OpError as e:
        raise DataError(f"{path}: cannot be read ({e.message.splitlines()[0][:200]})") from None
    raise DataError(f"{path}: expected TFRecord records; the file holds none")


def infer_schema(record: bytes, path: str) -> Schema:
    """A schema from one serialized tf.train.Example: kinds from the protobuf, shapes from
    the value counts (a single value is a scalar)."""
    tf_ = tf()
    try:
        example = tf_.train.Example.FromString(record)
    except Exception as e:
        raise DataError(f"{path}: record 0 is not a tf.train.Example ({e})") from None
    fields = []
    for name in sorted(example.features.feature):
        feature = example.features.feature[name]
        kind = feature.WhichOneof("kind")
        if kind is None:
            continue
        n = len(getattr(feature, kind).value)
        fields.append(Field(name, dtype_of_feature_list(kind), () if n == 1 else (n,)))
    if not fields:
        raise DataError(f"{path}: record 0 is a tf.train.Example with no features")
    # A `<col>/missing` int64 beside `<col>` is a tfpipe null mask: fold it into the field.
    names = {f.name for f in fields}
    masked = {
        f.name[: -len(MISSING_SUFFIX)]
        for f in fields
        if f.name.endswith(MISSING_SUFFIX) and f.name[: -len(MISSING_SUFFIX)] in names
    }
    fields = [
        dataclasses.replace(f, has_mask=f.name in masked)
        for f in fields
        if not (f.name.endswith(MISSING_SUFFIX) and f.name[: -len(MISSING_SUFFIX)] in masked)
    ]
    return Schema(tuple(fields))

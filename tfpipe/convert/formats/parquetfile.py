"""Parquet files and Hive-partitioned Parquet folders, as the table reader sees them.

- Every column a file stores is a column, as pyarrow, Spark and DuckDB read it: the index
  that `DataFrame.to_parquet()` stores (a named index such as `state`, or an unnamed one as
  `__index_level_0__`) is kept, and the summary says so. A RangeIndex kept only in the pandas
  metadata is not a column and adds none.
- A Hive-partitioned dataset (`year=2021/month=3/part-0.parquet`, as Spark and
  `pyarrow.parquet.write_to_dataset(partition_cols=...)` write it) is read file by file in
  sorted path order, each file's rows followed by its partition values as columns (after the
  file's own, as pyarrow's dataset API orders them). pyarrow's Hive partitioning parses the
  folder names (URL-decoded; `__HIVE_DEFAULT_PARTITION__` is null); the values are text, typed
  by the same rules as CSV fields, so `zip=01234` stays text.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from tfpipe import storage
from tfpipe.errors import DataError
from tfpipe.format.manifest import SkippedInput

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    import pyarrow as pa  # each imported where used: a CSV conversion needs none
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

SUFFIXES = (".parquet", ".pq")
_PARTITION_RE = re.compile(r"^([^=/]+)=([^/]*)$")
Partition = dict[str, str | None]
"""A file's Hive partition values by key, in folder order (None: `__HIVE_DEFAULT_PARTITION__`)."""


def arrow_to_pandas(arrow_type: pa.DataType) -> object:
    """Integers and bools as nullable pandas dtypes: to_pandas() would make an int64 column
    with nulls float64, and 16777217 would come back as 16777216."""
    import pandas as pd
    import pyarrow as pa

    if pa.types.is_integer(arrow_type):
        return pd.UInt64Dtype() if arrow_type == pa.uint64() else pd.Int64Dtype()
    if pa.types.is_boolean(arrow_type):
        return pd.BooleanDtype()
    return None


def open_file(path: str) -> pq.ParquetFile:
    """A `pyarrow.parquet.ParquetFile` that checks page checksums.

    Raises:
      DataError: the file is not Parquet, or names a column twice.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        source = storage.open_read(path) if storage.is_gcs(path) else path  # a local path reads natively
        pf = pq.ParquetFile(source, page_checksum_verification=True)
    except (pa.ArrowException, OSError) as e:
        raise DataError(
            f"{path}: expected a Parquet file. Received: a file pyarrow cannot open ({e})"
        ) from None
    check_unique_names(path, pf.schema_arrow.names)
    return pf


def check_unique_names(path: str, names: list[str]) -> None:
    """Raises DataError naming the columns a file holds more than once (pandas would keep one)."""
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise DataError(f"{path}: expected unique column names. Received: {dupes} more than once in {names}")


def batches(pf: pq.ParquetFile, chunk_rows: int) -> Iterator[pd.DataFrame]:
    """The file's rows as DataFrames, every stored column a column (the pandas metadata, which
    would turn a stored index back into an index, is not applied)."""
    for batch in pf.iter_batches(batch_size=chunk_rows):
        yield to_frame(batch)


def float_series(
    values: np.ndarray, null: np.ndarray, index: pd.Index | None = None, name: object = None
) -> pd.Series:
    """Float values and their null mask as a nullable Float64 series that keeps NaN apart from
    null (a NaN where `null` is False is a value)."""
    import numpy as np
    import pandas as pd

    data = np.asarray(values)
    data = data.astype(np.float32 if data.dtype == np.float16 else data.dtype, copy=False)
    return pd.Series(pd.arrays.FloatingArray(data, np.asarray(null, dtype=bool)), index=index, name=name)


def to_frame(batch: pa.RecordBatch | pa.Table) -> pd.DataFrame:
    """An Arrow record batch (or table) as a DataFrame: integers and bools nullable, and floats
    nullable with a NaN kept as a value apart from a null (to_pandas() makes both NaN)."""
    import pyarrow as pa

    frame = batch.to_pandas(types_mapper=arrow_to_pandas, ignore_metadata=True)
    for i, field in enumerate(batch.schema):
        if pa.types.is_floating(field.type):
            column = batch.column(i)
            data = column.to_numpy(zero_copy_only=False)
            frame.isetitem(
                i, float_series(data, column.is_null().to_numpy(zero_copy_only=False), frame.index)
            )
    return frame


def index_note(path: str, schema: pa.Schema) -> str | None:
    """What the summary says of a pandas index stored in the file (whose Arrow schema is
    `schema`) as a column, if there is one."""
    metadata = schema.pandas_metadata or {}
    stored = [c for c in metadata.get("index_columns", []) if isinstance(c, str)]  # a RangeIndex is a dict
    if not stored:
        return None
    named = [c for c in stored if not c.startswith("__index_level_")]
    which = (
        f"the pandas index {named[0]!r}" if named else f"an unnamed pandas index (row labels, {stored[0]!r})"
    )
    return (
        f"{path}: column {stored[0]!r} is {which} that DataFrame.to_parquet() stored as a column; "
        "it is kept as the column it is, as pyarrow, Spark and DuckDB read it. If it is not "
        "data, write the file with to_parquet(index=False) or drop the column."
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Dataset:
    """The Parquet files of a source, in the order their rows are read.

    Attributes:
      files: the files, sorted by path.
      keys: the Hive partition keys, in folder order ("" when not partitioned).
      partitions: per file, its partition values (empty when not partitioned).
      skipped: files in the folder that are not Parquet files.
    """

    files: tuple[str, ...]
    keys: tuple[str, ...] = ()
    partitions: tuple[Partition, ...] = ()
    skipped: tuple[SkippedInput, ...] = ()

    def partition(self, i: int) -> Partition | None:
        """The partition values of file `i`, or None when the dataset is not partitioned."""
        return self.partitions[i] if self.partitions else None


def partitioned(src: str, entries: list[tuple[str, bool]]) -> bool:
    """Whether a folder's visible entries (name, is_dir) hold Hive partition folders."""
    return any(is_dir and _PARTITION_RE.match(name) for name, is_dir in entries)


def walk(src: str) -> list[str]:
    """Every file under `src` that readers take, as sorted '/'-separated relative paths."""
    if storage.is_gcs(src):
        rels = [r for r, _, _, _ in storage.gcs_entries(src, recursive=True)]
    else:
        rels, seen = [], set()
        for root, dirs, names in os.walk(src, followlinks=True):
            real = os.path.realpath(root)
            if real in seen:
                raise DataError(
                    f"{root}: the same folder as one already read (a symbolic link loop or a second link)"
                )
            seen.add(real)
            dirs[:] = [d for d in dirs if not ignored(d)]
            rel = os.path.relpath(root, src).replace(os.sep, "/")
            rels += [n if rel == "." else f"{rel}/{n}" for n in names]
    return sorted(r for r in rels if not any(ignored(p) for p in r.split("/")))


def hive_dataset(src: str, relative: list[str]) -> Dataset:
    """The Parquet files under `src` whose paths (relative to it, '/'-separated, sorted) are
    `relative`, with each file's partition values.

    Raises:
      DataError: a folder that is not a `key=value` partition, files at different depths or
        with other keys (a file beside the partition folders would have no value for them),
        or a partition key that is also a column name is found later by the reader.
    """
    import pyarrow as pa
    import pyarrow.dataset as ds

    parquet = [r for r in relative if _is_parquet(r)]
    skipped = tuple(
        SkippedInput(storage.join(src, *r.split("/")), _not_parquet(r))
        for r in relative
        if not _is_parquet(r)
    )
    if not parquet:
        raise DataError(
            f"{src}: expected Parquet files ({', '.join(SUFFIXES)}) in its partition folders. Received: none"
        )
    keys_of = {}
    for rel in parquet:
        folders = rel.split("/")[:-1]
        bad = [f for f in folders if not _PARTITION_RE.match(f)]
        if bad:
            raise DataError(
                f"{storage.join(src, *rel.split('/'))}: expected Hive partition folders named "
                f"key=value (as year=2021/) between {src} and each Parquet file. Received: "
                f"folder {bad[0]!r}, whose files would be read without a value for it."
            )
        keys_of[rel] = tuple(_PARTITION_RE.match(f).group(1) for f in folders)  # type: ignore[union-attr]
    example = max(parquet, key=lambda r: len(keys_of[r]))  # the first with the most keys
    keys = keys_of[example]
    odd = [r for r in parquet if keys_of[r] != keys]
    if odd:
        raise DataError(
            f"{src}: expected every Parquet file under the same partition folders "
            f"({'/'.join(f'{k}=...' for k in keys)}, as {example}). Received: "
            f"{odd[0]} under {'/'.join(f'{k}=...' for k in keys_of[odd[0]]) or 'no partition folder'}. "
            "Its rows would have no value for a partition column: move it into a partition "
            "folder (key=__HIVE_DEFAULT_PARTITION__ for null) or out of the source."
        )
    scheme = ds.partitioning(pa.schema([(k, pa.string()) for k in keys]), flavor="hive")
    partitions = tuple(_values(scheme, rel, keys) for rel in parquet)
    files = tuple(storage.join(src, *r.split("/")) for r in parquet)
    return Dataset(files, keys, partitions, skipped)


def _values(scheme: ds.Partitioning, rel: str, keys: tuple[str, ...]) -> Partition:
    import pyarrow.dataset as ds

    found = ds.get_partition_keys(scheme.parse(rel))
    return {k: found.get(k) for k in keys}


def _is_parquet(rel: str) -> bool:
    return rel.lower().endswith(SUFFIXES)


def _not_parquet(rel: str) -> str:
    ext = rel.rsplit("/", 1)[-1].rpartition(".")[2] if "." in rel.rsplit("/", 1)[-1] else ""
    return (
        f"not a Parquet file: extension {('.' + ext) if ext else '(none)'} is not one of {' '.join(SUFFIXES)}"
    )


def ignored(name: str) -> bool:
    """Names pyarrow and Spark leave out of a dataset: hidden ones and `_SUCCESS`, `_metadata`."""
    return name.startswith((".", "_"))

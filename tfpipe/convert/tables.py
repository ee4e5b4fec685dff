"""CSV and Parquet sources, read in chunks so a table larger than memory converts.

A first pass infers the schema (unifying the dtypes pandas sees in each chunk), counts the rows
and finds nulls, so a null under the default policy fails the run before anything is written.
The second pass reads with the inferred dtypes fixed, so every chunk encodes alike.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from typing import Any

from tfpipe import storage
from tfpipe.errors import DataError
from tfpipe.schema import Field, Schema, dtype_for_pandas

# A column's kind as pandas sees it; "null" is a chunk where the column had no value at all.
_KIND_TO_DTYPE = {"int": "int64", "float": "float32", "bool": "int64", "string": "bytes", "category": "bytes"}
_KIND_TO_PANDAS = {"int": "Int64", "float": "Float64", "bool": "boolean", "string": "string"}
TABLE_SUFFIXES = {".csv": "csv", ".tsv": "csv", ".parquet": "parquet", ".pq": "parquet"}


@dataclasses.dataclass(frozen=True, slots=True)
class TableScan:
    """What the first pass learned."""

    files: tuple[str, ...]
    format: str
    schema: Schema
    rows: int
    kinds: dict[str, str]
    estimated_bytes: int


def table_files(src: str, fmt: str) -> list[str]:
    """The table files of `src`: the file itself, or a directory's files of that format, sorted."""
    if storage.is_gcs(src) or os.path.isfile(src):
        return [src]
    suffixes = [s for s, f in TABLE_SUFFIXES.items() if f == fmt]
    files = [storage.join(src, n) for n in storage.listdir(src)
             if not n.startswith(".") and os.path.splitext(n)[1].lower() in suffixes]
    if not files:
        raise DataError(f"{src}: expected {fmt} files ({', '.join(suffixes)}). Received: none")
    return files


def _local(path: str) -> Any:
    return storage.open_read(path) if storage.is_gcs(path) else path


def read_chunks(files: tuple[str, ...], fmt: str, chunk_rows: int,
                kinds: dict[str, str] | None = None) -> Iterator[tuple[Any, int, str]]:
    """Yields (DataFrame chunk, index of its first row, file) across all files in order."""
    import pandas as pd

    first = 0
    for path in files:
        if fmt == "csv":
            dtype = {c: _KIND_TO_PANDAS[k] for c, k in (kinds or {}).items() if k in _KIND_TO_PANDAS}
            sep = "\t" if path.lower().endswith(".tsv") else ","
            reader = pd.read_csv(_local(path), chunksize=chunk_rows, sep=sep,
                                 dtype_backend="numpy_nullable", dtype=dtype or None)
        else:
            import pyarrow.parquet as pq

            pf = pq.ParquetFile(_local(path))
            reader = (b.to_pandas() for b in pf.iter_batches(batch_size=chunk_rows))
        for chunk in reader:
            yield chunk, first, path
            first += len(chunk)


def _kind(column: str, series: Any) -> str:
    import pandas as pd
    from pandas.api import types as pdt

    if series.isna().all():
        return "null"
    dtype = series.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        return "category"
    if pdt.is_bool_dtype(dtype):
        return "bool"
    if pdt.is_object_dtype(dtype):
        values = series.dropna()
        if all(isinstance(v, str) for v in values):
            return "string"
        if all(isinstance(v, bool) for v in values):
            return "bool"
        bad = next(v for v in values if not isinstance(v, str))
        raise DataError(
            f"Column {column!r}: expected int, float, bool, string or categorical values. "
            f"Received: a value of type {type(bad).__name__} ({str(bad)[:60]!r}). Objects and "
            "nested lists are not supported; flatten or drop the column."
        )
    out = dtype_for_pandas(column, dtype)  # refuses unsupported dtypes by name
    return {"int64": "int", "float32": "float", "bytes": "string"}[out]


def _unify(column: str, a: str, b: str, where: str) -> str:
    if a == b or b == "null":
        return a
    if a == "null":
        return b
    if {a, b} == {"int", "float"}:
        return "float"
    if "string" in (a, b) or "category" in (a, b):
        return "string"
    raise DataError(f"{where}: column {column!r} changes type between chunks: {a} then {b}")


def scan(src: str, fmt: str, chunk_rows: int, label: str | None, missing: str) -> TableScan:
    """First pass: schema, row count, null positions and an output size estimate.

    Raises:
      DataError: a null under missing="error" (names column and row), an unsupported column
        type (names the column), or a missing label column.
    """
    files = tuple(table_files(src, fmt))
    kinds: dict[str, str] = {}
    columns: list[str] = []
    first_null: dict[str, tuple[int, str]] = {}
    sources: dict[str, str] = {}
    rows = 0
    for chunk, first, path in read_chunks(files, fmt, chunk_rows):
        if not columns:
            columns = [str(c) for c in chunk.columns]
        elif [str(c) for c in chunk.columns] != columns:
            raise DataError(f"{path}: expected columns {columns}. Received: {list(chunk.columns)}")
        for c in columns:
            series = chunk[c]
            kinds[c] = _unify(c, kinds.get(c, "null"), _kind(c, series), path)
            sources.setdefault(c, str(series.dtype))
            if c not in first_null:
                null = series.isna().to_numpy()
                if null.any():
                    first_null[c] = (first + int(null.argmax()), path)
        rows += len(chunk)
    if not columns or rows == 0:
        raise DataError(f"{src}: expected a table with at least one row. Received: {rows} rows")
    if label is not None and label not in columns:
        raise DataError(f"{src}: label column {label!r} not found. Received columns: {columns}")
    if missing == "error" and first_null:
        column = min(first_null, key=lambda c: first_null[c][0])
        row, path = first_null[column]
        raise DataError(
            f"{path}: column {column!r}, row {row} (0-based, header excluded) is null. Expected a "
            "value: nulls are never written as plausible values. Pass --missing fill "
            f"(missing='fill') to write a default plus a '{column}/missing' mask."
        )
    fields = tuple(
        Field(c, _KIND_TO_DTYPE.get(kinds[c], "float32"), has_mask=c in first_null, source_dtype=sources[c])
        for c in columns
    )
    schema = Schema(fields, label=label)
    estimate = _estimate_bytes(files, fmt, schema, rows, {c: kinds[c] for c in columns})
    return TableScan(files, fmt, schema, rows, {c: kinds[c] for c in columns}, estimate)


def _estimate_bytes(files: tuple[str, ...], fmt: str, schema: Schema, rows: int, kinds: dict[str, str]) -> int:
    """Encodes the first chunk (<= 1000 rows) and scales its size to all rows."""
    from tfpipe.convert.encode import TableTask, encode_table

    chunk, _, path = next(read_chunks(files, fmt, min(1000, rows), kinds))
    records = encode_table(TableTask(chunk, 0, schema, path))
    per_row = sum(len(r.record or b"") + 16 for r in records) / max(len(records), 1)
    return int(per_row * rows)

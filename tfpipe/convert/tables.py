"""CSV and Parquet sources, read in chunks so a table larger than memory converts.

The first pass reads every row. It checks the file's shape (CSV rows as wide as the header,
Parquet pages against their checksums), takes each column's type from its first chunk of
values, refuses later values that do not fit that type or that float32 would change, finds
nulls, and counts rows. Everything that would fail the run fails it before anything is
written. The second pass reads with the types fixed, so every chunk encodes alike.
"""

from __future__ import annotations

import dataclasses
import os
import stat
from collections.abc import Iterator
from typing import Any

from tfpipe import storage
from tfpipe.convert import csvfile, values
from tfpipe.errors import DataError
from tfpipe.manifest import SkippedInput
from tfpipe.schema import KIND_DTYPES, Field, Schema, kind_for_pandas

# A column's kind as pandas sees it; "null" is a chunk where the column had no value at all.
_KIND_TO_PANDAS = {
    "int": "Int64",
    "float": "Float64",
    "bool": "boolean",
    "string": "string",
    "null": "Float64",
}
_KIND_NAMES = {
    "int": "integers",
    "float": "numbers",
    "bool": "booleans",
    "string": "text",
    "category": "text",
}
TABLE_SUFFIXES = {".csv": "csv", ".tsv": "csv", ".parquet": "parquet", ".pq": "parquet"}
_LISTED_DROPS = 20  # dropped row numbers listed per file in the manifest; the count is exact


@dataclasses.dataclass(frozen=True, slots=True)
class TableScan:
    """What the first pass learned.

    Attributes:
      rows: rows that will be written (after any rows dropped for a null label).
      drop_label: the label column whose null rows are dropped, or None.
      skipped: per file with dropped rows, their count and first row numbers.
      file_rows: the rows each file adds to `rows`, so a shard's rows can be read from the
        files that hold them alone (`sources.TableRows`).
    """

    files: tuple[str, ...]
    format: str
    schema: Schema
    rows: int
    kinds: dict[str, str]
    estimated_bytes: int
    encoding: str = "utf-8"
    drop_label: str | None = None
    dropped_rows: int = 0
    skipped: tuple[SkippedInput, ...] = ()
    file_rows: tuple[int, ...] = ()  # rows each file adds to `rows`, in the order of `files`

    def chunks(self, chunk_rows: int) -> Iterator[tuple[Any, int, str]]:
        """The second pass: (frame, index of its first written row, file), types fixed.

        Raises:
          DataError: the files hold another number of rows than the first pass counted.
        """
        end, path = 0, self.files[0]
        for frame, first, path in read_chunks(
            self.files, self.format, chunk_rows, self.kinds, self.encoding, self.drop_label
        ):
            end = first + len(frame)
            if end > self.rows:
                break
            yield frame, first, path
        if end != self.rows:
            raise DataError(
                f"{path}: expected the {self.rows} rows the first pass read. Received: "
                f"{'more' if end > self.rows else end}; did the input change during the conversion?"
            )


def table_files(src: str, fmt: str) -> list[str]:
    """The table files of `src`: the file itself, or a directory's files of that format, sorted."""
    if storage.is_gcs(src) or os.path.isfile(src):
        return [src]
    _refuse_special(src, f"a {fmt} file or a folder of them")
    suffixes = [s for s, f in TABLE_SUFFIXES.items() if f == fmt]
    files = [
        storage.join(src, n)
        for n in storage.listdir(src)
        if not n.startswith(".") and _suffix(n, fmt) in suffixes
    ]
    if not files:
        raise DataError(f"{src}: expected {fmt} files ({', '.join(suffixes)}). Received: none")
    for path in files:
        _refuse_special(path, f"a regular {fmt} file", folder_ok=False)
    return files


def _refuse_special(path: str, expected: str, folder_ok: bool = True) -> None:
    """Refuses a FIFO, socket or device (reading one would block or never end), by name."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # a missing path is named by the listing or the read that follows
    if not (stat.S_ISREG(mode) or (folder_ok and stat.S_ISDIR(mode))):
        raise DataError(f"{path}: expected {expected}. Received: {storage.file_kind(mode)}")


def _suffix(name: str, fmt: str) -> str:
    """`.csv` for `t.csv` and, as pandas reads them, `t.csv.gz`, `.bz2`, `.xz` and `.zip`."""
    stem, suffix = os.path.splitext(name.lower())
    if fmt == "csv" and suffix in csvfile.COMPRESSED:
        suffix = os.path.splitext(stem)[1]
    return suffix


def read_chunks(
    files: tuple[str, ...],
    fmt: str,
    chunk_rows: int,
    kinds: dict[str, str] | None = None,
    encoding: str = "utf-8",
    drop_null: str | None = None,
) -> Iterator[tuple[Any, int, str]]:
    """Yields (DataFrame chunk, index of its first row, file) across all files in order.

    A chunk's index holds each row's number within its file (0-based, header excluded), for
    messages. With `drop_null`, rows where that column is null are left out and not counted.
    """
    first = 0
    for path in files:
        for frame in file_chunks(path, fmt, chunk_rows, kinds, encoding):
            if drop_null is not None:
                frame = frame[frame[drop_null].notna().to_numpy()]
                if frame.empty:
                    continue
            yield frame, first, path
            first += len(frame)


def _arrow_to_pandas(arrow_type: Any) -> Any:
    """Integers and bools as nullable pandas dtypes: to_pandas() would make an int64 column
    with nulls float64, and 16777217 would come back as 16777216."""
    import pandas as pd
    import pyarrow as pa

    if pa.types.is_integer(arrow_type):
        return pd.UInt64Dtype() if arrow_type == pa.uint64() else pd.Int64Dtype()
    if pa.types.is_boolean(arrow_type):
        return pd.BooleanDtype()
    return None


def _parquet(path: str) -> Any:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        source = storage.open_read(path) if storage.is_gcs(path) else path  # a local path reads natively
        pf = pq.ParquetFile(source, page_checksum_verification=True)
    except (pa.ArrowException, OSError) as e:
        raise DataError(
            f"{path}: expected a Parquet file. Received: a file pyarrow cannot open ({e})"
        ) from None
    names = pf.schema_arrow.names
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise DataError(f"{path}: expected unique column names. Received: {dupes} more than once in {names}")
    return pf


def file_chunks(
    path: str, fmt: str, chunk_rows: int, kinds: dict[str, str] | None = None, encoding: str = "utf-8"
) -> Iterator[Any]:
    """One file's rows as DataFrames of `chunk_rows`, indexed by row number within the file.

    Raises:
      DataError: the file cannot be read (a Parquet page fails its checksum, a CSV has a
        quote that never closes, a value does not parse as its column's type), naming it.
    """
    import pandas as pd

    if fmt == "csv":
        dtype = {c: _KIND_TO_PANDAS[k] for c, k in (kinds or {}).items() if k in _KIND_TO_PANDAS}
        handle = csvfile.open_binary(path)

        def frames() -> Iterator[Any]:
            with pd.read_csv(
                handle,
                chunksize=chunk_rows,
                sep=csvfile.separator(path),
                index_col=False,
                dtype_backend="numpy_nullable",
                dtype=dtype or None,
                encoding=encoding,
            ) as chunks:
                yield from chunks

        reader = frames()
        errors: tuple[type[BaseException], ...] = (pd.errors.ParserError, ValueError, UnicodeDecodeError)
    else:
        import pyarrow as pa

        handle = None
        batches = _parquet(path).iter_batches(batch_size=chunk_rows)
        reader = (b.to_pandas(types_mapper=_arrow_to_pandas) for b in batches)
        errors = (pa.ArrowException, OSError)
    row = 0
    try:
        while True:
            try:
                frame = next(reader)
            except StopIteration:
                return
            except errors as e:
                what = "CSV text" if fmt == "csv" else "Parquet data whose pages pass their checksums"
                detail = " ".join(str(e).split())
                raise DataError(
                    f"{path}: expected {what}. Received: an error reading rows from row {row}: {detail}"
                ) from None
            frame.index = pd.RangeIndex(row, row + len(frame))
            yield frame
            row += len(frame)
    finally:
        reader.close()  # pandas' reader first: it flushes a wrapper around the handle
        if handle is not None:
            handle.close()


def _kind(column: str, series: Any, path: str) -> str:
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
        nonnull = series.dropna()
        if all(isinstance(v, str) for v in nonnull):
            return "string"
        if all(isinstance(v, bool) for v in nonnull):
            return "bool"
        bad = next(v for v in nonnull if not isinstance(v, str))
        raise DataError(
            f"{path}: column {column!r}: expected int, float, bool, string or categorical values. "
            f"Received: a value of type {type(bad).__name__} ({str(bad)[:60]!r}). Objects and "
            "nested lists are not supported; flatten or drop the column."
        )
    try:
        return kind_for_pandas(column, dtype)  # refuses unsupported dtypes by name
    except DataError as e:
        raise DataError(f"{path}: {e}") from None


@dataclasses.dataclass(slots=True)
class _Column:
    """What the first pass knows of one column so far (mutable: it is filled chunk by chunk)."""

    name: str
    kind: str = "null"
    sample: str = ""  # where the kind was taken from
    source_dtype: str = ""
    first_null: tuple[str, int] | None = None
    whole: tuple[str, int, Any] | None = None  # a whole number float32 would change
    fraction: tuple[str, int, Any] | None = None  # the first value that is not a whole number

    def add(self, series: Any, path: str, csv_first_file: bool) -> None:
        """Takes in one chunk's values of this column.

        Raises:
          DataError: a value that does not fit the column's type, or that float32 would change.
        """
        kind = _kind(self.name, series, path)
        self.source_dtype = self.source_dtype or (str(series.dtype) if kind != "null" else "")
        if kind == "null" or kind == self.kind:
            pass
        elif self.kind == "null":
            self.kind = kind
            self.sample = f"as read from {path} row {int(series.first_valid_index())} on"
        elif {self.kind, kind} == {"int", "float"}:
            self.kind = "float"
        elif self.kind in ("string", "category"):
            self.kind = "string"
        else:
            raise DataError(self._type_change(series, path, csv_first_file))
        if kind in ("int", "float") and self.kind in ("int", "float"):
            self._check_numbers(kind, series, path)
        if self.first_null is None:
            null = series.isna().to_numpy()
            if null.any():
                self.first_null = (path, int(series.index[null.argmax()]))

    def _type_change(self, series: Any, path: str, csv_first_file: bool) -> str:
        row, value = values.first_misfit(series, self.kind)
        hint = (
            " To read the column as text instead, pass --chunk-rows (chunk_rows=) larger than "
            f"{row} so that the first chunk holds this value."
            if csv_first_file
            else ""
        )
        return (
            f"{path}: column {self.name!r}, row {row} holds {value!r}, but the column holds "
            f"{_KIND_NAMES[self.kind]} ({self.sample}). Expected one type per column: tfpipe takes a "
            "column's type from its first chunk of values and refuses a later value that does not "
            f"fit, rather than re-typing the column in silence. Fix or remove the value.{hint}"
        )

    def _check_numbers(self, kind: str, series: Any, path: str) -> None:
        """Refuses a value beyond the Example type's range; notes the first whole number that
        float32 would change and the first fraction, in case the column ends up float."""
        nonnull = series.dropna()
        if kind == "int":
            beyond, inexact = values.first_beyond_int64(nonnull), values.first_inexact_int
            limit = f"that fit int64 (at most {values.INT64_MAX}), the integer type of tf.train.Example"
        else:
            beyond, inexact = values.first_float32_overflow(nonnull), values.first_inexact_whole_float
            limit = (
                f"within float32's range (±{values.FLOAT32_MAX:.4g}; beyond it they would be "
                "written as inf), the only float type of tf.train.Example"
            )
        if beyond is not None:
            raise DataError(
                f"{path}: column {self.name!r}, row {beyond[0]} holds {beyond[1]!r}. Expected values "
                f"{limit}. Drop, scale or clip the column, or store it as text."
            )
        if self.whole is None:
            found = inexact(nonnull)
            self.whole = None if found is None else (path, *found)
        if kind == "float" and self.fraction is None:
            found = values.first_fraction(nonnull)
            self.fraction = None if found is None else (path, *found)

    def float_problem(self) -> str | None:
        """Why this column cannot be written as float32 without changing values, if it cannot."""
        if self.kind != "float" or self.whole is None:
            return None
        path, row, value = self.whole
        if self.fraction:
            fpath, frow, fvalue = self.fraction
            fix = f"It is float because {fpath} row {frow} holds {fvalue!r}; if the column is integers, fix that value."
        else:
            fix = (
                "It is float in the source; if it holds integers, store it as an integer type "
                "(nullable ones such as pandas 'Int64' or Arrow int64 keep their nulls)."
            )
        return (
            f"{path}: column {self.name!r}, row {row} holds the whole number {int(value)}, which float32 "
            "(the only float type of tf.train.Example) cannot hold exactly: it would be written as "
            f"{values.as_float32(value)}. Expected integers to stay exact. {fix}"
        )


def null_value_error(where: str, row: int, column: str) -> DataError:
    """A null in a column that may not hold one (missing="error"), named by file, column and row."""
    return DataError(
        f"{where}: column {column!r}, row {row} (0-based, header excluded) is null. Expected a "
        "value: nulls are never written as plausible values. Pass --missing fill "
        f"(missing='fill') to write a default plus a '{column}/missing' mask."
    )


def _label_nulls(frame: Any, label: str, missing_label: str, path: str) -> Any:
    """The rows where the label is null, or a DataError naming the first one."""
    null = frame[label].isna().to_numpy()
    if null.any() and missing_label != "drop":
        row = int(frame.index[null.argmax()])
        raise DataError(
            f"{path}: label column {label!r}, row {row} (0-based, header excluded) is null. "
            "Expected a label on every row: a label is never filled in, not even with --missing "
            "fill (missing='fill'). Pass --missing-label drop (missing_label='drop') to leave such "
            "rows out (they are counted in the manifest), or fix the data."
        )
    return null


def scan(
    src: str,
    fmt: str,
    chunk_rows: int,
    label: str | None,
    missing: str,
    missing_label: str = "error",
    encoding: str = "utf-8",
) -> TableScan:
    """First pass: shape, schema, row count, null positions and an output size estimate.

    Raises:
      DataError: a null under missing="error" (names column and row), a null label unless
        missing_label="drop", a value that does not fit its column's type or that float32
        would change, a ragged CSV row, an undecodable or unreadable file, an unsupported
        column type (names the column), or a missing label column.
    """
    files = tuple(table_files(src, fmt))
    columns: dict[str, _Column] = {}
    total = kept = 0
    file_rows = dict.fromkeys(files, 0)
    drops: dict[str, tuple[int, list[int]]] = {}  # file -> rows dropped, the first of them
    for path in files:
        if fmt == "csv":
            csvfile.check_shape(path, encoding)
        for chunk in file_chunks(path, fmt, chunk_rows, None, encoding):
            if not columns:
                columns = {str(c): _Column(str(c)) for c in chunk.columns}
                if label is not None and label not in columns:
                    raise DataError(
                        f"{src}: label column {label!r} not found. Received columns: {list(columns)}"
                    )
            elif [str(c) for c in chunk.columns] != list(columns):
                raise DataError(f"{path}: expected columns {list(columns)}. Received: {list(chunk.columns)}")
            total += len(chunk)
            if label is not None:
                null = _label_nulls(chunk, label, missing_label, path)
                if null.any():
                    n, listed = drops.get(path, (0, []))
                    drops[path] = (
                        n + int(null.sum()),
                        (listed + chunk.index[null][:_LISTED_DROPS].tolist())[:_LISTED_DROPS],
                    )
                    chunk = chunk[~null]
            kept += len(chunk)
            file_rows[path] += len(chunk)
            for c, column in columns.items():
                column.add(chunk[c], path, fmt == "csv" and path == files[0])
    out = _finish(src, fmt, files, columns, total, kept, drops, label, missing, encoding)
    return dataclasses.replace(out, file_rows=tuple(file_rows.values()))


def _finish(
    src: str,
    fmt: str,
    files: tuple[str, ...],
    columns: dict[str, _Column],
    total: int,
    kept: int,
    drops: dict[str, tuple[int, list[int]]],
    label: str | None,
    missing: str,
    encoding: str,
) -> TableScan:
    if not columns or kept == 0:
        dropped = f", all with a null label {label!r} (missing_label='drop')" if total else ""
        raise DataError(f"{src}: expected a table with at least one row. Received: {total} rows{dropped}")
    for column in columns.values():
        problem = column.float_problem()
        if problem:
            raise DataError(problem)
    nulls = {c: col.first_null for c, col in columns.items() if col.first_null}
    if missing == "error" and nulls:
        column = min(nulls, key=lambda c: (files.index(nulls[c][0]), nulls[c][1]))
        raise null_value_error(*nulls[column], column)
    fields = tuple(
        Field(c, KIND_DTYPES.get(col.kind, "float32"), has_mask=c in nulls, source_dtype=col.source_dtype)
        for c, col in columns.items()
    )
    kinds = {c: col.kind for c, col in columns.items()}
    skipped = tuple(
        SkippedInput(
            path,
            f"{n} row{'s' if n > 1 else ''} with a null label {label!r} left out (--missing-"
            f"label drop, missing_label='drop'): row{'s' if n > 1 else ''} "
            f"{', '.join(map(str, rows))}{' and more' if n > len(rows) else ''} (0-based, "
            "header excluded)",
        )
        for path, (n, rows) in drops.items()
    )
    out = TableScan(
        files,
        fmt,
        Schema(fields, label=label),
        kept,
        kinds,
        0,
        encoding,
        label if drops else None,
        total - kept,
        skipped,
    )
    return dataclasses.replace(out, estimated_bytes=_estimate_bytes(out))


def _estimate_bytes(scan: TableScan) -> int:
    """Encodes the first chunk (<= 1000 rows) and scales its size to all rows."""
    from tfpipe.convert.encode import TableTask, encode_table

    chunk, _, path = next(scan.chunks(min(1000, scan.rows)))
    records = encode_table(TableTask(chunk, 0, scan.schema, path))
    per_row = sum(len(r.record or b"") + 16 for r in records) / max(len(records), 1)
    return int(per_row * scan.rows)

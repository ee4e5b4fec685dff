"""CSV and Parquet sources, read in chunks so a table larger than memory converts.

The first pass reads every row. It checks the file's shape (CSV rows as wide as the header,
Parquet pages against their checksums), types each column (`infer`: from its first chunk of
values, CSV text by the rules of `values`, or as `column_types` declares), refuses later values
that do not fit that type or that float32 would change, finds nulls, and counts rows. It reports
every problem it finds at once, and everything that would fail the run fails it before anything
is written. The second pass reads with the types fixed, so every chunk encodes alike.

In a CSV file only an empty field is missing (`""` too): text such as `NA`, `None` or `null`
is kept as written unless `null_values` names it, for every column or for one.
"""

from __future__ import annotations

import dataclasses
import os
import stat
from collections.abc import Iterator, Mapping
from typing import Any

from tfpipe import storage
from tfpipe.convert import csvfile, parquetfile
from tfpipe.convert.config import ALL_COLUMNS
from tfpipe.convert.infer import Column, Problems, null_value_error
from tfpipe.errors import ConfigError, DataError
from tfpipe.manifest import SkippedInput
from tfpipe.schema import KIND_DTYPES, MISSING_SUFFIX, Field, Schema

# A column's kind as pandas reads it in the second pass; "null" is a column with no value at all.
_KIND_TO_PANDAS = {
    "int": "Int64",
    "float": "Float64",
    "bool": "boolean",
    "string": "string",
    "null": "Float64",
}
TABLE_SUFFIXES = {".csv": "csv", ".tsv": "csv", ".parquet": "parquet", ".pq": "parquet"}
_LISTED_DROPS = 20  # dropped row numbers listed per file in the manifest; the count is exact
NullValues = Mapping[str, tuple[str, ...]]


@dataclasses.dataclass(frozen=True, slots=True)
class TableOptions:
    """How a table is read and checked (`ConvertConfig`'s table fields).

    Attributes:
      null_values: CSV text that means missing, besides the empty field: by column, and under
        `ALL_COLUMNS` for every column.
      column_types: declared types ("int", "float", "bool", "string") of CSV columns and Hive
        partition columns, instead of the inferred ones.
    """

    chunk_rows: int = 8192
    label: str | None = None
    missing: str = "error"
    missing_label: str = "error"
    encoding: str = "utf-8"
    null_values: NullValues = dataclasses.field(default_factory=dict)
    column_types: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, cfg: Any) -> TableOptions:
        """The table options of a `ConvertConfig`."""
        return cls(**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(cls)})


@dataclasses.dataclass(frozen=True, slots=True)
class TableScan:
    """What the first pass learned.

    Attributes:
      rows: rows that will be written (after any rows dropped for a null label).
      drop_label: the label column whose null rows are dropped, or None.
      skipped: files left out of a folder, and per file with dropped rows, their count and
        first row numbers.
      file_rows: the rows each file adds to `rows`, so a shard's rows can be read from the
        files that hold them alone (`sources.TableRows`).
      partitions: each file's Hive partition values (empty tuple when not partitioned).
      notes: what the summary says of columns read otherwise than pandas would.
      identities: each file's size, modification time and content checksum, for `--resume`.
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
    null_values: NullValues = dataclasses.field(default_factory=dict)
    partitions: tuple[parquetfile.Partition, ...] = ()
    notes: tuple[str, ...] = ()
    identities: tuple[str, ...] = ()

    def partition(self, path: str) -> parquetfile.Partition | None:
        return self.partitions[self.files.index(path)] if self.partitions else None

    def chunks(self, chunk_rows: int) -> Iterator[tuple[Any, int, str]]:
        """The second pass: (frame, index of its first written row, file), types fixed.

        Raises:
          DataError: the files hold another number of rows than the first pass counted.
        """
        end, path = 0, self.files[0]
        partitions = dict(zip(self.files, self.partitions, strict=True)) if self.partitions else {}
        reading = Reading(self.format, self.encoding, self.null_values, self.kinds, partitions)
        for frame, first, path in read_chunks(self.files, reading, chunk_rows, self.drop_label):
            end = first + len(frame)
            if end > self.rows:
                break
            yield frame, first, path
        if end != self.rows:
            raise DataError(
                f"{path}: expected the {self.rows} rows the first pass read. Received: "
                f"{'more' if end > self.rows else end}; did the input change during the conversion?"
            )


@dataclasses.dataclass(frozen=True, slots=True)
class Reading:
    """How a table's files are read: the same in both passes, in any engine's worker.

    Attributes:
      kinds: each column's kind after the first pass; None in the first pass (CSV is then
        read as text, to be typed by `infer`).
      partitions: each partitioned file's Hive partition values, by path.
    """

    fmt: str
    encoding: str = "utf-8"
    null_values: NullValues = dataclasses.field(default_factory=dict)
    kinds: dict[str, str] | None = None
    partitions: Mapping[str, parquetfile.Partition] = dataclasses.field(default_factory=dict)


def list_table(src: str, fmt: str) -> parquetfile.Dataset:
    """The table files of `src`: the file itself, or a folder's files of that format (sorted),
    or a Hive-partitioned Parquet folder's files; other files are listed as skipped.

    Raises:
      DataError: no such files, a subfolder that is not a Hive partition of a Parquet folder,
        or a FIFO or device.
    """
    if storage.exists(src) if storage.is_gcs(src) else os.path.isfile(src):
        return parquetfile.Dataset((src,))
    _refuse_special(src, f"a {fmt} file or a folder of them")
    entries = _entries(src)
    suffixes = [s for s, f in TABLE_SUFFIXES.items() if f == fmt]
    if fmt == "parquet" and parquetfile.partitioned(src, [(n, d) for n, d in entries]):
        return parquetfile.hive_dataset(src, _walk(src))
    folders = [n for n, is_dir in entries if is_dir]
    if folders:
        raise DataError(
            f"{src}: expected a folder of {fmt} files (or Hive partition folders key=value/ of "
            f"Parquet files). Received: subfolder(s) {folders[:5]}, whose files would be left out. "
            "Move them out, or convert each folder on its own."
        )
    files = [storage.join(src, n) for n, _ in entries if _suffix(n, fmt) in suffixes]
    if not files:
        raise DataError(f"{src}: expected {fmt} files ({', '.join(suffixes)}). Received: none")
    skipped = tuple(
        SkippedInput(
            storage.join(src, n), f"not a {fmt} file: its name does not end in {' or '.join(suffixes)}"
        )
        for n, _ in entries
        if _suffix(n, fmt) not in suffixes
    )
    for path in files:
        _refuse_special(path, f"a regular {fmt} file", folder_ok=False)
    return parquetfile.Dataset(tuple(files), skipped=skipped)


def table_files(src: str, fmt: str) -> list[str]:
    """The table files of `src`, in the order their rows are read (see `list_table`)."""
    return list(list_table(src, fmt).files)


def _entries(src: str) -> list[tuple[str, bool]]:
    """(name, is_dir) of the entries of a folder that readers take: not hidden, not `_SUCCESS`."""
    if storage.is_gcs(src):
        found = [(name, is_dir) for name, is_dir, _, _ in storage.gcs_entries(src)]
    else:
        found = [(n, os.path.isdir(os.path.join(src, n))) for n in storage.listdir(src)]
    return sorted(e for e in found if not parquetfile.ignored(e[0]))


def _walk(src: str) -> list[str]:
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
            dirs[:] = [d for d in dirs if not parquetfile.ignored(d)]
            rel = os.path.relpath(root, src).replace(os.sep, "/")
            rels += [n if rel == "." else f"{rel}/{n}" for n in names]
    return sorted(r for r in rels if not any(parquetfile.ignored(p) for p in r.split("/")))


def _refuse_special(path: str, expected: str, folder_ok: bool = True) -> None:
    """Refuses a FIFO, socket or device (reading one would block or never end), by name."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # a missing path (or gs://) is named by the listing or the read that follows
    if not (stat.S_ISREG(mode) or (folder_ok and stat.S_ISDIR(mode))):
        raise DataError(f"{path}: expected {expected}. Received: {storage.file_kind(mode)}")


def _suffix(name: str, fmt: str) -> str:
    """`.csv` for `t.csv` and, as pandas reads them, `t.csv.gz`, `.bz2`, `.xz` and `.zip`."""
    stem, suffix = os.path.splitext(name.lower())
    if fmt == "csv" and suffix in csvfile.COMPRESSED:
        suffix = os.path.splitext(stem)[1]
    return suffix


def read_chunks(
    files: tuple[str, ...], reading: Reading, chunk_rows: int, drop_null: str | None = None
) -> Iterator[tuple[Any, int, str]]:
    """Yields (DataFrame chunk, index of its first row, file) across all files in order.

    A chunk's index holds each row's number within its file (0-based, header excluded), for
    messages. With `drop_null`, rows where that column is null are left out and not counted.
    """
    first = 0
    for path in files:
        for frame in file_chunks(path, reading, chunk_rows):
            if drop_null is not None:
                frame = frame[frame[drop_null].notna().to_numpy()]
                if frame.empty:
                    continue
            yield frame, first, path
            first += len(frame)


def file_chunks(
    path: str, reading: Reading, chunk_rows: int, header: list[str] | None = None
) -> Iterator[Any]:
    """One file's rows as DataFrames of `chunk_rows`, indexed by row number within the file.

    Args:
      header: a CSV file's column names (pandas' names for unnamed ones), when `reading.kinds`
        is None (the first pass reads CSV as text).

    Raises:
      DataError: the file cannot be read (a Parquet page fails its checksum, a CSV has a
        quote that never closes, a value does not parse as its column's type), naming it.
    """
    import pandas as pd

    partition = reading.partitions.get(path)
    if reading.fmt == "csv":
        names = header if reading.kinds is None else list(reading.kinds)
        dtype = (
            "string"
            if reading.kinds is None
            else {c: _KIND_TO_PANDAS[k] for c, k in reading.kinds.items() if k in _KIND_TO_PANDAS}
        )
        handle = csvfile.open_binary(path)

        def frames() -> Iterator[Any]:
            with pd.read_csv(
                handle,
                chunksize=chunk_rows,
                sep=csvfile.separator(path),
                index_col=False,
                dtype_backend="numpy_nullable",
                dtype=dtype or None,
                encoding=reading.encoding,
                keep_default_na=False,
                na_values=csvfile.na_values(names or [], reading.null_values),
            ) as chunks:
                yield from chunks

        reader = frames()
        errors: tuple[type[BaseException], ...] = (pd.errors.ParserError, ValueError, UnicodeDecodeError)
    else:
        import pyarrow as pa

        handle = None
        reader = parquetfile.batches(parquetfile.open_file(path), chunk_rows)
        errors = (pa.ArrowException, OSError)
    row = 0
    try:
        while True:
            try:
                frame = next(reader)
            except StopIteration:
                return
            except errors as e:
                what = "CSV text" if reading.fmt == "csv" else "Parquet data whose pages pass their checksums"
                detail = " ".join(str(e).split())
                raise DataError(
                    f"{path}: expected {what}. Received: an error reading rows from row {row}: {detail}"
                ) from None
            frame.index = pd.RangeIndex(row, row + len(frame))
            if partition:
                frame = _with_partition(frame, partition, reading.kinds, path)
            yield frame
            row += len(frame)
    finally:
        reader.close()  # pandas' reader first: it flushes a wrapper around the handle
        if handle is not None:
            handle.close()


def _with_partition(
    frame: Any, partition: parquetfile.Partition, kinds: dict[str, str] | None, path: str
) -> Any:
    """The frame with its file's partition values as columns: text, or typed as `kinds` says."""
    import pandas as pd

    from tfpipe.convert import values

    clash = sorted(set(partition) & {str(c) for c in frame.columns})
    if clash:
        raise DataError(
            f"{path}: column(s) {clash} are both in the file and a partition folder name "
            "(key=value); a row would have two values. Rename one of them."
        )
    columns = {}
    for key, value in partition.items():
        text = pd.Series([value] * len(frame), index=frame.index, dtype="string")
        columns[key] = text if kinds is None else values.typed(text, kinds[key])
    return pd.concat([frame, pd.DataFrame(columns, index=frame.index)], axis=1)


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


def scan(src: str, fmt: str, options: TableOptions) -> TableScan:
    """First pass: shape, schema, row count, null positions and an output size estimate.

    Raises:
      DataError: every problem found, at once (up to `infer.PROBLEMS_SHOWN`): a null under
        missing="error" (names column and row), a null label unless missing_label="drop", a
        value that does not fit its column's type or that float32 would change, a ragged CSV
        row, an undecodable file; at once: an unreadable file, an unsupported column type
        (names the column), or a missing label column.
    """
    listing = list_table(src, fmt)
    check_options(src, fmt, options, listing)
    files = listing.files
    columns: dict[str, Column] = {}
    problems = Problems()
    found = [
        scan_file(src, path, fmt, options, i == 0, columns, problems, listing.partition(i))
        for i, path in enumerate(files)
    ]
    total, kept = sum(f.total for f in found), sum(f.kept for f in found)
    drops = {path: (f.dropped, f.listed) for path, f in zip(files, found, strict=True) if f.dropped}
    notes = [n for f in found for n in f.notes]
    out = finish(src, fmt, listing, columns, total, kept, drops, options, problems, notes)
    return dataclasses.replace(
        out, file_rows=tuple(f.kept for f in found), identities=tuple(f.identity for f in found)
    )


@dataclasses.dataclass(slots=True)
class FileState:
    """What the first pass found in one file (or, summed, in all of them)."""

    total: int = 0
    kept: int = 0
    dropped: int = 0
    listed: list[int] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    identity: str = ""
    label_reported: bool = False


def check_options(src: str, fmt: str, options: TableOptions, listing: parquetfile.Dataset) -> None:
    """Refuses table options that do not apply to this table's format."""
    if fmt == "parquet" and options.null_values:
        raise ConfigError(
            f"null_values (--null-values) names text that means missing in CSV files. Received: "
            f"null_values={dict(options.null_values)!r} for the Parquet source {src}, whose nulls "
            "are stored as nulls."
        )
    declared = sorted(set(options.column_types) - set(listing.keys)) if fmt == "parquet" else []
    if declared:
        raise ConfigError(
            f"column_types (--column-type) declares the types of CSV columns and Hive partition "
            f"columns (key=value folders). Received: {declared} for the Parquet source {src}, "
            "whose columns carry their types."
        )


def scan_file(
    src: str,
    path: str,
    fmt: str,
    options: TableOptions,
    first_file: bool,
    columns: dict[str, Column],
    problems: Problems,
    partition: parquetfile.Partition | None = None,
) -> FileState:
    """The first pass over one file of `src`: its rows read, kept and dropped, the first
    dropped row numbers, notes and identity. Adds the file's values to `columns` (set from
    its first chunk if empty) and what is wrong with them to `problems`.

    Raises:
      DataError: a problem that stops the whole pass (a missing label column, other columns
        than the first file's, an unsupported column type).
    """
    found = FileState(identity=storage.identity(path, checksum=True))
    header = None
    if fmt == "csv":
        try:
            header, found.notes = csvfile.check_shape(path, options.encoding, problems)
        except DataError as e:
            problems.add(str(e))
            return found
        if header is None:
            return found  # ragged rows, listed in problems: the values would be shifted
    else:
        note = parquetfile.index_note(path, parquetfile.open_file(path))
        found.notes += [note] if note else []
    reading = Reading(
        fmt, options.encoding, options.null_values, None, {path: partition} if partition else {}
    )
    chunks = file_chunks(path, reading, options.chunk_rows, header)
    while True:
        try:
            chunk = next(chunks)
        except StopIteration:
            break
        except DataError as e:
            problems.add(str(e))  # the file cannot be read on: its other problems are unknown
            break
        if not columns:
            _start_columns(src, path, chunk, columns, options, fmt, partition)
        elif [str(c) for c in chunk.columns] != list(columns):
            raise DataError(f"{path}: expected columns {list(columns)}. Received: {list(chunk.columns)}")
        found.total += len(chunk)
        chunk = _drop_label_nulls(chunk, path, options, found, problems)
        found.kept += len(chunk)
        for c, column in columns.items():
            if not column.failed:
                _add(column, chunk[c], path, fmt == "csv" and first_file, problems)
    _check_unchanged(path, found.identity)
    return found


def _start_columns(
    src: str,
    path: str,
    chunk: Any,
    columns: dict[str, Column],
    options: TableOptions,
    fmt: str,
    partition: parquetfile.Partition | None,
) -> None:
    text = {str(c) for c in chunk.columns} if fmt == "csv" else set(partition or ())
    columns.update(
        (str(c), Column(str(c), text=str(c) in text, declared=options.column_types.get(str(c), "")))
        for c in chunk.columns
    )
    if options.label is not None and options.label not in columns:
        raise DataError(f"{src}: label column {options.label!r} not found. Received columns: {list(columns)}")
    named = {c for c in options.null_values if c != ALL_COLUMNS} | set(options.column_types)
    unknown = sorted(named - set(columns))
    if unknown:
        raise DataError(
            f"{src}: null_values or column_types name column(s) {unknown}, which the table does "
            f"not have. Received columns: {list(columns)}"
        )


def _drop_label_nulls(
    chunk: Any, path: str, options: TableOptions, found: FileState, problems: Problems
) -> Any:
    """The chunk without its null-label rows (counted) under missing_label="drop"; with "error",
    the first such row of the file is a problem."""
    if options.label is None:
        return chunk
    try:
        null = _label_nulls(chunk, options.label, options.missing_label, path)
    except DataError as e:
        if not found.label_reported:  # the first null label of each file
            problems.add(str(e))
            found.label_reported = True
        return chunk
    if null.any():
        found.dropped += int(null.sum())
        found.listed = (found.listed + chunk.index[null][:_LISTED_DROPS].tolist())[:_LISTED_DROPS]
        chunk = chunk[~null]
    return chunk


def _add(column: Column, series: Any, path: str, csv_first_file: bool, problems: Problems) -> None:
    try:
        if column.text:
            column.add_text(series, path, csv_first_file)
        else:
            column.add(series, path, csv_first_file)
    except DataError as e:
        problems.add(str(e))
        column.failed = True


def _check_unchanged(path: str, identity: str) -> None:
    """Refuses a file whose size or modification time changed while the first pass read it."""
    now = storage.identity(path)
    if not storage.same_version(identity, now):
        raise DataError(
            f"{path}: changed while the first pass read it (was {identity}, now {now}). "
            "Convert it once nothing writes to it."
        )


def finish(
    src: str,
    fmt: str,
    listing: parquetfile.Dataset,
    columns: dict[str, Column],
    total: int,
    kept: int,
    drops: dict[str, tuple[int, list[int]]],
    options: TableOptions,
    problems: Problems,
    notes: list[str],
) -> TableScan:
    """The TableScan of a first pass over every file, or a DataError naming all its problems."""
    files, label = listing.files, options.label
    for column in columns.values():
        problem = column.float_problem()
        if problem:
            problems.add(problem)
    nulls = {c: col.first_null for c, col in columns.items() if col.first_null}
    if options.missing == "error":
        for c in sorted(nulls, key=lambda c: (files.index(nulls[c][0]), nulls[c][1])):
            if not columns[c].failed and c != label:  # a null label is a problem of its own
                problems.add(str(null_value_error(*nulls[c], c)))
    else:
        _check_mask_names(src, columns, nulls, problems)
    error = problems.error(src)
    if error is not None:
        raise error
    if not columns or kept == 0:
        dropped = f", all with a null label {label!r} (missing_label='drop')" if total else ""
        raise DataError(f"{src}: expected a table with at least one row. Received: {total} rows{dropped}")
    fields = tuple(
        Field(c, KIND_DTYPES.get(col.kind, "float32"), has_mask=c in nulls, source_dtype=col.source_dtype)
        for c, col in columns.items()
    )
    skipped = listing.skipped + tuple(
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
        {c: col.kind for c, col in columns.items()},
        0,
        options.encoding,
        label if drops else None,
        total - kept,
        skipped,
        null_values=dict(options.null_values),
        partitions=listing.partitions,
        notes=tuple(dict.fromkeys([*notes, *(n for col in columns.values() if (n := col.note()))])),
    )
    return dataclasses.replace(out, estimated_bytes=_estimate_bytes(out))


def _check_mask_names(
    src: str, columns: dict[str, Column], nulls: dict[str, Any], problems: Problems
) -> None:
    """Refuses a column named like another column's null mask (`Ozone/missing` beside a masked
    `Ozone`): one would overwrite the other in every record."""
    for c in nulls:
        if c + MISSING_SUFFIX in columns:
            problems.add(
                f"{src}: column {c + MISSING_SUFFIX!r} has the name of the null mask that "
                f"--missing fill (missing='fill') writes for column {c!r} (its nulls, e.g. "
                f"{nulls[c][0]} row {nulls[c][1]}). Expected distinct feature names: one would "
                f"overwrite the other in every record. Rename the column {c + MISSING_SUFFIX!r}."
            )


def _estimate_bytes(scan: TableScan) -> int:
    """Encodes the first chunk (<= 1000 rows) and scales its size to all rows."""
    from tfpipe.convert.encode import TableTask, encode_table

    chunk, _, path = next(scan.chunks(min(1000, scan.rows)))
    records = encode_table(TableTask(chunk, 0, scan.schema, path))
    per_row = sum(len(r.record or b"") + 16 for r in records) / max(len(records), 1)
    return int(per_row * scan.rows)

"""CSV and Parquet sources: the first pass, read in chunks so a table larger than memory converts.

The first pass reads every row. It checks the file's shape (CSV rows as wide as the header,
Parquet pages against their checksums), types each column (`infer`: from its first chunk of
values, CSV text by the rules of `values`, or as `column_types` declares), refuses later values
that do not fit that type or that float32 would change, finds nulls, and counts rows. It reports
every problem it finds at once, and everything that would fail the run fails it before anything
is written. The second pass reads with the types fixed, so every chunk encodes alike.

Reading the files (listing, chunks, what is missing in CSV) is read.py's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from tfpipe import storage
from tfpipe.convert.config import ALL_COLUMNS, ConvertConfig
from tfpipe.convert.formats import arrowfile, csvfile, hfsaved, parquetfile, textcolumns
from tfpipe.convert.problems import Problems
from tfpipe.errors import ConfigError, DataError
from tfpipe.format.manifest import SkippedInput
from tfpipe.format.schema import KIND_DTYPES, MISSING_SUFFIX, Field, Schema
from tfpipe.modalities.tables.convert.encode import TableTask, encode_table
from tfpipe.modalities.tables.convert.infer import Column, null_value_error
from tfpipe.modalities.tables.convert.read import (
    TABLE_SUFFIXES as TABLE_SUFFIXES,  # where bench.data finds it
)
from tfpipe.modalities.tables.convert.read import (
    TYPED_FORMATS,
    NullValues,
    Reading,
    file_chunks,
    list_table,
    read_chunks,
)

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd  # imported where a file is read


_LISTED_DROPS = 20  # dropped row numbers listed per file in the manifest; the count is exact


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
    def of(cls, cfg: ConvertConfig) -> TableOptions:
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
      class_names: the label's class names when the files declare it a `datasets` ClassLabel
        (Parquet or Arrow written by Hugging Face `datasets`), else empty.
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
    class_names: tuple[str, ...] = ()

    def chunks(self, chunk_rows: int) -> Iterator[tuple[pd.DataFrame, int, str]]:
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


def _label_nulls(frame: pd.DataFrame, label: str, missing_label: str, path: str) -> np.ndarray:
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


def _nan_label(label: str, path: str, row: int) -> str:
    return (
        f"{path}: label column {label!r}, row {row} (0-based, header excluded) is NaN. Expected a "
        "label on every row: NaN is neither a class nor a target. If NaN means the row has no "
        "label, store it as a null (an empty CSV field, or --null-values nan) and pass "
        "--missing-label drop (missing_label='drop') to leave such rows out; else fix the data."
    )


def scan(src: str, fmt: str, options: TableOptions) -> TableScan:
    """First pass: shape, schema, row count, null positions and an output size estimate.

    Raises:
      DataError: every problem found, at once (up to `problems.PROBLEMS_SHOWN`): a null under
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
    """Refuses declared types of columns that carry their own (`config.check_applies` refuses
    the options that do not apply to a format at all)."""
    name = {"parquet": "Parquet", "arrow": "Arrow IPC", "jsonl": "JSON Lines"}.get(fmt, fmt)
    declared = sorted(set(options.column_types) - set(listing.keys)) if fmt in TYPED_FORMATS else []
    if declared:
        raise ConfigError(
            f"column_types (--column-type) declares the types of CSV columns and Hive partition "
            f"columns (key=value folders). Received: {declared} for the {name} source {src}, "
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
    header, classes = None, None
    if fmt == "csv":
        try:
            header, found.notes = csvfile.check_shape(path, options.encoding, problems)
        except DataError as e:
            problems.add(str(e))
            return found
        if header is None:
            return found  # ragged rows, listed in problems: the values would be shifted
    elif fmt != "jsonl":  # JSON Lines have no schema: JSON types each value
        classes = _read_schema(path, fmt, options.label, found)
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
        found.label_reported = found.label_reported or _not_a_class(
            chunk, classes, path, options.label, problems
        )
        for c, column in columns.items():
            if not column.failed:
                _add(column, chunk[c], path, fmt == "csv" and first_file, problems)
    _check_unchanged(path, found.identity)
    return found


def _start_columns(
    src: str,
    path: str,
    chunk: pd.DataFrame,
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
    chunk: pd.DataFrame, path: str, options: TableOptions, found: FileState, problems: Problems
) -> pd.DataFrame:
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


def _add(column: Column, series: pd.Series, path: str, csv_first_file: bool, problems: Problems) -> None:
    try:
        if column.text:
            column.add_text(series, path, csv_first_file)
        else:
            column.add(series, path, csv_first_file)
    except DataError as e:
        problems.add(str(e))
        column.failed = True


def _read_schema(path: str, fmt: str, label: str | None, found: FileState) -> tuple[str, ...] | None:
    """Notes what a Parquet or Arrow file's schema says (a pandas index stored as a column);
    returns its label's ClassLabel names, if it declares them."""
    schema = arrowfile.open_file(path).schema if fmt == "arrow" else parquetfile.open_file(path).schema_arrow
    note = parquetfile.index_note(path, schema)
    found.notes += [note] if note else []
    return hfsaved.class_names(hfsaved.schema_features(schema.metadata), label or "")


def _not_a_class(
    chunk: pd.DataFrame, classes: tuple[str, ...] | None, path: str, label: str | None, problems: Problems
) -> bool:
    """Whether a label of the chunk is no class index of the file's ClassLabel, if it declares
    one (datasets writes -1 for "no label"); the first such row is a problem."""
    if classes is None:
        return False
    values = chunk[label].dropna()
    bad = values[(values < 0) | (values >= len(classes))]
    if bad.empty:
        return False
    problems.add(
        f"{path}: label column {label!r}, row {int(bad.index[0])} holds {int(bad.iloc[0])}, which is not a "
        f"class index of the file's ClassLabel {list(classes)[:10]} (0..{len(classes) - 1}). datasets "
        "writes -1 for a row without a label: drop such rows (Dataset.filter) before converting."
    )
    return True


def _class_labels(listing: parquetfile.Dataset, fmt: str, label: str | None) -> tuple[str, ...]:
    """The label's class names when every file declares it the same `datasets` ClassLabel.

    Raises:
      DataError: files that declare other names (their labels would mean other classes).
    """
    if label is None or fmt not in ("parquet", "arrow"):
        return ()
    names = [textcolumns.declared_labels(p, fmt, label) for p in listing.files]
    if any(n != names[0] for n in names):
        other = next(i for i, n in enumerate(names) if n != names[0])
        raise DataError(
            f"{listing.files[other]}: expected the ClassLabel names of {listing.files[0]} for label "
            f"column {label!r}, {names[0]}. Received: {names[other]}"
        )
    return names[0] or ()


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
    _value_problems(columns, label, problems)
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
    skipped = listing.skipped + _dropped_rows(drops, label)
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
        class_names=_class_labels(listing, fmt, label),
    )
    return dataclasses.replace(out, estimated_bytes=_estimate_bytes(out))


def _value_problems(columns: dict[str, Column], label: str | None, problems: Problems) -> None:
    """Values float32 would change (whole numbers, the smallest values), and a NaN label."""
    for column in columns.values():
        for problem in (column.float_problem(), column.underflow_problem()):
            if problem:
                problems.add(problem)
    # No column at all when a file's header or text could not be read (a decode error, a
    # duplicate name): that problem is already in `problems`, and the label has no values.
    column = columns.get(label) if label is not None else None
    if column is not None and column.first_nan and not column.failed:
        problems.add(_nan_label(label, *column.first_nan))


def _dropped_rows(drops: dict[str, tuple[int, list[int]]], label: str | None) -> tuple[SkippedInput, ...]:
    """One skipped entry per file whose rows with a null label were left out."""
    return tuple(
        SkippedInput(
            path,
            f"{n} row{'s' if n > 1 else ''} with a null label {label!r} left out (--missing-"
            f"label drop, missing_label='drop'): row{'s' if n > 1 else ''} "
            f"{', '.join(map(str, rows))}{' and more' if n > len(rows) else ''} (0-based, "
            "header excluded)",
        )
        for path, (n, rows) in drops.items()
    )


def _check_mask_names(
    src: str, columns: dict[str, Column], nulls: dict[str, tuple[str, int]], problems: Problems
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
    chunk, _, path = next(scan.chunks(min(1000, scan.rows)))
    records = encode_table(TableTask(chunk, 0, scan.schema, path))
    per_row = sum(len(r.record or b"") + 16 for r in records) / max(len(records), 1)
    return int(per_row * scan.rows)

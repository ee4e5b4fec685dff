"""Reading a table's files: listing them, and their rows in chunks, the same way in both passes
and in any engine's worker.

A source is one CSV, Parquet or Arrow IPC (Feather) file, a folder of them (sorted; other files are listed as
skipped, names starting with `.` or `_` are left out as pyarrow and Spark leave out `_SUCCESS`),
or a Hive-partitioned Parquet folder (`parquetfile`). In a CSV file only an empty field is
missing (`""` too): text such as `NA`, `None` or `null` is kept as written unless `null_values`
names it, for every column or for one. The first pass reads CSV fields as text, typed by
`infer`; the second reads them as the types it decided.
"""

from __future__ import annotations

import dataclasses
import os
import stat
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from tfpipe import storage
from tfpipe.convert.formats import arrowfile, csvfile, hfsaved, jsonlfile, parquetfile
from tfpipe.errors import DataError, TfpipeError
from tfpipe.format.manifest import SkippedInput
from tfpipe.modalities.tables.convert import values

if TYPE_CHECKING:
    import pandas as pd  # imported where a file is read: pandas takes ~0.5 s

# A column's kind as pandas reads it in the second pass; "null" is a column with no value at all.
# Floats are read as text and typed by `values.floats`, as in the first pass: pandas' own
# reader would make `nan` a null.
_KIND_TO_PANDAS = {
    "int": "Int64",
    "float": "string",
    "bool": "boolean",
    "string": "string",
    "null": "Float64",
}
TABLE_SUFFIXES = {
    ".csv": "csv",
    ".tsv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    **dict.fromkeys(arrowfile.SUFFIXES, "arrow"),
    **dict.fromkeys(jsonlfile.SUFFIXES, "jsonl"),
}
TYPED_FORMATS = ("parquet", "arrow", "jsonl")
"""Table formats whose columns carry their types (CSV's are text, typed by `infer`)."""
NullValues = Mapping[str, tuple[str, ...]]


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
    saved = hfsaved.saved_dataset(src) if fmt == "arrow" and (hfsaved.STATE, False) in entries else None
    if saved is not None:  # its Arrow files, in the order its state.json lists them
        return parquetfile.Dataset(saved.files)
    suffixes = [s for s, f in TABLE_SUFFIXES.items() if f == fmt]
    if fmt == "parquet" and parquetfile.partitioned(src, [(n, d) for n, d in entries]):
        return parquetfile.hive_dataset(src, parquetfile.walk(src))
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


def _entries(src: str) -> list[tuple[str, bool]]:
    """(name, is_dir) of the entries of a folder that readers take: not hidden, not `_SUCCESS`."""
    if storage.is_gcs(src):
        found = [(name, is_dir) for name, is_dir, _, _ in storage.gcs_entries(src)]
    else:
        found = [(n, os.path.isdir(os.path.join(src, n))) for n in storage.listdir(src)]
    return sorted(e for e in found if not parquetfile.ignored(e[0]))


def _refuse_special(path: str, expected: str, folder_ok: bool = True) -> None:
    """Refuses a FIFO, socket or device (reading one would block or never end), by name."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # a missing path (or gs://) is named by the listing or the read that follows
    if not (stat.S_ISREG(mode) or (folder_ok and stat.S_ISDIR(mode))):
        raise DataError(f"{path}: expected {expected}. Received: {storage.file_kind(mode)}")


def _suffix(name: str, fmt: str) -> str:
    """`.csv` for `t.csv` and, as pandas reads them, `t.csv.gz`, `.bz2`, `.xz` and `.zip`
    (`.jsonl` for JSON Lines alike)."""
    stem, suffix = os.path.splitext(name.lower())
    if fmt in ("csv", "jsonl") and suffix in csvfile.COMPRESSED:
        suffix = os.path.splitext(stem)[1]
    return suffix


def read_chunks(
    files: tuple[str, ...], reading: Reading, chunk_rows: int, drop_null: str | None = None
) -> Iterator[tuple[pd.DataFrame, int, str]]:
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
) -> Iterator[pd.DataFrame]:
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
    reader, errors, what = _reader(path, reading, chunk_rows, header)
    row = 0
    try:
        while True:
            try:
                frame = next(reader)
            except StopIteration:
                return
            except TfpipeError:
                raise
            except errors as e:
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
        reader.close()


def _reader(
    path: str, reading: Reading, chunk_rows: int, header: list[str] | None
) -> tuple[Iterator[pd.DataFrame], tuple[type[BaseException], ...], str]:
    """The file's frames, the errors its reader raises on bad data, and what it expected."""
    import pandas as pd
    import pyarrow as pa

    if reading.fmt == "csv":
        errors = (pd.errors.ParserError, ValueError, UnicodeError)
        return _csv_frames(path, reading, chunk_rows, header), errors, "CSV text"
    if reading.fmt == "jsonl":  # its own errors name the line
        return jsonlfile.frames(path, chunk_rows, reading.kinds), (), "JSON Lines records"
    if reading.fmt == "arrow":
        return (
            arrowfile.batches(arrowfile.open_file(path), chunk_rows),
            (pa.ArrowException,),
            "Arrow IPC data",
        )
    frames = parquetfile.batches(parquetfile.open_file(path), chunk_rows)
    return frames, (pa.ArrowException, OSError), "Parquet data whose pages pass their checksums"


def _csv_frames(
    path: str, reading: Reading, chunk_rows: int, header: list[str] | None
) -> Iterator[pd.DataFrame]:
    """A CSV file's chunks: text in the first pass (`kinds` None), else typed as `kinds` says."""
    import pandas as pd

    names = header if reading.kinds is None else list(reading.kinds)
    dtype = (
        "string"
        if reading.kinds is None
        else {c: _KIND_TO_PANDAS[k] for c, k in reading.kinds.items() if k in _KIND_TO_PANDAS}
    )
    floats = [c for c, k in (reading.kinds or {}).items() if k == "float"]
    handle, codec = csvfile.open_binary(path, reading.encoding)
    try:
        with pd.read_csv(
            handle,
            chunksize=chunk_rows,
            sep=csvfile.separator(path),
            index_col=False,
            dtype_backend="numpy_nullable",
            dtype=dtype or None,
            encoding=codec,
            keep_default_na=False,
            na_values=csvfile.na_values(names or [], reading.null_values),
        ) as chunks:  # closed before the handle: it flushes a wrapper around it
            for frame in chunks:
                for c in floats:
                    frame[c] = values.floats(frame[c])
                yield frame
    finally:
        handle.close()


def _with_partition(
    frame: pd.DataFrame, partition: parquetfile.Partition, kinds: dict[str, str] | None, path: str
) -> pd.DataFrame:
    """The frame with its file's partition values as columns: text, or typed as `kinds` says."""
    import pandas as pd

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

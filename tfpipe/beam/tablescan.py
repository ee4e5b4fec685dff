"""The first pass over a table, one file per worker: types, nulls, dropped rows and row counts.

Each worker scans one file from a fresh start and returns what it learned as plain JSON. The
driver folds the files' results in file order. Where that fold provably equals the local
engine's single pass over all chunks (every file has the same columns, and each column's kind
per file combines without a type conflict), the result is the same `TableScan`. Anything else,
a file whose own scan failed included, is rare and decided by rerunning the local engine's
sequential scan in the driver, so the error (or result) is exactly the local engine's.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tfpipe.convert import csvfile
from tfpipe.convert import tables as local
from tfpipe.errors import DataError

_NUMBERS = ("int", "float")
_TEXT = ("string", "category")


@dataclasses.dataclass(frozen=True, slots=True)
class FileScan:
    """One file's first pass, or the error that stopped it."""

    path: str
    columns: tuple[dict[str, Any], ...] = ()  # _Column fields, in column order
    total: int = 0
    kept: int = 0
    dropped: int = 0
    dropped_rows: tuple[int, ...] = ()  # the first dropped row numbers
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> FileScan:
        return cls(
            obj["path"],
            tuple(obj["columns"]),
            obj["total"],
            obj["kept"],
            obj["dropped"],
            tuple(obj["dropped_rows"]),
            obj["error"],
        )


def scan_file(
    path: str,
    fmt: str,
    chunk_rows: int,
    label: str | None,
    missing_label: str,
    encoding: str,
    first_file: bool,
) -> FileScan:
    """The local engine's first pass over one file, as if it were the only one."""
    columns: dict[str, local._Column] = {}
    total = kept = dropped = 0
    listed: list[int] = []
    try:
        if fmt == "csv":
            csvfile.check_shape(path, encoding)
        for chunk in local.file_chunks(path, fmt, chunk_rows, None, encoding):
            if not columns:
                columns = {str(c): local._Column(str(c)) for c in chunk.columns}
                if label is not None and label not in columns:
                    raise DataError(f"label column {label!r} not found")
            elif [str(c) for c in chunk.columns] != list(columns):
                raise DataError("columns differ between chunks")
            total += len(chunk)
            if label is not None:
                null = local._label_nulls(chunk, label, missing_label, path)
                if null.any():
                    dropped += int(null.sum())
                    listed = (listed + chunk.index[null].tolist())[: local._LISTED_DROPS]
                    chunk = chunk[~null]
            kept += len(chunk)
            for c, column in columns.items():
                column.add(chunk[c], path, fmt == "csv" and first_file)
    except DataError as e:
        return FileScan(path, error=str(e))
    fields = tuple(dataclasses.asdict(c) for c in columns.values())
    return FileScan(path, fields, total, kept, dropped, tuple(listed))


def _fold_kind(have: str, new: str) -> str | None:
    """The kind after `have` meets `new`, as the sequential pass decides it; None on a conflict."""
    if new == "null" or new == have:
        return have
    if have == "null":
        return new
    if {have, new} <= set(_NUMBERS):
        return "float"
    if have in _TEXT:
        return "string"
    return None


def _fold_column(have: local._Column, new: dict[str, Any]) -> bool:
    """Folds one file's column into `have`; False if the fold may differ from the sequential pass."""
    kind = _fold_kind(have.kind, new["kind"])
    if kind is None or (have.kind in _TEXT and new["kind"] in _NUMBERS):  # numbers checks differ
        return False
    if have.kind == "null" and new["kind"] != "null":
        have.sample = new["sample"]
    have.kind = kind
    have.source_dtype = have.source_dtype or new["source_dtype"]
    for name in ("first_null", "whole", "fraction"):
        if getattr(have, name) is None and new[name] is not None:
            setattr(have, name, tuple(new[name]))
    return True


def merge(
    src: str,
    fmt: str,
    files: tuple[str, ...],
    scans: list[FileScan],
    label: str | None,
    missing: str,
    missing_label: str,
    encoding: str,
    chunk_rows: int,
) -> local.TableScan:
    """The TableScan of all files, from their scans in file order (see the module doc).

    Raises:
      DataError: as the local engine's scan raises it.
    """
    columns = _fold(scans)
    if columns is None:
        return local.scan(src, fmt, chunk_rows, label, missing, missing_label, encoding)
    drops = {s.path: (s.dropped, list(s.dropped_rows)) for s in scans if s.dropped}
    total, kept = sum(s.total for s in scans), sum(s.kept for s in scans)
    return local._finish(src, fmt, files, columns, total, kept, drops, label, missing, encoding)


def _fold(scans: list[FileScan]) -> dict[str, local._Column] | None:
    if any(s.error for s in scans):
        return None
    names = [c["name"] for c in scans[0].columns]
    columns = {n: local._Column(n) for n in names}
    for s in scans:
        if [c["name"] for c in s.columns] != names:
            return None
        if not all(_fold_column(columns[c["name"]], c) for c in s.columns):
            return None
    return columns

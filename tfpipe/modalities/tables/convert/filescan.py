"""The first pass over a table, one file per worker: types, nulls, dropped rows and row counts
(`scan_on`, when an engine runs work on its workers: the Beam engine's `on_workers`).

Each worker scans one file from a fresh start and returns what it learned as plain JSON. The
driver folds the files' results in file order. Where that fold provably equals the local
engine's single pass over all chunks (every file has the same columns, and each column's kind
per file combines without a type conflict), the result is the same `TableScan`. Anything else,
a file whose own scan failed included, is rare and decided by rerunning the local engine's
sequential scan in the driver, so the error (or result) is exactly the local engine's.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from tfpipe.convert.formats import parquetfile
from tfpipe.convert.kind import OnWorkers
from tfpipe.convert.problems import Problems
from tfpipe.errors import DataError
from tfpipe.format.jsonobject import JsonObject
from tfpipe.modalities.tables.convert import read as tables_read
from tfpipe.modalities.tables.convert import scan as tables_scan
from tfpipe.modalities.tables.convert.infer import Column

_NUMBERS = ("int", "float")
_TEXT = ("string", "category")


@dataclasses.dataclass(frozen=True, slots=True)
class FileScan:
    """One file's first pass, or the error that stopped it."""

    path: str
    columns: tuple[JsonObject, ...] = ()  # Column fields, in column order
    total: int = 0
    kept: int = 0
    dropped: int = 0
    dropped_rows: tuple[int, ...] = ()  # the first dropped row numbers
    error: str = ""
    notes: tuple[str, ...] = ()
    identity: str = ""

    def to_json(self) -> JsonObject:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, obj: JsonObject) -> FileScan:
        return cls(
            obj["path"],
            tuple(obj["columns"]),
            obj["total"],
            obj["kept"],
            obj["dropped"],
            tuple(obj["dropped_rows"]),
            obj["error"],
            tuple(obj["notes"]),
            obj["identity"],
        )


def scan_on(
    on_workers: OnWorkers, src: str, fmt: str, options: tables_scan.TableOptions
) -> tables_scan.TableScan:
    """`tables_scan.scan` as a stage of the engine's, one file per worker, with each file's rows
    to write, folded here in file order."""
    listing = tables_read.list_table(src, fmt)
    tables_scan.check_options(src, fmt, options, listing)
    files = listing.files
    scan_one = functools.partial(_scan_json, fmt=fmt, options=options, first=files[0])
    results = on_workers("scan", scan_one, [(f, listing.partition(i)) for i, f in enumerate(files)])
    return merge(src, fmt, listing, [FileScan.from_json(r) for r in results], options)


def _scan_json(
    item: tuple[str, dict[str, str | None] | None], fmt: str, options: tables_scan.TableOptions, first: str
) -> dict[str, Any]:
    path, partition = item
    return scan_file(path, fmt, options, path == first, partition).to_json()


def scan_file(
    path: str,
    fmt: str,
    options: tables_scan.TableOptions,
    first_file: bool,
    partition: dict[str, str | None] | None = None,
) -> FileScan:
    """The local engine's first pass over one file, as if it were the only one."""
    columns: dict[str, Column] = {}
    problems = Problems()
    try:
        found = tables_scan.scan_file(path, path, fmt, options, first_file, columns, problems, partition)
    except DataError as e:
        return FileScan(path, error=str(e))
    if problems:
        return FileScan(path, error=str(problems.error(path)))
    fields = tuple(dataclasses.asdict(c) for c in columns.values())
    return FileScan(
        path,
        fields,
        found.total,
        found.kept,
        found.dropped,
        tuple(found.listed),
        "",
        tuple(found.notes),
        found.identity,
    )


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


def _fold_column(have: Column, new: JsonObject) -> bool:
    """Folds one file's column into `have`; False if the fold may differ from the sequential pass."""
    kind = _fold_kind(have.kind, new["kind"])
    if kind is None or (have.kind in _TEXT and new["kind"] in _NUMBERS):  # numbers checks differ
        return False
    if have.kind == "null" and new["kind"] != "null":
        have.sample = new["sample"]
    have.kind = kind
    have.source_dtype = have.source_dtype or new["source_dtype"]
    for name in ("first_null", "whole", "fraction", "first_code", "first_na", "first_nan", "underflow"):
        if getattr(have, name) is None and new[name] is not None:
            setattr(have, name, tuple(new[name]))
    for name in ("texts", "numeric_like", "na_like", "underflows"):
        setattr(have, name, getattr(have, name) + new[name])
    return True


def merge(
    src: str, fmt: str, listing: parquetfile.Dataset, scans: list[FileScan], options: tables_scan.TableOptions
) -> tables_scan.TableScan:
    """The TableScan of all files, from their scans in file order (see the module doc).

    Raises:
      DataError: as the local engine's scan raises it.
    """
    columns = _fold(scans, options)
    if columns is None:
        return tables_scan.scan(src, fmt, options)
    drops = {s.path: (s.dropped, list(s.dropped_rows)) for s in scans if s.dropped}
    total, kept = sum(s.total for s in scans), sum(s.kept for s in scans)
    notes = [n for s in scans for n in s.notes]
    out = tables_scan.finish(src, fmt, listing, columns, total, kept, drops, options, Problems(), notes)
    return dataclasses.replace(
        out, file_rows=tuple(s.kept for s in scans), identities=tuple(s.identity for s in scans)
    )


def _fold(scans: list[FileScan], options: tables_scan.TableOptions) -> dict[str, Column] | None:
    if any(s.error for s in scans):
        return None
    names = [c["name"] for c in scans[0].columns]
    first = {c["name"]: c for c in scans[0].columns}
    columns = {n: Column(n, text=first[n]["text"], declared=options.column_types.get(n, "")) for n in names}
    for s in scans:
        if [c["name"] for c in s.columns] != names:
            return None
        if not all(_fold_column(columns[c["name"]], c) for c in s.columns):
            return None
    return columns

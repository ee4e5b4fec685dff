"""The tables kind: CSV, Parquet, Arrow or JSON Lines files, scanned once for their shape,
schema and row count; each row one record, read again in chunks by the workers."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from tfpipe.convert.config import ConvertConfig
from tfpipe.convert.encode import Piece
from tfpipe.convert.kind import Kind, OnWorkers
from tfpipe.convert.sources import PlannedShard, relative
from tfpipe.convert.writer import files_holding
from tfpipe.format.manifest import Manifest
from tfpipe.format.schema import Schema
from tfpipe.modalities.tables.convert import detect, filescan, flags
from tfpipe.modalities.tables.convert import read as tables_read
from tfpipe.modalities.tables.convert import scan as tables_scan
from tfpipe.modalities.tables.convert.encode import TableTask

if TYPE_CHECKING:
    import pandas as pd


@dataclasses.dataclass(frozen=True, slots=True)
class TableRows:
    """The rows of one shard, read on demand from the files that hold them, as the local
    engine reads them (the same chunks, so the pieces are alike). Plain values only: a Beam
    worker gets them as JSON (`beam.shards`).

    Attributes:
      files: (file, index of its first written row) of each file holding rows of the shard.
      fmt, schema, kinds, encoding, drop_label, null_values: the table's, from its first pass.
      chunk_rows: rows per chunk read.
      partitions: the Hive partition values of each of `files` that has them.
    """

    files: tuple[tuple[str, int], ...]
    fmt: str
    schema: Schema
    kinds: dict[str, str]
    chunk_rows: int
    encoding: str
    drop_label: str | None
    null_values: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    partitions: dict[str, dict[str, str | None]] = dataclasses.field(default_factory=dict)
    kind: ClassVar[str] = "tables"

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"schema": self.schema.to_json()}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> TableRows:
        body = dict(obj)
        files = tuple((str(p), int(i)) for p, i in body.pop("files"))
        nulls = {c: tuple(t) for c, t in body.pop("null_values", {}).items()}
        return cls(files, schema=Schema.from_json(body.pop("schema")), null_values=nulls, **body)

    @classmethod
    def of(
        cls, scan: tables_scan.TableScan, chunk_rows: int, file_rows: Sequence[int], first: int, end: int
    ) -> TableRows:
        """Rows first..end-1 of the table `scan`, whose files add `file_rows` rows each."""
        files = files_holding(scan.files, file_rows, first, end)
        partitions = {p: scan.partitions[scan.files.index(p)] for p, _ in files} if scan.partitions else {}
        return cls(
            files,
            scan.format,
            scan.schema,
            scan.kinds,
            chunk_rows,
            scan.encoding,
            scan.drop_label,
            dict(scan.null_values),
            partitions,
        )

    def pieces(self, shard: int, first: int, count: int) -> Iterator[Piece]:
        end = first + count
        reading = tables_read.Reading(self.fmt, self.encoding, self.null_values, self.kinds, self.partitions)
        for path, file_first in self.files:
            chunks = tables_read.read_chunks((path,), reading, self.chunk_rows, self.drop_label)
            for frame, offset, _ in chunks:
                if file_first + offset >= end:
                    chunks.close()
                    return
                piece = _rows_piece(shard, first, end, frame, file_first + offset, path, self.schema)
                if piece is not None:
                    yield piece


def _rows_piece(
    shard: int, first: int, end: int, frame: pd.DataFrame, start: int, path: str, schema: Schema
) -> Piece | None:
    """The part of a chunk (rows start.. of the table) that falls into rows first..end-1."""
    lo, hi = max(first, start), min(end, start + len(frame))
    if lo >= hi:
        return None
    return Piece(shard, lo, TableTask(frame.iloc[lo - start : hi - start], lo, schema, path))


@dataclasses.dataclass(frozen=True, slots=True)
class TableSource:
    """CSV or Parquet files, scanned once for their shape, schema and row count."""

    scan: tables_scan.TableScan
    chunk_rows: int
    fingerprint: str
    layout: str = "table"
    unit: str = "rows"
    label_offset: int = 0
    kind = "tables"
    attachments = ()

    schema = property(lambda self: self.scan.schema)
    class_names = property(lambda self: self.scan.class_names)
    n_items = property(lambda self: self.scan.rows)
    inputs = property(lambda self: self.scan.files)
    identities = property(lambda self: self.scan.identities)
    notes = property(lambda self: self.scan.notes)
    estimated_bytes = property(lambda self: self.scan.estimated_bytes)
    skipped = property(lambda self: self.scan.skipped)
    dropped_rows = property(lambda self: self.scan.dropped_rows)

    def shard_inputs(self, first: int, end: int) -> TableRows:
        return TableRows.of(self.scan, self.chunk_rows, self.scan.file_rows, first, end)

    def pieces(self, tasks: Sequence[PlannedShard]) -> Iterator[Piece]:
        for frame, start, path in self.scan.chunks(self.chunk_rows):
            for task in tasks:
                piece = _rows_piece(
                    task.index, task.first, task.first + task.count, frame, start, path, self.scan.schema
                )
                if piece is not None:
                    yield piece

    def with_schema(self, schema: Schema) -> TableSource:
        return dataclasses.replace(self, scan=dataclasses.replace(self.scan, schema=schema))


def open_table(
    src: str,
    fmt: str,
    cfg: ConvertConfig,
    joins: Manifest | None,
    dest: str = "",
    on_workers: OnWorkers | None = None,
) -> TableSource:
    """Scans a table once for its shape, schema and row count: in this process, or a file at a
    time on the engine's workers (`on_workers`, the Beam engine's), folded in file order."""
    options = tables_scan.TableOptions.of(cfg)
    if on_workers is None:
        scan = tables_scan.scan(src, fmt, options)
    else:
        scan = filescan.scan_on(on_workers, src, fmt, options)
    files = [relative(f, src) for f in scan.files]
    digest = hashlib.sha256(json.dumps([files, scan.rows, scan.kinds]).encode()).hexdigest()
    return TableSource(scan, cfg.chunk_rows, digest)


TABLE_FORMATS = ("csv", "parquet", "arrow", "jsonl")

TABLES = Kind(
    name="tables",
    formats=TABLE_FORMATS,
    open=open_table,
    inputs_from_json=TableRows.from_json,
    rereads_inputs=True,
    missing_applies=True,
    layouts=("table",),
    options={
        "label": (),
        "missing": (),
        "missing_label": (),
        "chunk_rows": (),
        "column_types": (),  # in Parquet, of Hive partition columns (`tables_scan.check_options`)
        "encoding": ("csv",),
        "null_values": ("csv",),
    },
    sources={TABLE_FORMATS: "tables", ("csv",): "CSV files"},
    nouns={
        "csv": "a CSV table",
        "parquet": "a Parquet table",
        "arrow": "an Arrow IPC table",
        "jsonl": "a JSON Lines table",
    },
    detect_file=detect.detect_file,
    signs=((10, detect.saved_dataset), (20, detect.partitions), (40, detect.table_files)),
    check_auto=detect.check_auto,
    expects=detect.EXPECTS,
    add_flags=flags.add_flags,
    flag_options=flags.flag_options,
)

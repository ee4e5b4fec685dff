"""Sources: what a scanned input holds, and the inputs of each shard, for any engine.

A `Source` is listed (and for tables, read once to check it) before anything is written. It
then hands out, per shard, a self-contained and picklable description of that shard's inputs
(`ImageInputs`, `TableRows`), which turns into `Piece`s of encoding work that carry their own
shard index and first item. Nothing here imports TensorFlow.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from tfpipe.convert import folders, tableread, tables
from tfpipe.convert.config import ConvertConfig, ShardConfig, check_applies
from tfpipe.convert.encode import ImageItem, ImageTask, Piece, TableTask
from tfpipe.convert.text import open_text
from tfpipe.convert.writer import files_holding
from tfpipe.errors import DestinationError
from tfpipe.manifest import Manifest, SkippedInput, TokenizerInfo
from tfpipe.schema import IMAGE_SCHEMA, Schema

IMAGES_PER_TASK = 16
"""Images per worker task: large enough that IPC is <1% of the encode time of a ~110 KB JPEG,
small enough that a shard's worth of tasks spreads over all workers."""


class ShardInputs(Protocol):
    """The inputs of one shard, and how they split into pieces of encoding work."""

    def pieces(self, shard: int, first: int, count: int) -> Iterator[Piece]:
        """The pieces of shard `shard`, which holds items first..first+count-1, in order."""
        ...


class PlannedShard(Protocol):
    """What a source needs of a planned shard (`plan.ShardTask`): its place and its pieces."""

    index: int
    first: int
    count: int

    def pieces(self) -> Iterator[Piece]: ...


class Source(Protocol):
    """A listed input (an image folder or a table) that convert can plan and execute.

    Attributes:
      layout: "imagenet", "images", "table" or "text".
      unit: what an item is, "images", "rows" or "documents".
      fingerprint: a digest of the listing, so a resumed run knows the inputs are the same.
      inputs, identities: each input (image file or table file) and its `storage.identity`
        (size, modification time, and for tables a content checksum), so a resumed run
        refuses an input that changed, by name.
      skipped: inputs left out while listing or scanning the source.
      dropped_rows: table rows left out before planning (null label, missing_label="drop").
      notes: what the summary says of how the source was read (a column kept as text).
      tokenizer: a text corpus's tokenizer (for the manifest), else None.
      attachments: (name, bytes) of files stored in the dataset before its shards (a text
        corpus's tokenizer).
    """

    layout: str
    schema: Schema
    n_items: int
    estimated_bytes: int
    class_names: tuple[str, ...]
    label_offset: int
    fingerprint: str
    unit: str
    skipped: tuple[SkippedInput, ...]
    dropped_rows: int
    inputs: tuple[str, ...]
    identities: tuple[str, ...]
    notes: tuple[str, ...]
    tokenizer: TokenizerInfo | None
    attachments: tuple[tuple[str, bytes], ...]

    def shard_inputs(self, first: int, end: int) -> ShardInputs:
        """The inputs of the shard holding items first..end-1."""
        ...

    def pieces(self, tasks: Sequence[PlannedShard]) -> Iterator[Piece]:
        """The pieces of all `tasks` (in shard order), reading each input once."""
        ...


@dataclasses.dataclass(frozen=True, slots=True)
class ImageInputs:
    """The images of one shard, and how to encode them."""

    items: tuple[ImageItem, ...]
    resize_shorter: int | None
    quality: int
    check: str

    def pieces(self, shard: int, first: int, count: int) -> Iterator[Piece]:
        for start in range(0, count, IMAGES_PER_TASK):
            chunk = self.items[start : min(count, start + IMAGES_PER_TASK)]
            yield Piece(shard, first + start, ImageTask(chunk, self.resize_shorter, self.quality, self.check))


@dataclasses.dataclass(frozen=True, slots=True)
class ImageSource:
    """Image class folders, or a flat folder with a labels file, listed and shuffled."""

    scan: folders.ImageScan
    resize_shorter: int | None
    quality: int
    check: str
    fingerprint: str
    schema: Schema = IMAGE_SCHEMA
    unit: str = "images"
    dropped_rows: int = 0
    tokenizer = None
    attachments = ()

    layout = property(lambda self: self.scan.layout)
    notes = property(lambda self: self.scan.notes)
    n_items = property(lambda self: len(self.scan.items))
    inputs = property(lambda self: tuple(i.path for i in self.scan.items))
    identities = property(lambda self: self.scan.identities)
    estimated_bytes = property(lambda self: self.scan.estimated_bytes)
    class_names = property(lambda self: self.scan.class_names)
    label_offset = property(lambda self: self.scan.label_offset)
    skipped = property(lambda self: self.scan.skipped)

    def shard_inputs(self, first: int, end: int) -> ImageInputs:
        return ImageInputs(self.scan.items[first:end], self.resize_shorter, self.quality, self.check)

    def pieces(self, tasks: Sequence[PlannedShard]) -> Iterator[Piece]:
        for task in tasks:
            yield from task.pieces()


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

    @classmethod
    def of(
        cls, scan: tables.TableScan, chunk_rows: int, file_rows: Sequence[int], first: int, end: int
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
        reading = tableread.Reading(self.fmt, self.encoding, self.null_values, self.kinds, self.partitions)
        for path, file_first in self.files:
            chunks = tableread.read_chunks((path,), reading, self.chunk_rows, self.drop_label)
            for frame, offset, _ in chunks:
                if file_first + offset >= end:
                    chunks.close()
                    return
                piece = _rows_piece(shard, first, end, frame, file_first + offset, path, self.schema)
                if piece is not None:
                    yield piece


def _rows_piece(
    shard: int, first: int, end: int, frame: Any, start: int, path: str, schema: Schema
) -> Piece | None:
    """The part of a chunk (rows start.. of the table) that falls into rows first..end-1."""
    lo, hi = max(first, start), min(end, start + len(frame))
    if lo >= hi:
        return None
    return Piece(shard, lo, TableTask(frame.iloc[lo - start : hi - start], lo, schema, path))


@dataclasses.dataclass(frozen=True, slots=True)
class TableSource:
    """CSV or Parquet files, scanned once for their shape, schema and row count."""

    scan: tables.TableScan
    chunk_rows: int
    fingerprint: str
    layout: str = "table"
    unit: str = "rows"
    label_offset: int = 0
    tokenizer = None
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


def open_source(
    src: str,
    fmt: str,
    cfg: ConvertConfig,
    joins: Manifest | None,
    scan_table: Callable[..., tables.TableScan] = tables.scan,
    dest: str = "",
) -> Source:
    """Lists (and for tables and text, scans) the source.

    Args:
      joins: the dataset the new split joins, whose classes it keeps; None if none.
      scan_table: the table's first pass, `tables.scan(src, fmt, TableOptions)` (the Beam
        engine runs it on its workers).
      dest: the dataset directory (a text corpus's tokenizer is stored there).

    Raises:
      DataError: the source does not fit the rules, naming the file, column and row.
      ConfigError: an option of another kind of source.
    """
    check_applies(cfg, fmt)
    if fmt == "text":
        return open_text(src, cfg, joins, dest)
    if fmt in ("imagenet", "images"):
        return _open_images(src, fmt, cfg, joins)
    scan = scan_table(src, fmt, tables.TableOptions.of(cfg))
    files = [_relative(f, src) for f in scan.files]
    digest = hashlib.sha256(json.dumps([files, scan.rows, scan.kinds]).encode()).hexdigest()
    return TableSource(scan, cfg.chunk_rows, digest)


def _open_images(src: str, fmt: str, cfg: ConvertConfig, joins: Manifest | None) -> ImageSource:
    offset = cfg.label_offset if cfg.label_offset is not None else (1 if fmt == "imagenet" else 0)
    known = joins.class_names if joins else ()
    if cfg.labels_file:
        scan = folders.scan_validation(src, cfg.labels_file, offset, known)
    else:
        scan = folders.scan_class_folders(src, fmt, offset, cfg.seed, known)
    listing = "\n".join(f"{_relative(i.path, src)}\t{i.label}" for i in scan.items)
    digest = hashlib.sha256(listing.encode()).hexdigest()
    return ImageSource(scan, cfg.resize_shorter, cfg.quality, cfg.check, digest)


def _relative(path: str, src: str) -> str:
    """`path` (listed under `src`) relative to `src`: a listing's digest does not depend on how
    the source was spelled (`data/` or `/home/u/data/`)."""
    return path[len(src) :] if path.startswith(src) else path


def joining(existing: Manifest | None, source: Source, shard_cfg: ShardConfig, dest: str) -> Source:
    """The source of a new split, written with the schema of the dataset it joins (`existing`:
    None when it joins none).

    Raises:
      DestinationError: the split does not fit the dataset, naming what differs.
    """
    if existing is None:
        return source
    for what, have, new in (
        ("layout", existing.layout, source.layout),
        ("compression", existing.compression, shard_cfg.compression),
        ("label_offset", existing.label_offset, source.label_offset),
        ("class_names", existing.class_names, source.class_names),
    ):
        if have != new:
            raise DestinationError(
                f"{dest} holds splits {sorted(existing.splits)} with {what} {have!r}; the new split "
                f"{shard_cfg.split!r} would have {what} {new!r}. Write it to another destination."
            )
    schema, differences = existing.schema.joined_by(source.schema)
    if schema is None:
        raise DestinationError(_schema_differs(existing, shard_cfg.split, differences, dest))
    if isinstance(source, TableSource) and schema != source.schema:
        return dataclasses.replace(source, scan=dataclasses.replace(source.scan, schema=schema))
    return source


_DIFFERENCES_NAMED = 3


def _schema_differs(existing: Manifest, split: str, differences: list[str], dest: str) -> str:
    named = "; ".join(differences[:_DIFFERENCES_NAMED])
    more = (
        f"; and {len(differences) - _DIFFERENCES_NAMED} more" if len(differences) > _DIFFERENCES_NAMED else ""
    )
    masks = any("has nulls in this split" in d for d in differences)
    way = (
        " A split with nulls beside splits without them: convert the split with nulls first, with "
        "--missing fill, into a new destination, then the others beside it (a split without "
        "nulls in a column writes the dataset's null mask as all 0), or convert every split with "
        "nulls filled in the source."
        if masks
        else " Write it to another destination, or make the source's columns match."
    )
    return (
        f"{dest} holds splits {sorted(existing.splits)}, whose records the new split {split!r} "
        f"would not match: {named}{more}.{way}"
    )

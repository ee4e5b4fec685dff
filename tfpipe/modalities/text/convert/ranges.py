"""Where a corpus file's documents are, so that workers read their own.

- The first pass reads a corpus in segments, each in a worker: a byte range of a plain UTF-8
  file of lines (uncompressed, local; JSON Lines, or text read by line) that starts at a line,
  whose number is counted here (`segments`), or a whole file (compressed, UTF-16/32, gs://, a
  text file that is one document, Parquet and Arrow).
- It marks checkpoints as it reads: the document index, byte offset and line of a document,
  every DOCS_PER_TASK documents or TEXT_PER_TASK bytes. A checkpoint is where a piece of the
  second pass starts: its worker seeks there and reads (`reader.read_raw` with a `Span`).
- A file without checkpoints (compressed, UTF-16/32, gs://, Parquet, Arrow) cannot be
  entered in the middle: the converting process reads its documents in order and hands them
  to the workers (`text._Cursor`), as every file was read before. A text file that is one
  document has one checkpoint, at its start: its worker reads it whole.
"""

from __future__ import annotations

import array
import bisect
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

from tfpipe import storage
from tfpipe.convert.formats import textfile
from tfpipe.modalities.text.convert.listing import read_as
from tfpipe.modalities.text.convert.reader import Reading, Span

DOCS_PER_TASK = 256
TEXT_PER_TASK = 1 << 18
"""A worker task holds up to 256 documents or 256 KiB of text, whichever comes first: IPC is
then a small part of the tokenizing, and a shard's worth of tasks spreads over the workers."""
SEGMENT_BYTES = 4 << 20
"""Bytes of a plain file the first pass reads in one task: a 10 GB file is ~2,400 tasks, whose
results (counts and checkpoints) are small."""
WHOLE = -1


class Checkpoint(NamedTuple):
    """A document a worker can start reading at: its index in its file, its byte offset and
    its line (for a text file that is one document: 0, 0, 1, read whole)."""

    doc: int
    offset: int
    line: int


Points = array.array
"""A file's checkpoints packed as int64 triples (doc, offset, line), in document order: 24
bytes each, so a 10 GB corpus's ~400,000 of them take ~10 MB (`packed`, `unpacked`)."""


def packed(points: Iterable[Checkpoint] = ()) -> Points:
    out = array.array("q")
    for point in points:
        out.extend(point)
    return out


def unpacked(points: Points) -> list[Checkpoint]:
    return [Checkpoint(*points[i : i + 3]) for i in range(0, len(points), 3)]


class Segment(NamedTuple):
    """What one first-pass task reads: file `file` of the listing, from byte `offset` (line
    `line`) to byte `end` (WHOLE: all of it). `ranged`: its checkpoints can be read from."""

    path: str
    file: int
    offset: int = 0
    end: int = WHOLE
    line: int = 1
    ranged: bool = False

    @property
    def span(self) -> Span | None:
        """Where its reader starts, when it can start anywhere but the file's start."""
        return Span(self.offset, self.line, self.end) if self.ranged else None


def plain_utf8(path: str) -> bool:
    """Whether a file's bytes are plain UTF-8 text on local disk: not compressed, no UTF-16/32
    byte-order mark or NUL bytes, not another format's magic bytes. Only such a file can be read
    from a byte offset."""
    if storage.is_gcs(path):
        return False
    with storage.open_read(path) as f:
        head = f.read(textfile.HEAD_BYTES)
    if textfile.compression(head) or textfile.sniff(head) is not None:
        return False
    marks = [mark for mark, _, codec in textfile.BOMS if codec != "utf-8-sig"]
    return not any(head.startswith(m) for m in marks) and textfile.nul_byte_order(head) is None


def segments(files: Sequence[str], reading: Reading, size: int | None = None) -> Iterator[Segment]:
    """The first pass's tasks over `files`, in order; a plain file in ranges of `size` bytes
    (default SEGMENT_BYTES)."""
    size = size or SEGMENT_BYTES
    for i, path in enumerate(files):
        kind = read_as(path)
        if kind == "txt" and not reading.lines:
            yield Segment(path, i, ranged=True)  # one document: its worker reads it whole
        elif kind in ("jsonl", "txt") and plain_utf8(path):
            yield from _byte_segments(path, i, size)
        else:
            yield Segment(path, i)


def _byte_segments(path: str, file: int, size: int) -> Iterator[Segment]:
    """Ranges of about `size` bytes of a plain file, each ending after a line's end, with the
    number of the line each starts at (lines end as universal newlines end them)."""
    if storage.size(path) <= size:
        yield Segment(path, file, ranged=True)
        return
    offset, line = 0, 1
    with storage.open_read(path) as f:
        while block := f.read(size):
            if not block.endswith(b"\n"):
                block += f.readline()
            yield Segment(path, file, offset, offset + len(block), line, True)
            line += block.count(b"\n") + block.count(b"\r") - block.count(b"\r\n")
            offset += len(block)


class Marks:
    """Checkpoints as a segment's documents are read: one at the first, then every
    DOCS_PER_TASK documents or TEXT_PER_TASK bytes."""

    def __init__(self, ranged: bool) -> None:
        self.ranged = ranged
        self.points: list[Checkpoint] = []
        self._docs = self._bytes = 0

    def see(self, doc: int, offset: int, line: int, size: int) -> None:
        """Document `doc` (of the segment) at `offset`, line `line`, of `size` bytes."""
        if not self.ranged:
            return
        if not self.points or self._docs >= DOCS_PER_TASK or self._bytes >= TEXT_PER_TASK:
            self.points.append(Checkpoint(doc, offset, line))
            self._docs = self._bytes = 0
        self._docs += 1
        self._bytes += size


class _Docs(Sequence[int]):
    """The document indices of packed checkpoints, for bisect (no copy)."""

    def __init__(self, points: Points) -> None:
        self.points = points

    def __len__(self) -> int:
        return len(self.points) // 3

    def __getitem__(self, k: int) -> int:  # type: ignore[override]
        return self.points[3 * k]


def within(points: Points, first: int, end: int) -> Points:
    """The checkpoints a reader of documents first..end-1 of a file needs: the last at or
    before `first`, and those after it before `end`."""
    if not points:
        return packed()
    docs = _Docs(points)
    lo = max(bisect.bisect_right(docs, first) - 1, 0)
    hi = bisect.bisect_left(docs, end)
    return points[3 * lo : 3 * hi]


def cuts(points: Points, first: int, end: int) -> Iterator[tuple[Checkpoint, int, int]]:
    """(checkpoint, documents to skip after it, documents to read) of each piece of documents
    first..end-1 of a file: from one checkpoint to the next."""
    doc = first
    marks = unpacked(points)
    for k, point in enumerate(marks):
        stop = min(marks[k + 1].doc if k + 1 < len(marks) else end, end)
        if stop <= doc:
            continue
        yield point, doc - point.doc, stop - doc
        doc = stop

"""The documents of one text shard, as pieces of encoding work: plain values, so a Beam worker
gets them as JSON and any engine cuts them alike.

A piece is one file's consecutive documents, up to DOCS_PER_TASK of them or TEXT_PER_TASK bytes.
Where the first pass marked checkpoints (`ranges`), a piece names where its documents are
and its worker reads them; the converting process reads nothing. A file without checkpoints
(compressed, UTF-16/32, gs://, Parquet, Arrow) is read here, in order, and its documents' bytes
go to the workers in the pieces (`_Cursor`). A shard's records do not depend on the pieces.
"""

from __future__ import annotations

import array
import bisect
import dataclasses
from collections.abc import Iterator, Sequence
from typing import ClassVar

from tfpipe.convert.encode import Piece
from tfpipe.errors import DataError
from tfpipe.format.jsonobject import JsonObject
from tfpipe.modalities.text.convert import reader as text_reader
from tfpipe.modalities.text.convert.encode import TextTask
from tfpipe.modalities.text.convert.ranges import (
    DOCS_PER_TASK,
    TEXT_PER_TASK,
    Checkpoint,
    Points,
    cuts,
    within,
)
from tfpipe.modalities.text.convert.reader import Raw, Reading

File = tuple[str, int, Points]
"""A file holding documents of a shard: its path, the index in the plan of its first document,
and the checkpoints the shard's documents need (`ranges.Points`; none: read in order by
`Cursor`)."""


@dataclasses.dataclass(frozen=True, slots=True)
class TextInputs:
    """The documents of one shard and how to encode them; plain values (`to_json`).

    Attributes:
      files: each file holding documents of the shard (`File`), in order.
      class_names: text labels' class indices; empty when labels are numbers (or none).
      tokenizer, fingerprint: the dataset's stored tokenizer file.
      specials: the tokenizer's special ids (`Tokenizer.specials`, roles named at convert
        included), noted where a document spells one.
    """

    files: tuple[File, ...]
    reading: Reading
    class_names: tuple[str, ...]
    tokenizer: str
    fingerprint: str
    specials: tuple[int, ...] = ()
    kind: ClassVar[str] = "text"

    def pieces(self, shard: int, first: int, count: int) -> Iterator[Piece]:
        yield from cut(self, shard, first, count, Cursor(self.files, self.reading))

    def to_json(self) -> JsonObject:
        out = dataclasses.asdict(self)
        out["files"] = [(path, start, list(points)) for path, start, points in self.files]
        return out

    @classmethod
    def from_json(cls, obj: JsonObject) -> TextInputs:
        return cls(
            files=tuple(
                (str(p), int(i), array.array("q", map(int, points))) for p, i, points in obj["files"]
            ),
            reading=Reading(**obj["reading"]),
            class_names=tuple(obj["class_names"]),
            tokenizer=str(obj["tokenizer"]),
            fingerprint=str(obj["fingerprint"]),
            specials=tuple(int(i) for i in obj.get("specials", ())),
        )


class Cursor:
    """Reads documents in plan order from the files without checkpoints (file, index of its
    first document), moving forward only: consecutive shards continue where the last stopped."""

    def __init__(self, files: Sequence[File], reading: Reading) -> None:
        self.files = [(path, start) for path, start, points in files if not points]
        self.reading = reading
        self.starts = [start for _, start in self.files]
        self.at = -1  # index in the plan of the next document `docs` yields
        self.file = -1
        self.docs: Iterator[Raw] = iter(())

    def take(self, first: int, count: int) -> Iterator[Raw]:
        """Documents first..first+count-1 of the plan, all of one file."""
        end = first + count
        while first < end:
            k = bisect.bisect_right(self.starts, first) - 1
            path, start = self.files[k]
            if k != self.file or first < self.at:
                self.file, self.at = k, first
                self.docs = text_reader.read_raw(path, self.reading, first - start)
            doc = next(self.docs, None)
            while doc is not None and self.at < first:  # skip to `first` (a shard after one done)
                self.at += 1
                doc = next(self.docs, None)
            if doc is None:
                raise DataError(
                    f"{path}: expected document {first - start + 1} of the first pass. Received: the "
                    "file ends before it; did the input change during the conversion?"
                )
            self.at, first = self.at + 1, first + 1
            yield doc


def cut(inputs: TextInputs, shard: int, first: int, count: int, cursor: Cursor) -> Iterator[Piece]:
    """The pieces of shard `shard`, which holds documents first..first+count-1 of the plan."""
    end = first + count
    for k, (path, start, points) in enumerate(inputs.files):
        stop = inputs.files[k + 1][1] if k + 1 < len(inputs.files) else end
        lo, hi = max(first, start), min(end, stop)
        if lo >= hi:
            continue
        if points:
            for point, skip, n in cuts(within(points, lo - start, hi - start), lo - start, hi - start):
                task = _task(inputs, path, (), point, skip, n)
                yield Piece(shard, start + point.doc + skip, task)
        else:
            yield from _read_here(inputs, shard, path, lo, hi - lo, cursor)


def _task(
    inputs: TextInputs,
    path: str,
    raws: tuple[Raw, ...],
    point: Checkpoint | None = None,
    skip: int = 0,
    n: int = 0,
) -> TextTask:
    return TextTask(
        raws,
        path,
        inputs.reading,
        inputs.class_names,
        inputs.tokenizer,
        inputs.fingerprint,
        point,
        skip,
        n,
        inputs.specials,
    )


def _read_here(
    inputs: TextInputs, shard: int, path: str, first: int, count: int, cursor: Cursor
) -> Iterator[Piece]:
    """Pieces of one file's documents read here: up to DOCS_PER_TASK or TEXT_PER_TASK bytes."""
    batch: list[Raw] = []
    size, start = 0, first
    for raw in cursor.take(first, count):
        if batch and (len(batch) == DOCS_PER_TASK or size >= TEXT_PER_TASK):
            yield Piece(shard, start, _task(inputs, path, tuple(batch)))
            start += len(batch)
            batch, size = [], 0
        batch.append(raw)
        size += len(raw.data or b"")
    if batch:
        yield Piece(shard, start, _task(inputs, path, tuple(batch)))

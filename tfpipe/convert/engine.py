"""Engines that execute a ConvertPlan's shard tasks.

- `write_shard(task)`: one whole shard in this process, the unit of work of a distributed
  engine (a Beam DoFn calls it in its worker).
- `run_local(source, tasks, workers)`: the local engine. It cuts the shards into pieces,
  encodes them on a process pool in order, and writes each shard in this process.

Both give the same bytes: a shard's pieces, and so its records, do not depend on the engine.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import shutil
from collections.abc import Iterator, Sequence

from tfpipe import storage
from tfpipe.convert.encode import EncodedPiece, ImageTask, Piece, copy_piece, encode_piece
from tfpipe.convert.parallel import ordered_map
from tfpipe.convert.plan import ShardTask
from tfpipe.convert.sources import Source
from tfpipe.convert.writer import ShardDone, ShardWriter
from tfpipe.errors import DataError


@contextlib.contextmanager
def spool_for(dest: str) -> Iterator[str]:
    """Where shards of `dest` are written before their commit, removed afterwards for gs://."""
    spool = storage.local_spool_dir(dest)
    try:
        yield spool
    finally:
        if storage.is_gcs(dest):
            shutil.rmtree(spool, ignore_errors=True)


def write_shard(task: ShardTask, spool_dir: str | None = None) -> ShardDone:
    """Reads, encodes and writes one shard, then commits it under its final name.

    The shard appears whole or not at all, under a does-not-exist precondition: a second
    commit of a shard that is already there changes nothing (see `storage.commit_file`).

    Args:
      task: the shard's task from `ConvertPlan.shards`.
      spool_dir: a local folder for the unfinished file; None picks one (see `spool_for`).

    Raises:
      DataError: an input that cannot be encoded under `strict`, or inputs that changed since
        the plan (a table with fewer rows).
      StorageError: reading or writing failed after retries.
    """
    with contextlib.ExitStack() as stack:
        spool = spool_dir or stack.enter_context(spool_for(task.dest))
        writer = ShardWriter(task.dest, task.name, task.compression, spool_dir=spool, strict=task.strict)
        try:
            for piece in readahead(task.pieces()):
                for item in (copy_piece(piece) or encode_piece(piece)).encoded:
                    writer.add(item)
            if writer.items != task.count:
                raise DataError(
                    f"{task.name}: expected the {task.count} inputs the plan gives this shard. "
                    f"Received: {writer.items}; did the input change during the conversion?"
                )
            return writer.commit()
        except BaseException:
            writer.abort()
            raise


@dataclasses.dataclass(frozen=True, slots=True)
class Step:
    """The local engine's report of one encoded piece, and of the shard it completed, if any."""

    piece: EncodedPiece
    done: ShardDone | None


def run_local(source: Source, tasks: Sequence[ShardTask], workers: int) -> Iterator[Step]:
    """Executes `tasks` (in shard order) on `workers` processes; yields one Step per piece.

    The caller records each ShardDone before asking for the next step, so a shard is
    committed, then recorded, then the next one is written.
    """
    if not tasks:
        return
    with spool_for(tasks[0].dest) as spool:
        encoded = ordered_map(encode_piece, readahead(source.pieces(tasks)), workers, local=copy_piece)
        with contextlib.closing(encoded):
            for task in tasks:
                yield from _write_local(task, encoded, spool)


def _write_local(task: ShardTask, encoded: Iterator[EncodedPiece], spool: str) -> Iterator[Step]:
    writer = ShardWriter(task.dest, task.name, task.compression, spool_dir=spool, strict=task.strict)
    try:
        while writer.items < task.count:
            piece = next(encoded)
            for item in piece.encoded:
                writer.add(item)
            if writer.items < task.count:
                yield Step(piece, None)
        done = writer.commit()
    except BaseException:
        writer.abort()
        raise
    yield Step(piece, done)


READAHEAD_FILES = 64
"""Image files the kernel is asked to start reading before the encoder gets to them. Measured
on 1,600 ImageNet-like JPEGs read cold in their shuffled plan order on a virtual disk: 0.60 s
one after another, 0.39 s with 64 files asked for ahead (posix_fadvise WILLNEED)."""


def readahead(pieces: Iterator[Piece], files: int = READAHEAD_FILES) -> Iterator[Piece]:
    """Yields `pieces` in order, asking the kernel to start reading the local image files of
    the next ones, about `files` files ahead. Pieces without local files (table rows, gs://
    images, or no posix_fadvise on this system) pass straight on."""
    window: collections.deque[tuple[Piece, int]] = collections.deque()
    ahead = 0
    for piece in pieces:
        paths = _local_files(piece)
        _advise_will_read(paths)
        window.append((piece, len(paths)))
        ahead += len(paths)
        while window and (ahead > files or window[0][1] == 0):
            first, n = window.popleft()
            ahead -= n
            yield first
    for piece, _ in window:
        yield piece


def _local_files(piece: Piece) -> list[str]:
    if not isinstance(piece.work, ImageTask) or not hasattr(os, "posix_fadvise"):
        return []
    return [item.path for item in piece.work.items if not storage.is_gcs(item.path)]


def _advise_will_read(paths: list[str]) -> None:
    """Asks the kernel to read files into the page cache, without waiting for the data."""
    for path in paths:
        with contextlib.suppress(OSError):  # a file that cannot be opened fails its read later
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
            finally:
                os.close(fd)

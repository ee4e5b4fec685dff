"""Engines that execute a ConvertPlan's shard tasks.

- `write_shard(task)`: one whole shard in this process, the unit of work of a distributed
  engine (a Beam DoFn calls it in its worker).
- `run_local(source, tasks, workers)`: the local engine. It cuts the shards into pieces,
  encodes them on a process pool in order, and writes each shard in this process; uploads of
  finished shards to gs:// overlap with each other and with the next shard's writing.

Both give the same bytes: a shard's pieces, and so its records, do not depend on the engine.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import dataclasses
import os
import shutil
from collections.abc import Generator, Iterator, Sequence

from tfpipe import storage
from tfpipe.convert.encode import EncodedPiece, Piece, copy_piece, encode_piece
from tfpipe.convert.parallel import ordered_map
from tfpipe.convert.plan import ShardTask
from tfpipe.convert.sources import Source
from tfpipe.convert.spool import local_spool_dir
from tfpipe.convert.writer import FinishedShard, ShardDone, ShardWriter
from tfpipe.errors import DataError


@contextlib.contextmanager
def spool_for(dest: str) -> Iterator[str]:
    """Where shards of `dest` are written before their commit, removed afterwards for gs://."""
    spool = local_spool_dir(dest)
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
                writer.add_piece(copy_piece(piece) or encode_piece(piece))
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
    """The local engine's report: a piece encoded and written, or a shard committed.

    Attributes:
      shard: the shard's index in the plan.
      piece: the piece written into it, or None for a commit.
      done: the shard's done-record once it is committed, else None.
    """

    shard: int
    piece: EncodedPiece | None
    done: ShardDone | None = None


# Uploads of finished shards to gs:// in flight at once while the next shards are written. One
# upload is one stream, and one stream's bandwidth is limited (Google's gcsfuse benchmark: one
# thread writes 53-67 MB/s, a figure tfpipe.testing.LocalGCS.like_gcs() cites), so shards
# uploaded one after another would bound a conversion at that. Each holds a finished shard's
# local file (the default shard size is 128 MiB) until it is uploaded.
GCS_UPLOADS_IN_FLIGHT = 4


def run_local(source: Source, tasks: Sequence[ShardTask], workers: int) -> Iterator[Step]:
    """Executes `tasks` (in shard order) on `workers` processes; yields a Step per piece written
    and one per shard committed.

    The caller records each ShardDone as its Step arrives. Locally a shard is committed (a
    hard link) before the next one is written; on gs:// up to GCS_UPLOADS_IN_FLIGHT finished
    shards upload while the next ones are written, and their Steps come as they finish, in
    shard order. A failed upload fails the run once the uploads started before it have ended.
    """
    if not tasks:
        return
    in_flight = GCS_UPLOADS_IN_FLIGHT if storage.is_gcs(tasks[0].dest) else 0
    with spool_for(tasks[0].dest) as spool, _Commits(in_flight) as commits:
        encoded = ordered_map(encode_piece, readahead(source.pieces(tasks)), workers, local=copy_piece)
        with contextlib.closing(encoded):
            for task in tasks:
                finished = yield from _write_local(task, encoded, spool)
                yield from commits.submit(task.index, finished)
        yield from commits.drain()


def _write_local(
    task: ShardTask, encoded: Iterator[EncodedPiece], spool: str
) -> Generator[Step, None, FinishedShard]:
    """Writes one shard's pieces to its local file, a Step each; returns the finished shard."""
    writer = ShardWriter(task.dest, task.name, task.compression, spool_dir=spool, strict=task.strict)
    try:
        while writer.items < task.count:
            piece = next(encoded)
            writer.add_piece(piece)
            yield Step(task.index, piece)
        return writer.finish()
    except BaseException:
        writer.abort()
        raise


class _Commits:
    """Commits finished shards: each at once when `in_flight` is 0, else on up to `in_flight`
    threads, their Steps handed back in shard order as they complete."""

    def __init__(self, in_flight: int) -> None:
        self._in_flight = in_flight
        self._pool = (
            concurrent.futures.ThreadPoolExecutor(in_flight, thread_name_prefix="tfpipe-upload")
            if in_flight
            else None
        )
        self._pending: collections.deque[tuple[int, FinishedShard, concurrent.futures.Future[ShardDone]]] = (
            collections.deque()
        )

    def __enter__(self) -> _Commits:
        return self

    def __exit__(self, *exc: object) -> None:
        # On the way out after an error: uploads under way end first (their files are read until
        # then); a shard committed but not handed back is recommitted by --resume, which finds
        # the same bytes there and counts that as done.
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        for _, finished, _ in self._pending:
            finished.abort()

    def submit(self, shard: int, finished: FinishedShard) -> Iterator[Step]:
        """Starts committing `finished`; yields the Steps of the commits that have completed,
        waiting for the oldest while more than `in_flight` are under way."""
        if self._pool is None:
            yield Step(shard, None, self._commit(finished))
            return
        self._pending.append((shard, finished, self._pool.submit(finished.commit)))
        while self._pending and (len(self._pending) > self._in_flight or self._pending[0][2].done()):
            yield self._collect()

    def drain(self) -> Iterator[Step]:
        """The Steps of every commit still under way, as each completes."""
        while self._pending:
            yield self._collect()

    def _collect(self) -> Step:
        shard, finished, future = self._pending.popleft()
        try:
            return Step(shard, None, future.result())
        except BaseException:
            finished.abort()
            raise

    @staticmethod
    def _commit(finished: FinishedShard) -> ShardDone:
        try:
            return finished.commit()
        except BaseException:
            finished.abort()
            raise


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
    return piece.work.local_files() if hasattr(os, "posix_fadvise") else []


def _advise_will_read(paths: list[str]) -> None:
    """Asks the kernel to read files into the page cache, without waiting for the data."""
    for path in paths:
        with contextlib.suppress(OSError):  # a file that cannot be opened fails its read later
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
            finally:
                os.close(fd)

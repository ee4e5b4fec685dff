"""Engines that execute a ConvertPlan's shard tasks.

- `write_shard(task)`: one whole shard in this process, the unit of work of a distributed
  engine (a Beam DoFn calls it in its worker).
- `run_local(source, tasks, workers)`: the local engine. It cuts the shards into pieces,
  encodes them on a process pool in order, and writes each shard in this process.

Both give the same bytes: a shard's pieces, and so its records, do not depend on the engine.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
from collections.abc import Iterator, Sequence

from tfpipe import storage
from tfpipe.convert.encode import EncodedPiece, encode_piece
from tfpipe.convert.parallel import ordered_map
from tfpipe.convert.plan import ShardTask
from tfpipe.convert.sources import Source
from tfpipe.convert.writer import ShardDone, ShardWriter


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

    The shard appears whole or not at all, so a retried or duplicated call is harmless: a
    second commit of the same shard finds it there and leaves it.

    Args:
      task: the shard's task from `ConvertPlan.shards`.
      spool_dir: a local folder for the unfinished file; None picks one (see `spool_for`).

    Raises:
      DataError: an input that cannot be encoded under `strict`, or a table that changed.
      StorageError: reading or writing failed after retries.
    """
    with contextlib.ExitStack() as stack:
        spool = spool_dir or stack.enter_context(spool_for(task.dest))
        writer = ShardWriter(task.dest, task.name, task.compression, spool_dir=spool, strict=task.strict)
        try:
            for piece in task.pieces():
                for item in encode_piece(piece).encoded:
                    writer.add(item)
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
        encoded = ordered_map(encode_piece, source.pieces(tasks), workers)
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

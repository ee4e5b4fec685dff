"""One shard as one self-contained unit of work, for workers that share nothing with the driver.

A `ShardJob` names everything its shard needs: the destination, the shard's name, and which
inputs go into it in which order (images by path; table rows by file and row range). The
driver writes each job as a small hidden JSON file in the destination and the pipeline carries
only their paths, so a plan of millions of images never travels inside the job graph.

`write_shard` is pure in what it writes: the same job gives the same bytes, so a retried or
duplicated attempt commits the same shard (`commit_once`) and rewrites the same done-record.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Iterator
from typing import Any

from tfpipe import storage
from tfpipe.beam.commit import commit_shard
from tfpipe.convert.encode import Encoded, ImageItem, ImageTask, TableTask, encode_images, encode_table
from tfpipe.convert.tables import file_chunks
from tfpipe.convert.writer import Progress, ShardDone, ShardWriter, pause_point
from tfpipe.errors import DataError
from tfpipe.manifest import Skipped
from tfpipe.schema import Schema

IMAGES_PER_TASK = 16  # images encoded at once: the same chunking as the local engine


@dataclasses.dataclass(frozen=True, slots=True)
class ImageShard:
    """The images of one shard, in plan order, and how to encode them."""

    items: tuple[ImageItem, ...]
    resize_shorter: int | None
    quality: int
    check: str

    def encoded(self) -> Iterator[tuple[str, Encoded]]:
        for start in range(0, len(self.items), IMAGES_PER_TASK):
            chunk = self.items[start : start + IMAGES_PER_TASK]
            task = ImageTask(chunk, self.resize_shorter, self.quality, self.check)
            yield from zip((i.path for i in chunk), encode_images(task), strict=True)


@dataclasses.dataclass(frozen=True, slots=True)
class RowRange:
    """Rows `lo`..`hi` of one table file, counted among the rows written (after dropped ones)."""

    path: str
    lo: int
    hi: int
    first: int  # the index of row `lo` among all rows written


@dataclasses.dataclass(frozen=True, slots=True)
class TableShard:
    """The rows of one shard, as ranges of files, and how to read them."""

    ranges: tuple[RowRange, ...]
    fmt: str
    schema: Schema
    kinds: dict[str, str]
    chunk_rows: int
    encoding: str
    drop_label: str | None

    def encoded(self) -> Iterator[tuple[str, Encoded]]:
        for r in self.ranges:
            for frame, first in _rows(r, self):
                yield from ((f"{r.path} row {first + i}", e) for i, e in
                            enumerate(encode_table(TableTask(frame, first, self.schema, r.path))))


def _rows(r: RowRange, shard: TableShard) -> Iterator[tuple[Any, int]]:
    """The frames holding rows r.lo..r.hi of r.path, read chunk by chunk from the file's start.

    Raises:
      DataError: the file holds fewer rows than the scan counted (it changed since).
    """
    kept = 0
    for frame in file_chunks(r.path, shard.fmt, shard.chunk_rows, shard.kinds, shard.encoding):
        if shard.drop_label is not None:
            frame = frame[frame[shard.drop_label].notna().to_numpy()]
        lo, hi = max(r.lo - kept, 0), min(r.hi - kept, len(frame))
        if lo < hi:
            yield frame.iloc[lo:hi], r.first + kept + lo - r.lo
        kept += len(frame)
        if kept >= r.hi:
            return
    raise DataError(f"{r.path}: expected at least {r.hi} rows, as the scan counted. Received: {kept}; "
                    "did the input change during the conversion?")


@dataclasses.dataclass(frozen=True, slots=True)
class ShardJob:
    """Everything one worker needs to write, commit and record shard `name` of split `split`."""

    dest: str
    split: str
    name: str
    compression: str
    strict: bool
    work: ImageShard | TableShard

    def to_json(self) -> dict[str, Any]:
        work = dataclasses.asdict(self.work) | {"kind": type(self.work).__name__}
        if isinstance(self.work, TableShard):
            work["schema"] = self.work.schema.to_json()
        return {"dest": self.dest, "split": self.split, "name": self.name, "compression": self.compression,
                "strict": self.strict, "work": work}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ShardJob:
        work = dict(obj["work"])
        kind = work.pop("kind")
        if kind == "ImageShard":
            items = tuple(ImageItem(**i) for i in work.pop("items"))
            shard: ImageShard | TableShard = ImageShard(items, **work)
        else:
            ranges = tuple(RowRange(**r) for r in work.pop("ranges"))
            shard = TableShard(ranges, schema=Schema.from_json(work.pop("schema")), **work)
        return cls(obj["dest"], obj["split"], obj["name"], obj["compression"], obj["strict"], shard)


def write_shard(job: ShardJob) -> ShardDone:
    """Encodes, writes and commits one shard, then its done-record. Safe to run twice.

    Raises:
      DataError: an undecodable image under `strict`, or a table that changed since its scan.
      storage.AlreadyExists: the shard exists with other bytes (another run writes `dest`).
    """
    spool = storage.local_spool_dir(job.dest)
    writer = ShardWriter(job.dest, job.name, job.compression, spool_dir=spool)
    skipped: list[Skipped] = []
    try:
        for where, item in job.work.encoded():
            if item.record is not None:
                writer.write(item.record)
            elif job.strict:
                raise DataError(f"{where}: {item.skip_reason} (--strict: undecodable inputs fail the run)")
            else:
                skipped.append(Skipped(where, item.skip_reason or "unknown"))
        fault_point("written", job.name)
        info = commit_shard(writer)
    except BaseException:
        writer.abort()
        raise
    finally:
        if storage.is_gcs(job.dest):
            shutil.rmtree(spool, ignore_errors=True)
    fault_point("committed", job.name)
    done = ShardDone(info, tuple(skipped))
    Progress(job.dest, job.split, job.compression).mark_done(done)
    pause_point("shard-committed")
    return done


FAULT_ENV = "TFPIPE_TEST_FAIL_ONCE"


def fault_point(point: str, shard: str) -> None:
    """A test hook: fails the first attempt at `point` of the shards the test chose.

    TFPIPE_TEST_FAIL_ONCE="DIR;written:train-00001-of-00004,committed:train-00002-of-00004"
    makes the first attempt that reaches a listed point raise; a marker file in DIR (shared by
    every worker process) records the attempt, so the runner's retry passes. Without the
    variable it does nothing.
    """
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    folder, _, points = spec.partition(";")
    if f"{point}:{shard}" not in points.split(","):
        return
    try:
        os.close(os.open(os.path.join(folder, f"{point}-{shard}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    raise RuntimeError(f"injected fault at {point} of {shard} (TFPIPE_TEST_FAIL_ONCE)")


def save_job(job: ShardJob) -> str:
    """Writes the job as a hidden temporary of its split; returns its path."""
    path = storage.join(job.dest, storage.temp_name(job.name) + ".job.json")
    storage.write_atomic(path, json.dumps(job.to_json()).encode(), overwrite=True)
    return path


def run_job(path: str) -> ShardDone:
    """The worker's entry: loads a job file and writes its shard."""
    return write_shard(ShardJob.from_json(json.loads(storage.read_bytes(path))))

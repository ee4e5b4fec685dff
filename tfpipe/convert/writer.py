"""Shards: the pure arithmetic that plans them, the writer that commits each one atomically,
and the hidden progress records that make `--resume` exact.

A shard is written to a hidden temporary file (`.train-00003-of-00008.tmp-...`), then renamed
(or uploaded whole to GCS) under its final name. Only then is its done-record
(`.train-00003-of-00008.done`) written. A shard without a done-record is redone on resume; the
manifest, written last, is the commit point of the whole conversion.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import tempfile
from typing import Any

from tfpipe import storage
from tfpipe.codec import frame_parts
from tfpipe.errors import DestinationError
from tfpipe.manifest import Checksum, ShardInfo, Skipped, shard_name


def shard_bounds(n_items: int, n_shards: int) -> list[tuple[int, int]]:
    """Splits items 0..n_items into n_shards contiguous ranges whose sizes differ by at most one.

    >>> shard_bounds(37, 4)
    [(0, 10), (10, 19), (19, 28), (28, 37)]
    """
    if n_shards < 1 or n_items < 0:
        raise ValueError(f"Expected n_items >= 0 and n_shards >= 1. Received: {n_items}, {n_shards}")
    base, extra = divmod(n_items, n_shards)
    bounds, start = [], 0
    for i in range(n_shards):
        end = start + base + (1 if i < extra else 0)
        bounds.append((start, end))
        start = end
    return bounds


class _HashingFile:
    """A write-only file wrapper that checksums and counts what goes to disk."""

    def __init__(self, f: Any) -> None:
        self._f = f
        self.checksum = Checksum()
        self.bytes = 0

    def write(self, data: bytes) -> int:
        self._f.write(data)
        self.checksum.update(data)
        self.bytes += len(data)
        return len(data)

    def flush(self) -> None:
        self._f.flush()


class ShardWriter:
    """Writes the records of one shard to a hidden local file, then commits it atomically.

    Example:
      >>> w = ShardWriter("/data/out", "train-00000-of-00001")
      >>> w.write(record_bytes)
      >>> info = w.commit()   # the shard now exists under its final name
    """

    def __init__(self, dest_dir: str, name: str, compression: str = "none", spool_dir: str | None = None):
        self.dest = storage.join(dest_dir, name)
        self.name = name
        spool = spool_dir or storage.local_spool_dir(dest_dir)
        fd, self._tmp = tempfile.mkstemp(prefix=storage.temp_name(name), dir=spool)
        self._raw = os.fdopen(fd, "wb", buffering=1 << 20)
        self._hashing = _HashingFile(self._raw)
        self._out: Any = (
            gzip.GzipFile(filename="", fileobj=self._hashing, mode="wb", mtime=0)  # type: ignore[arg-type]
            if compression == "gzip"
            else self._hashing
        )
        self.examples = 0

    def write(self, record: bytes) -> None:
        header, footer = frame_parts(record)
        self._out.write(header)
        self._out.write(record)  # three writes instead of one concatenated copy of the payload
        self._out.write(footer)
        self.examples += 1

    def commit(self) -> ShardInfo:
        """Closes the file and moves it under its final name. Returns its manifest entry."""
        if self._out is not self._hashing:
            self._out.close()
        self._raw.close()
        info = ShardInfo(self.name, self.examples, self._hashing.bytes, str(self._hashing.checksum))
        storage.commit_file(self._tmp, self.dest, overwrite=False)
        return info

    def abort(self) -> None:
        try:
            self._raw.close()
        finally:
            if os.path.exists(self._tmp):
                os.remove(self._tmp)


# ---- resume state ----


@dataclasses.dataclass(frozen=True, slots=True)
class ShardDone:
    """The done-record of one committed shard."""

    info: ShardInfo
    skipped: tuple[Skipped, ...]

    def to_json(self) -> dict[str, Any]:
        return {"shard": self.info.to_json(), "skipped": [dataclasses.asdict(s) for s in self.skipped]}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ShardDone:
        return cls(ShardInfo.from_json(obj["shard"]), tuple(Skipped(**s) for s in obj["skipped"]))


class Progress:
    """The hidden files of an unfinished conversion of one split in `dest`.

    `.tfpipe-<split>.plan.json` holds the plan's fingerprint; `.<shard>.done` marks a shard
    committed. Both are hidden, so no shard glob matches them, and both are removed once the
    manifest is committed.
    """

    def __init__(self, dest: str, split: str, compression: str):
        self.dest, self.split, self.compression = dest, split, compression
        self.plan_path = storage.join(dest, f".tfpipe-{split}.plan.json")

    def _done_path(self, name: str) -> str:
        return storage.join(self.dest, f".{name}.done")

    def names(self, n_shards: int) -> list[str]:
        return [shard_name(self.split, i, n_shards, self.compression) for i in range(n_shards)]

    def exists(self) -> bool:
        return storage.exists(self.plan_path)

    def load_plan(self) -> dict[str, Any] | None:
        try:
            return json.loads(storage.read_bytes(self.plan_path))
        except (FileNotFoundError, ValueError):
            return None

    def start(self, plan: dict[str, Any]) -> None:
        storage.write_atomic(self.plan_path, json.dumps(plan, sort_keys=True).encode(), overwrite=True)

    def mark_done(self, done: ShardDone) -> None:
        storage.write_atomic(self._done_path(done.info.name), json.dumps(done.to_json()).encode(), overwrite=True)

    def completed(self, n_shards: int) -> dict[int, ShardDone]:
        """Shards whose done-record and file agree; everything else of this split is removed."""
        listing = set(storage.listdir(self.dest))
        done: dict[int, ShardDone] = {}
        for i, name in enumerate(self.names(n_shards)):
            record_name = f".{name}.done"
            if record_name in listing and name in listing:
                record = ShardDone.from_json(json.loads(storage.read_bytes(self._done_path(name))))
                if record.info.name == name and storage.size(storage.join(self.dest, name)) == record.info.bytes:
                    done[i] = record
                    continue
            # A shard renamed into place before its done-record was written, or a stale one:
            # deterministic encoding rewrites it byte for byte.
            storage.remove(storage.join(self.dest, name))
            storage.remove(self._done_path(name))
        self.remove_temporaries()
        return done

    def remove_temporaries(self) -> None:
        for name in storage.listdir(self.dest):
            if name.startswith(f".{self.split}-") and ".tmp-" in name:
                storage.remove(storage.join(self.dest, name))

    def clear(self) -> None:
        """Removes every progress file (after the manifest commit, or before a fresh start)."""
        prefix = f".{self.split}-"
        for name in storage.listdir(self.dest):
            if name.startswith(prefix) and (name.endswith(".done") or ".tmp-" in name):
                storage.remove(storage.join(self.dest, name))
        storage.remove(self.plan_path)

    def stray_shards(self) -> list[str]:
        """Visible shard files of this split (from an interrupted or overwritten run)."""
        return [n for n in storage.listdir(self.dest) if n.startswith(f"{self.split}-")]

    def summary(self, n_shards: int) -> str:
        listing = set(storage.listdir(self.dest))
        n_done = sum(1 for n in self.names(n_shards) if f".{n}.done" in listing)
        return f"{n_done} of {n_shards} shards done"


def refuse_interrupted(dest: str, split: str, detail: str) -> DestinationError:
    return DestinationError(
        f"{dest} holds an interrupted conversion of split {split!r} ({detail}). "
        "Pass --resume (resume=True) to finish it, or --overwrite (overwrite=True) to start over."
    )

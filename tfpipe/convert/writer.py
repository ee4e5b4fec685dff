"""Shards: the pure arithmetic that plans them, the writer that commits each one atomically,
and the resume journal (hidden records) that makes `--resume` exact.

A shard is written to a hidden temporary file (`.train-00003-of-00008.tmp-...`), then renamed
(or uploaded whole to GCS) under its final name. Only then is its done-record
(`.train-00003-of-00008.done`) written. A shard without a done-record is redone on resume; the
manifest, written last, is the commit point of the whole conversion.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import json
import os
import re
import signal
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

from tfpipe import storage
from tfpipe.convert.encode import Encoded, EncodedPiece
from tfpipe.convert.kind import Tally
from tfpipe.convert.spool import local_spool_dir, remove_dead_spools
from tfpipe.errors import DataError, DestinationError, ManifestError
from tfpipe.format.jsonobject import JsonObject
from tfpipe.format.manifest import Checksum, Manifest, ShardInfo, SkippedInput
from tfpipe.format.shardnames import ShardName, shard_name
from tfpipe.format.tfrecord import frame_parts

TallyReader = Callable[[JsonObject], Tally]
"""A kind's tally back from its JSON (`kind.Kind.tally_from_json`)."""

PAUSE_ENV = "TFPIPE_TEST_PAUSE_AT"
_paused: set[str] = set()


def pause_point(name: str) -> None:
    """A test hook: with TFPIPE_TEST_PAUSE_AT=name the process stops itself (SIGSTOP) here,
    the first time it gets here.

    Tests use it to SIGKILL a real run at an exact step, such as between un-committing an old
    split and deleting its shards. Without the variable it does nothing.
    """
    if os.environ.get(PAUSE_ENV) == name and name not in _paused and hasattr(signal, "SIGSTOP"):
        _paused.add(name)
        os.kill(os.getpid(), signal.SIGSTOP)


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


def files_holding(
    files: Sequence[str], rows: Sequence[int], first: int, end: int
) -> tuple[tuple[str, int], ...]:
    """(file, index of its first written row) of the files holding rows first..end-1, where
    file i adds rows[i] rows."""
    out, start = [], 0
    for path, n in zip(files, rows, strict=True):
        if n and start < end and first < start + n:
            out.append((path, start))
        start += n
    return tuple(out)


_JOINED = 1 << 16
"""Records below this size are framed in one write: for a text document or a table row, three
writes (each checksummed) cost more than copying the record once; an image is not copied."""


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

    It collects the inputs it was given but could not write (`add`), so its ShardDone says
    what the shard left out.

    Example:
      >>> w = ShardWriter("/data/out", "train-00000-of-00001")
      >>> w.write(record_bytes)
      >>> done = w.commit()   # the shard now exists under its final name
    """

    def __init__(
        self,
        dest_dir: str,
        name: str,
        compression: str = "none",
        spool_dir: str | None = None,
        strict: bool = False,
    ):
        self.dest = storage.join(dest_dir, name)
        self.name = name
        spool = spool_dir or local_spool_dir(dest_dir)
        fd, self._tmp = tempfile.mkstemp(prefix=storage.temp_name(name), dir=spool)
        self._raw = os.fdopen(fd, "wb", buffering=1 << 20)
        self._hashing = _HashingFile(self._raw)
        self._out: Any = (
            gzip.GzipFile(filename="", fileobj=self._hashing, mode="wb", mtime=0)  # type: ignore[arg-type]
            if compression == "gzip"
            else self._hashing
        )
        self.examples = 0
        self.items = 0  # inputs taken by `add`: written or skipped
        self.strict = strict
        self.skipped: list[SkippedInput] = []
        self.tally: Tally | None = None  # what the shard's pieces tallied (`kind.Tally`)

    def add_piece(self, piece: EncodedPiece) -> None:
        """Writes every input of an encoded piece (see `add`), and adds up its tally. A piece of
        framed records (`EncodedPiece.framed`, e.g. text documents) is written in one write."""
        if piece.framed:
            framed = [item.record for item in piece.encoded if item.record is not None]
            self._out.write(b"".join(framed))
            self.examples += len(framed)
            self.items += len(piece.encoded)
        else:
            for item in piece.encoded:
                self.add(item)
        if piece.tally is not None:
            self.tally = self.tally or type(piece.tally)()  # the pieces' own tallies stay as they are
            self.tally.merge(piece.tally)

    def add(self, item: Encoded) -> None:
        """Writes one encoded input, or notes it as skipped with its reason.

        Raises:
          DataError: the input was not encoded and `strict` is set.
        """
        self.items += 1
        if item.record is not None:
            self.write(item.record)
            return
        if item.skip_reason is None:
            return  # left out and counted by its piece's tally (an empty text document)
        if self.strict:
            raise DataError(f"{item.input}: {item.skip_reason} (--strict: undecodable inputs fail the run)")
        self.skipped.append(SkippedInput(item.input, item.skip_reason or "unknown"))

    def write(self, record: bytes) -> None:
        header, footer = frame_parts(record)
        if len(record) < _JOINED:
            self._out.write(header + record + footer)
        else:  # three writes instead of one concatenated copy of a big payload
            self._out.write(header)
            self._out.write(record)
            self._out.write(footer)
        self.examples += 1

    def commit(self) -> ShardDone:
        """Closes the file and moves it under its final name. Returns its manifest entry and
        the inputs it left out."""
        return self.finish().commit()

    def finish(self) -> FinishedShard:
        """Closes the file, whole but not yet committed: `commit()` it (another thread may)."""
        if self._out is not self._hashing:
            self._out.close()
        self._raw.close()
        info = ShardInfo(self.name, self.examples, self._hashing.bytes, str(self._hashing.checksum))
        return FinishedShard(self._tmp, self.dest, ShardDone(info, tuple(self.skipped), self.tally))

    def abort(self) -> None:
        """Drops the unfinished shard. Never raises: the error that caused the abort matters."""
        with contextlib.suppress(OSError):
            self._raw.close()  # flushing may fail again (e.g. the disk is still full)
        with contextlib.suppress(OSError):
            os.remove(self._tmp)


@dataclasses.dataclass(frozen=True, slots=True)
class FinishedShard:
    """A shard written whole to its local file, to be committed under its final name.

    Attributes:
      tmp: the hidden local file.
      dest: the shard's final path (local or gs://).
      done: its done-record, true once `commit()` returns.
    """

    tmp: str
    dest: str
    done: ShardDone

    def commit(self) -> ShardDone:
        """Moves the file under its final name (see `storage.commit_file`); returns `done`."""
        storage.commit_file(self.tmp, self.dest, overwrite=False)
        return self.done

    def abort(self) -> None:
        """Drops the local file. Never raises."""
        with contextlib.suppress(OSError):
            os.remove(self.tmp)


# ---- resume state ----


@dataclasses.dataclass(frozen=True, slots=True)
class ShardDone:
    """The done-record of one committed shard; `tally`: what its pieces tallied (`kind.Tally`),
    stored under its kind's name."""

    info: ShardInfo
    skipped: tuple[SkippedInput, ...]
    tally: Tally | None = None

    def kept(self) -> ShardDone:
        """The record a conversion keeps in memory once it is in its journal: its tally's `kept()`
        (text: without the documents' lengths, 4 bytes a document; `ResumeJournal.tally`)."""
        return self if self.tally is None else dataclasses.replace(self, tally=self.tally.kept())

    def to_json(self) -> JsonObject:
        out = {"shard": self.info.to_json(), "skipped": [dataclasses.asdict(s) for s in self.skipped]}
        return out | ({} if self.tally is None else {self.tally.kind: self.tally.to_json()})

    @classmethod
    def from_json(cls, obj: JsonObject, kind: str = "", tally: TallyReader | None = None) -> ShardDone:
        """The record back from JSON; its tally, stored under `kind`, read by `tally` (the kind's)."""
        found = obj.get(kind)
        counted = None if found is None or tally is None else tally(found)
        return cls(
            ShardInfo.from_json(obj["shard"]), tuple(SkippedInput(**s) for s in obj["skipped"]), counted
        )


@dataclasses.dataclass(frozen=True, slots=True)
class JournalState:
    """What the resume journal of one split holds, as plain values (the input of `decide`).

    Attributes:
      plan_path: where the plan record lives.
      plan: the interrupted run's plan record; None if there is none, or it is corrupt.
      corrupt: the start of a corrupt plan record's text, else None.
      done: the names of the shards with a done-record.
      stray: visible shard files of the split (of an interrupted or overwritten run).
    """

    plan_path: str
    plan: JsonObject | None = None
    corrupt: str | None = None
    done: frozenset[str] = frozenset()
    stray: tuple[str, ...] = ()


class ResumeJournal:
    """The hidden files of an unfinished conversion of one split in `dest`.

    `.tfpipe-<split>.plan.json` holds the plan's record (`ConvertPlan.record`); `.<shard>.done`
    marks a shard committed. Both are hidden, so no shard glob matches them, and both are
    removed once the manifest is committed. `kind`, `tally`: the name of the split's kind and
    how its done-records' tallies are read back (`kind.Kind.tally_from_json`), if it has any.
    """

    def __init__(
        self, dest: str, split: str, compression: str, kind: str = "", tally: TallyReader | None = None
    ):
        self.dest, self.split, self.compression = dest, split, compression
        self.kind, self._tally = kind, tally
        self.plan_path = storage.join(dest, f".tfpipe-{split}.plan.json")

    def _done_path(self, name: str) -> str:
        return storage.join(self.dest, f".{name}.done")

    def names(self, n_shards: int) -> list[str]:
        return [shard_name(self.split, i, n_shards, self.compression) for i in range(n_shards)]

    def exists(self) -> bool:
        return storage.exists(self.plan_path)

    def _read_plan(self) -> tuple[JsonObject | None, str | None]:
        """(the plan record, None), (None, None) without one, or (None, its text) if corrupt."""
        try:
            plan = json.loads(storage.read_bytes(self.plan_path))
        except FileNotFoundError:
            return None, None
        except ValueError as e:
            plan = f"not JSON ({e})"
        if not (isinstance(plan, dict) and isinstance(plan.get("n_shards"), int) and plan["n_shards"] >= 1):
            return None, str(plan)[:100]
        return plan, None

    def load_plan(self) -> JsonObject | None:
        """The interrupted run's plan record, or None if there is none.

        Raises:
          DestinationError: the plan file is corrupt.
        """
        plan, corrupt = self._read_plan()
        if corrupt is not None:
            raise DestinationError(corrupt_plan_message(self.plan_path, corrupt))
        return plan

    def state(self) -> JournalState:
        """What the journal holds, read once."""
        plan, corrupt = self._read_plan()
        listing = storage.listdir(self.dest)
        done = frozenset(n[1 : -len(".done")] for n in listing if n.startswith(".") and n.endswith(".done"))
        return JournalState(self.plan_path, plan, corrupt, done, tuple(self.stray_shards(listing)))

    def start(self, plan: JsonObject) -> None:
        storage.write_atomic(self.plan_path, json.dumps(plan, sort_keys=True).encode(), overwrite=True)

    def mark_done(self, done: ShardDone) -> None:
        # Not fsynced: the shard it records is, and a done-record lost or emptied by a power
        # loss only makes --resume rewrite that shard (`completed` checks every record).
        storage.write_atomic(
            self._done_path(done.info.name),
            json.dumps(done.to_json()).encode(),
            overwrite=True,
            durable=False,
        )

    def tally(self, done: ShardDone) -> Tally:
        """A committed shard's whole tally, from its done-record (`mark_done`).

        Raises:
          ManifestError: the done-record is gone or unreadable.
        """
        record = self._read_done(done.info.name)
        if record is None or record.tally is None:
            raise ManifestError(
                f"{self._done_path(done.info.name)}: expected the done-record of a committed shard, "
                f"with its {self.kind} tally"
            )
        return record.tally

    def completed(self, n_shards: int) -> dict[int, ShardDone]:
        """Shards whose done-record and file agree; everything else of this split is removed."""
        listing = set(storage.listdir(self.dest))
        done: dict[int, ShardDone] = {}
        for i, name in enumerate(self.names(n_shards)):
            record_name = f".{name}.done"
            if record_name in listing and name in listing:
                record = self._read_done(name)
                size = storage.size(storage.join(self.dest, name))
                if record and record.info.name == name and size == record.info.bytes:
                    done[i] = record
                    continue
            # A shard renamed into place before its done-record was written, a stale one, or a
            # corrupt done-record: deterministic encoding rewrites the shard byte for byte.
            storage.remove(storage.join(self.dest, name))
            storage.remove(self._done_path(name))
        self.remove_temporaries()
        return done

    def _read_done(self, name: str) -> ShardDone | None:
        try:
            return ShardDone.from_json(
                json.loads(storage.read_bytes(self._done_path(name))), self.kind, self._tally
            )
        except (ValueError, KeyError, TypeError, AttributeError, ManifestError):
            return None

    def remove_temporaries(self) -> None:
        for name in storage.listdir(self.dest):
            if name.startswith(f".{self.split}-") and ".tmp-" in name:
                storage.remove(storage.join(self.dest, name))

    def clear(self) -> None:
        """Removes every progress file (after the manifest commit, or before a fresh start).

        The plan goes first: a kill halfway leaves only done-records without a plan, which
        `sweep` removes, never a plan that claims an unfinished run.
        """
        storage.remove(self.plan_path)
        prefix = f".{self.split}-"
        for name in storage.listdir(self.dest):
            if name.startswith(prefix) and (name.endswith(".done") or ".tmp-" in name):
                storage.remove(storage.join(self.dest, name))

    def stray_shards(self, listing: list[str] | None = None) -> list[str]:
        """Visible shard files of this split (from an interrupted or overwritten run), and the
        files a modality commits with its shards, before the manifest (`Kind.split_files`: text's
        lengths file)."""
        from tfpipe.modalities import modalities  # the registry: it loads no modality to import

        names = storage.listdir(self.dest) if listing is None else listing
        attached = {f for m in modalities() for f in m.convert.split_files(self.split)}
        return [n for n in names if n.startswith(f"{self.split}-") or n in attached]


_TEMPORARY_RE = re.compile(r"^\..+\.tmp-\d+-[0-9a-f]{8}")  # storage.temp_name, plus mkstemp's suffix
_PLAN_RE = re.compile(r"^\.tfpipe-([A-Za-z0-9_]+)\.plan\.json$")


def _done_split(name: str) -> str | None:
    """The split of a done-record (`.<shard name>.done`), or None for other names."""
    if not (name.startswith(".") and name.endswith(".done")):
        return None
    shard = ShardName.parse(name[1 : -len(".done")])
    return shard.stem if shard is not None else None


def sweep(dest: str, manifest: Manifest | None) -> list[str]:
    """Removes what killed runs left in `dest`; returns the names removed.

    Call it only while holding the destination's lock: then no live run owns any of these.
    - temporary files (`.<name>.tmp-<pid>-...`): half-written shards, manifests and records;
    - done-records whose split has no plan (a run killed while clearing its progress);
    - the plan and records of a split the manifest already holds, written by the same
      options (a run killed between its commit and clearing its progress);
    - gs:// only: the local spool folders of killed runs on this destination.
    A plan of an unfinished run is kept: `--resume` needs it.
    """
    names = storage.listdir(dest)
    plans = {m.group(1) for n in names if (m := _PLAN_RE.match(n))}
    removed = [n for n in names if _TEMPORARY_RE.match(n)]
    removed += [n for n in names if (split := _done_split(n)) is not None and split not in plans]
    for split in sorted(plans):
        if manifest is not None and split in manifest.splits:
            state = ResumeJournal(dest, split, manifest.compression)
            with contextlib.suppress(DestinationError):
                plan = state.load_plan()
                committed = manifest.splits[split]
                options = {k: v for k, v in committed.options.items() if k != "engine"}  # not in the plan
                if plan and plan.get("options") == options and plan["n_shards"] == len(committed.shards):
                    removed.append(os.path.basename(state.plan_path))
                    removed += [n for n in names if _done_split(n) == split]
    for name in dict.fromkeys(removed):
        storage.remove(storage.join(dest, name))
    remove_dead_spools(dest)
    return list(dict.fromkeys(removed))


def interrupted_message(dest: str, split: str, detail: str) -> str:
    """Why a run refuses a destination that holds an unfinished run of its split."""
    return (
        f"{dest} holds an interrupted conversion of split {split!r} ({detail}). "
        "Pass --resume (resume=True) to finish it, or --overwrite (overwrite=True) to start over."
    )


def corrupt_plan_message(plan_path: str, received: str) -> str:
    """Why a run refuses to resume from a plan record that does not parse."""
    return (
        f"{plan_path}: the plan of the interrupted conversion is corrupt "
        f"(expected a JSON object with n_shards; received {received!r}). It cannot be "
        "resumed: pass --overwrite (overwrite=True) to start over."
    )

"""The verified shard read: one shard's records, read so that a bad shard is named.

TensorFlow's own errors do not name the file: a CRC mismatch reads "corrupted record at 240",
a truncation "truncated record at 684". So each shard is read with `ignore_errors()`
(TFRecordDataset stops at the first bad record), in groups of VERIFY_GROUP records; at the end
of the shard one check compares what was read with the manifest's record count and size (or,
without a manifest, the file size). A read that ends short is judged (see `read_shard`):
corruption raises an error naming the shard, or with `skip_corrupt=True` is counted (read/skips.py);
a shard that reads cleanly but holds other records than listed is an error saying what was
found; a network error is raised, never counted. The generation guard (read/generation.py) runs
inside the same read.

A read never hangs: TensorFlow's `ignore_errors()` retries a file that cannot be opened
forever (a local shard deleted before its turn spun three threads at 100% CPU, deaf to
Ctrl-C). Each local read first probes the shard a bounded number of times and reads it only if
it opens; a missing shard then raises NotFoundError from the judge's probe. (A shard deleted in
the moment between the probe and the read's own open would still spin: a window of
microseconds, which only a bound on every record, +0.5 us each, would close.)
"""

from __future__ import annotations

from typing import Any

from tfpipe._tf import after, plain, tensor_text, tf
from tfpipe.pipeline.read import raw
from tfpipe.pipeline.read.generation import Generation
from tfpipe.pipeline.read.skips import SkipCounter

# Records per verification step, at most. Measured on 4 shards of 50k 40-column rows: one
# step per record read 8.8k rows/s (a function call per record); groups of 128-1024 read
# 77k rows/s, the same as 256 within noise.
VERIFY_GROUP = 256
# Bytes per verification step, at most: a group is held in memory per open file, so large
# records (JPEGs) go in smaller groups (2 MiB / 108 KB = 19 ImageNet records).
VERIFY_GROUP_BYTES = 2 << 20


def verify_group(mean_record_bytes: int | None) -> int:
    """Records per verification step for records of this mean size (None: unknown)."""
    if not mean_record_bytes:
        return 16
    return max(1, min(VERIFY_GROUP, VERIFY_GROUP_BYTES // mean_record_bytes))


def _readable(tf_: Any, path: Any) -> Any:
    """A dataset of one element if the shard's first byte can be read, else of none.

    The probe gets READ_ATTEMPTS tries (each with TensorFlow's own retries), counted by a zip
    with a range, so it ends even where a file cannot be opened at all; a read of no file then
    ends at once, and the judge's probe outside ignore_errors() raises the real error (a
    missing shard's NotFoundError). An empty file has no first byte and reads as empty, too.
    A dataset, not a tensor (a `reduce` of the probe): a reduce op instantiates its function
    and optimises its dataset each time it runs, once per shard read.
    """
    probe = tf_.data.Dataset.zip((tf_.data.Dataset.range(READ_ATTEMPTS), raw.fixed_length(path, 1)))
    return probe.ignore_errors().take(1)


# Reads of one shard before an early end is judged: the first, then re-reads from the start.
# A re-read that stops at the same record, with the bytes there readable in between, is
# corruption; one that gets further was a network error (the records it adds are yielded, each
# once); stops at different places on every read are a network error that never cleared.
READ_ATTEMPTS = 3
# Sources repeated per slice when pairing unverified records with their source.
SOURCE_SLICE = 1024
# What the end of one read of a shard comes to (see `read_shard`).
_GOING, _DONE, _RETRY, _CORRUPT, _MISMATCH, _UNSTABLE = range(6)  # bad verdicts last


def read_shard(
    path: Any,
    size: Any,
    count: Any,
    *,
    compression: str,
    buffer: int,
    verify: bool,
    counter: SkipCounter | None,
    source: Any,
    group: int = VERIFY_GROUP,
    counts_known: bool = True,
    grouped: bool = False,
    generation: Generation | None = None,
    probe_open: bool = True,
) -> Any:
    """The interleave function: one shard's `(record, source)` pairs, checked to the end of the file.

    TFRecordDataset's errors do not name the file, and `ignore_errors()` (the only way to go on
    after one) swallows every error alike: a CRC mismatch, but also a 503 or a deleted file.
    So each read runs under `ignore_errors()`, and where it ends short of the manifest's count
    and size (or, without a manifest, the file's size) the end is judged:
    - a probe outside `ignore_errors()` checks whether the file continues past the stop (for
      gzip, the trailer's length); a network error there is raised as TensorFlow raised it;
    - a file that ends cleanly holds other records than listed: an error saying what was found;
    - otherwise the shard is re-read; stopping at the same record again is corruption (raised
      naming the shard, or counted with `counter`); getting further was a transient error.

    Args:
      path, size, count: the shard, its bytes and records (-1 when unknown).
      verify: check the shard was read to its end; needs a count or an uncompressed size.
        Without it, records are read plainly and every error is raised unnamed.
      counter: count corrupt shards instead of raising (skip_corrupt; needs verify).
      source: the string paired with each record: the path, so later errors can name the
        shard, or "" when nothing later names it.
      group: records per verification step (see `verify_group`).
      counts_known: the counts come from a manifest (wording of the messages).
      grouped: yield groups of up to `group` records (the caller unbatches) instead of records.
      generation: the manifest's checksums, checked once each read has opened the shard
        and, for a gs:// shard read in several requests, at its end (see the module doc);
        None for foreign files.
      probe_open: read a shard only once its first byte could be read (`_readable`). Local
        files need it: ignore_errors() would retry a vanished file's open forever. gs:// does
        not: a vanished object raises NotFoundError, and a one-byte read of an object costs a
        whole 64 MiB block there (TensorFlow's GCS reads), the shard read twice.
    """
    tf_ = tf()
    if not verify:
        if counter is not None:
            raise ValueError("skip_corrupt needs verified reads")  # plan() refuses this first
        return _unverified(tf_, path, compression, buffer, source, group, grouped)
    judge = _Judge(tf_, path, size, count, compression, counter, counts_known)
    checked = _verified_groups(tf_, path, compression, buffer, group, judge, source, generation, probe_open)
    return checked if grouped else raw.unbatch(checked)


def _unverified(
    tf_: Any, path: Any, compression: str, buffer: int, source: Any, group: int, grouped: bool
) -> Any:
    """A shard's records paired with `source`, read plainly (every error raised unnamed)."""
    records = raw.tfrecords(path, compression, buffer)
    if grouped:
        return records.batch(group).map(plain(lambda r: (r, tf_.fill(tf_.shape(r), source))))
    # Paired by a zip with the source repeated in slices: no function call per record (a map
    # here tripled the CPU per row of a plain table read, measured), and the constant's
    # iterator restarts once per slice (once per record, from_tensors(...).repeat() cost +40%).
    sources = tf_.data.Dataset.from_tensor_slices(tf_.fill([SOURCE_SLICE], source)).repeat()
    return tf_.data.Dataset.zip((records, sources))


def _verified_groups(
    tf_: Any,
    path: Any,
    compression: str,
    buffer: int,
    group: int,
    judge: _Judge,
    source: Any,
    generation: Generation | None,
    probe_open: bool,
) -> Any:
    """Up to READ_ATTEMPTS reads of a shard as groups `(records, sources)`, each record once,
    every read's end judged by `judge` (see `read_shard`)."""

    def one_read(_: Any) -> Any:
        if probe_open:  # read only once the probe could read the first byte
            reads = _readable(tf_, path).flat_map(plain(lambda *_: raw.tfrecords(path, compression, buffer)))
        else:
            reads = raw.tfrecords(path, compression, buffer)
        # Each group flagged "not the end" by a zip (no function), then the end of the read.
        groups = tf_.data.Dataset.zip(
            (reads.ignore_errors().batch(group), tf_.data.Dataset.from_tensors(False).repeat())
        )
        return groups.concatenate(tf_.data.Dataset.from_tensors((tf_.zeros([0], tf_.string), True)))

    zero = tf_.constant(0, tf_.int64)
    in_parts = generation.read_in_parts(judge.size) if generation is not None else None

    def step(state: Any, element: Any) -> Any:
        pos_r, pos_b, yielded, last_stop, attempt = state
        records, is_end = element
        n = tf_.size(records, out_type=tf_.int64)
        fresh = records[tf_.clip_by_value(yielded - pos_r, 0, n) :]  # yielded by an earlier read
        opened = tf_.equal(pos_r, 0)  # the first group of this read (or its end, if empty)
        pos_b += tf_.reduce_sum(tf_.cast(tf_.strings.length(records), tf_.int64) + 16)
        pos_r += n
        code = judge.verdict(is_end, pos_r, pos_b, yielded, last_stop, attempt)
        if generation is not None:  # the shard open is the listed one (see the module doc)
            check = tf_.logical_or(opened, tf_.logical_and(is_end, in_parts))
            code = tf_.cond(check, lambda: after([generation.still_listed(path)], code), lambda: code)
            fresh = after([code], fresh)  # nothing of the group leaves before its check
        retry = tf_.equal(code, _RETRY)
        state = (
            tf_.where(retry, zero, pos_r),
            tf_.where(retry, zero, pos_b),
            tf_.maximum(yielded, pos_r),
            tf_.where(retry, pos_r, last_stop),
            attempt + tf_.cast(retry, tf_.int64),
        )
        keep = tf_.logical_or(tf_.logical_not(is_end), retry)
        return state, (fresh, tf_.fill(tf_.shape(fresh), source), keep)

    start = (zero, zero, zero, tf_.constant(-1, tf_.int64), zero)
    checked = (
        tf_.data.Dataset.range(READ_ATTEMPTS)
        .flat_map(plain(one_read))
        .scan(start, plain(step))
        .take_while(plain(lambda *e: e[-1]))
    )
    return checked.map(plain(lambda records, sources, _: (records, sources)))


class _Judge:
    """The end-of-read verdict of `read_shard` and what follows from it (graph code)."""

    def __init__(
        self,
        tf_: Any,
        path: Any,
        size: Any,
        count: Any,
        compression: str,
        counter: SkipCounter | None,
        counts_known: bool,
    ) -> None:
        self.tf, self.path, self.size, self.count = tf_, path, size, count
        self.gzip, self.counter, self.counts_known = compression != "", counter, counts_known

    def verdict(self, is_end: Any, pos_r: Any, pos_b: Any, yielded: Any, last_stop: Any, attempt: Any) -> Any:
        """The step's code. Only a read that ends short takes the branch that probes the file
        and raises or counts, so a good group costs a comparison and one cond."""
        tf_ = self.tf
        complete = tf_.logical_or(self.count < 0, tf_.equal(pos_r, self.count))
        if not self.gzip:  # the file's bytes are the records' bytes plus framing
            complete = tf_.logical_and(complete, tf_.logical_or(self.size < 0, tf_.equal(pos_b, self.size)))

        def judge() -> Any:
            again = tf_.logical_and(attempt > 0, tf_.equal(pos_r, last_stop))
            code = tf_.where(
                self.ends_cleanly(pos_b),
                _MISMATCH,
                tf_.where(again, _CORRUPT, tf_.where(attempt >= READ_ATTEMPTS - 1, _UNSTABLE, _RETRY)),
            )
            with tf_.control_dependencies(self._raise_or_count(code, pos_r, pos_b, yielded, last_stop)):
                return tf_.identity(code)

        short = tf_.logical_and(is_end, tf_.logical_not(complete))
        return tf_.cond(short, judge, lambda: tf_.where(is_end, _DONE, _GOING))

    def ends_cleanly(self, pos_b: Any) -> Any:
        """Whether the file ends where the read stopped. Read outside ignore_errors(), so a
        network or storage error here is raised (after TensorFlow's own retries)."""
        tf_ = self.tf
        if self.gzip:
            # gzip's trailer holds the uncompressed length mod 2**32 (RFC 1952).
            data = tf_.io.read_file(self.path)
            tail = tf_.cast(
                tf_.io.decode_raw(
                    tf_.strings.substr(data, tf_.maximum(tf_.strings.length(data) - 4, 0), 4), tf_.uint8
                ),
                tf_.int64,
            )
            isize = tf_.reduce_sum(
                tail * tf_.constant([1, 1 << 8, 1 << 16, 1 << 24], tf_.int64)[: tf_.size(tail)]
            )
            return tf_.logical_and(tf_.strings.length(data) >= 18, tf_.equal(pos_b % (1 << 32), isize))
        rest = raw.fixed_length(self.path, 1, header_bytes=pos_b, buffer=64)
        return tf_.equal(rest.take(1).reduce(tf_.constant(0, tf_.int64), plain(lambda n, _: n + 1)), 0)

    def _raise_or_count(self, code: Any, pos_r: Any, pos_b: Any, yielded: Any, last_stop: Any) -> list[Any]:
        tf_, path = self.tf, self.path
        unstable = tensor_text(
            (
                "Reading TFRecord shard {} failed at a different place on each of "
                f"{READ_ATTEMPTS} reads (records {{}} then {{}}): a network or storage error, not "
                "corruption, that outlasted TensorFlow's own retries each time. Nothing was skipped "
                "or counted. Retry later, or raise GCS_RETRY_CONFIG_MAX_RETRIES."
            ),
            path,
            last_stop,
            pos_r,
        )
        out = [
            tf_.debugging.Assert(tf_.not_equal(code, _MISMATCH), [self._mismatch(pos_r, pos_b)]),
            tf_.debugging.Assert(tf_.not_equal(code, _UNSTABLE), [unstable]),
        ]
        bad = tf_.equal(code, _CORRUPT)
        if self.counter is None:
            read = (
                ("read {} of {} records", pos_r, self.count)
                if self.counts_known
                else ("read {} records ({} of {} bytes)", pos_r, pos_b, self.size)
            )
            corrupt = tensor_text(
                (
                    "Corrupt TFRecord shard {}: " + read[0] + ", then hit bad data (CRC mismatch or "
                    "truncation) at the same record on a re-read. Re-convert the shard, or pass "
                    "skip_corrupt=True to skip the rest of it and count the loss."
                ),
                path,
                *read[1:],
            )
            out.append(tf_.debugging.Assert(tf_.logical_not(bad), [corrupt]))
            return out
        flag, zero = tf_.cast(bad, tf_.int64), tf_.constant(0, tf_.int64)
        lost_bytes = zero if self.gzip else tf_.where(self.count < 0, tf_.maximum(self.size - pos_b, 0), zero)
        out.append(
            tf_.group(
                self.counter.corrupt_shards.assign_add(flag),
                self.counter.records_lost.assign_add(flag * tf_.maximum(self.count - yielded, 0)),
                self.counter.bytes_lost.assign_add(flag * lost_bytes),
            )
        )
        return out

    def _mismatch(self, pos_r: Any, pos_b: Any) -> Any:
        path = self.path
        if not self.counts_known:
            return tensor_text(
                (
                    "TFRecord shard {} ends cleanly at {} bytes, but held {} bytes when "
                    "build() listed it: it changed while being read."
                ),
                path,
                pos_b,
                self.size,
            )
        if self.gzip:
            found, args = "holds {} records, where the manifest says {}", (pos_r, self.count)
        else:
            found = "holds {} records in {} bytes, where the manifest says {} records in {} bytes"
            args = (pos_r, pos_b, self.count, self.size)
        return tensor_text(
            "TFRecord shard {} reads cleanly to its end but " + found + _NOT_LISTED, path, *args
        )


_NOT_LISTED = (
    ": it is not the file the manifest lists (replaced, or the manifest is wrong). "
    "Re-convert, or check with `tfpipe inspect --verify`."
)

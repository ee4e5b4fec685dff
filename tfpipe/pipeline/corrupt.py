"""Corrupt data: reading a shard so a bad one is named, and counting what `skip_corrupt` drops.

TensorFlow's own errors do not name the file: a CRC mismatch reads "corrupted record at 240",
a truncation "truncated record at 684", and `decode_jpeg` says "Invalid JPEG data". So:

- Each shard is read with `ignore_errors()` (TFRecordDataset stops at the first bad record),
  in groups of VERIFY_GROUP records; at the end of the shard one check compares what was read
  with the manifest's record count (or, without a manifest, the file size). A short read
  raises an error naming the shard, or with `skip_corrupt=True` is counted.
- Images get a cheap structural check (a complete JPEG, see presets/imagenet.py) before
  decoding; a failure raises naming the shard and the image's file name, or is counted.

The counts live in `tf.Variable`s of a `SkipCounter`, updated inside the pipeline and read
with `tfpipe.pipeline.skipped(ds)` (or `Pipeline.skipped()`) at any time.
"""

from __future__ import annotations

import dataclasses
from typing import Any

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


@dataclasses.dataclass(frozen=True, slots=True)
class Skipped:
    """What `skip_corrupt=True` dropped so far.

    Attributes:
      corrupt_shards: shards that ended early (CRC mismatch or truncation). TFRecord framing
        cannot resynchronise, so the rest of such a shard is lost.
      records_lost: records not read from those shards (from manifest counts; records of
        foreign shards, whose counts are unknown, are in `bytes_lost` only).
      bytes_lost: bytes of those shards not read (uncompressed foreign shards).
      bad_images: records whose image failed the structural check (empty, not JPEG,
        truncated) and were dropped.
      failed_decodes: images that passed the check but still failed to decode, dropped.
        Exact once the iterator is exhausted or deleted; while it runs, images still being
        decoded count here too.
    """

    corrupt_shards: int = 0
    records_lost: int = 0
    bytes_lost: int = 0
    bad_images: int = 0
    failed_decodes: int = 0

    @property
    def records(self) -> int:
        """Records dropped in total (known counts only)."""
        return self.records_lost + self.bad_images + self.failed_decodes


class SkipCounter:
    """The variables behind `Skipped`. One per planned pipeline with `skip_corrupt=True`."""

    def __init__(self) -> None:
        from tfpipe._tf import tf

        tf_ = tf()
        with tf_.init_scope(), tf_.device("/cpu:0"):
            def var(name: str) -> Any:
                return tf_.Variable(0, dtype=tf_.int64, trainable=False, name=f"tfpipe_skipped_{name}")

            self.corrupt_shards = var("corrupt_shards")
            self.records_lost = var("records_lost")
            self.bytes_lost = var("bytes_lost")
            self.bad_images = var("bad_images")
            self.decode_attempts = var("decode_attempts")
            self.decoded = var("decoded")

    def read(self) -> Skipped:
        return Skipped(
            corrupt_shards=int(self.corrupt_shards.numpy()),
            records_lost=int(self.records_lost.numpy()),
            bytes_lost=int(self.bytes_lost.numpy()),
            bad_images=int(self.bad_images.numpy()),
            failed_decodes=max(0, int(self.decode_attempts.numpy()) - int(self.decoded.numpy())),
        )


def plain(fn: Any) -> Any:
    """Marks a dataset function as plain graph code: autograph would add seconds of
    transpiling per `build()` and tfpipe's functions have no Python control flow on tensors."""
    from tfpipe._tf import tf

    return tf().autograph.experimental.do_not_convert(fn)


def read_shard(path: Any, size: Any, count: Any, *, compression: str, buffer: int,
               verify: bool, counter: SkipCounter | None, with_source: bool,
               group: int = VERIFY_GROUP) -> Any:
    """The interleave function: one shard's records, checked to the end of the file.

    Args:
      path, size, count: the shard, its bytes and records (-1 when unknown).
      verify: check the shard was read to its end; needs a count or an uncompressed size.
      counter: count corrupt shards instead of raising (skip_corrupt).
      with_source: yield (record, path) so later errors can name the shard.
      group: records per verification step (see `verify_group`).
    """
    from tfpipe._tf import tf

    tf_ = tf()
    records = tf_.data.TFRecordDataset(path, compression_type=compression, buffer_size=buffer)
    if not verify:
        if counter is not None:
            records = records.ignore_errors()
        return records.map(plain(lambda r: (r, path))) if with_source else records

    groups = records.ignore_errors().batch(group)
    end = tf_.data.Dataset.from_tensors((tf_.zeros([0], tf_.string), True))
    tagged = groups.map(plain(lambda r: (r, False))).concatenate(end)
    size_known = compression == ""
    zero = tf_.constant(0, tf_.int64)

    def step(state: Any, element: Any) -> Any:
        nbytes, nrecords = state
        group, is_end = element
        nbytes += tf_.reduce_sum(tf_.cast(tf_.strings.length(group), tf_.int64) + 16)
        nrecords += tf_.cast(tf_.size(group), tf_.int64)
        if size_known:
            complete = tf_.where(count >= 0, tf_.equal(nrecords, count), tf_.equal(nbytes, size))
        else:
            complete = tf_.logical_or(count < 0, tf_.equal(nrecords, count))
        bad = tf_.logical_and(is_end, tf_.logical_not(complete))
        if counter is None:
            expected = tf_.where(count >= 0, count, size)
            unit = tf_.where(count >= 0, "records", "bytes")
            done = tf_.where(count >= 0, nrecords, nbytes)
            guard = tf_.debugging.Assert(
                tf_.logical_not(bad),
                ["Corrupt TFRecord shard", path, "(CRC mismatch or truncation): read", done, "of",
                 expected, unit, "then hit bad data. Re-convert the shard, or pass "
                 "skip_corrupt=True to skip the rest of it and count the loss."],
                summarize=3,
            )
        else:
            flag = tf_.cast(bad, tf_.int64)
            guard = tf_.group(
                counter.corrupt_shards.assign_add(flag),
                counter.records_lost.assign_add(flag * tf_.maximum(count - nrecords, 0)),
                counter.bytes_lost.assign_add(
                    flag * tf_.where(count < 0, tf_.maximum(size - nbytes, 0), zero)
                    if size_known else zero
                ),
            )
        with tf_.control_dependencies([guard]):
            group = tf_.identity(group)
        if with_source:
            return (nbytes, nrecords), (group, tf_.fill(tf_.shape(group), path))
        return (nbytes, nrecords), group

    return tagged.scan((zero, zero), plain(step)).unbatch()

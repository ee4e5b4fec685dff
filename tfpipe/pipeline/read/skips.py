"""What `skip_corrupt=True` drops, and the preset's check of a record before decode.

The counts live in `tf.Variable`s of a `SkipCounter`, updated inside the pipeline (by the
verified shard read for corrupt shards, here for bad images) and read with
`tfpipe.pipeline.skipped(ds)` (or `Pipeline.skipped()`) at any time.

Images get a cheap structural check (a complete JPEG, see modalities/images/preset.py) before
decoding; `decode_jpeg`'s own error ("Invalid JPEG data") names no file. A failure raises
naming the shard and the image's file name, or with skip_corrupt is dropped and counted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from tfpipe._tf import Dataset, Tensor, plain, tf

if TYPE_CHECKING:
    from tfpipe.presets import Decoder

BAD_IMAGE = "Undecodable image (empty, not a JPEG or PNG, or truncated) in shard"


@dataclasses.dataclass(frozen=True, slots=True)
class SkipCounts:
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
    """The variables behind `SkipCounts`. One per planned pipeline with `skip_corrupt=True`."""

    def __init__(self) -> None:
        tf_ = tf()
        with tf_.init_scope(), tf_.device("/cpu:0"):

            def var(name: str) -> Tensor:
                return tf_.Variable(0, dtype=tf_.int64, trainable=False, name=f"tfpipe_skipped_{name}")

            self.corrupt_shards = var("corrupt_shards")
            self.records_lost = var("records_lost")
            self.bytes_lost = var("bytes_lost")
            self.bad_images = var("bad_images")
            self.decode_attempts = var("decode_attempts")
            self.decoded = var("decoded")

    def read(self) -> SkipCounts:
        return SkipCounts(
            corrupt_shards=int(self.corrupt_shards.numpy()),
            records_lost=int(self.records_lost.numpy()),
            bytes_lost=int(self.bytes_lost.numpy()),
            bad_images=int(self.bad_images.numpy()),
            failed_decodes=max(0, int(self.decode_attempts.numpy()) - int(self.decoded.numpy())),
        )


def drop_bad(ds: Dataset, check: Callable[[Tensor], Tensor], counter: SkipCounter) -> Dataset:
    """Drops `(features, source)` elements failing `check`, counting them (skip_corrupt)."""
    tf_ = tf()

    def keep(features: Tensor, _: Tensor) -> Tensor:
        ok = check(features)
        with tf_.control_dependencies([counter.bad_images.assign_add(1 - tf_.cast(ok, tf_.int64))]):
            return tf_.identity(ok)

    return ds.filter(plain(keep))


def checked(features: Tensor, source: Tensor, dec: Decoder, counter: SkipCounter | None) -> Tensor:
    """`features`, passed to decode only once the preset's check has run on them: without
    `counter` a failing check raises naming the shard (when known) and what `dec.describe`
    adds; with it, the decode attempt is counted (`drop_bad` already dropped the failures)."""
    if dec.check is None:
        return features
    tf_ = tf()
    if counter is None:
        where = source if dec.needs_source else "(unknown shard)"
        extra = dec.describe(features) if dec.describe is not None else []
        dep = tf_.debugging.Assert(
            dec.check(features),
            [
                BAD_IMAGE,
                where,
                *extra,
                "- re-convert the data, or pass skip_corrupt=True to skip and count such records.",
            ],
        )
    else:
        dep = counter.decode_attempts.assign_add(1)
    with tf_.control_dependencies([dep]):  # the check must pass before decode starts
        return tf_.nest.map_structure(tf_.identity, features)


def count_decoded(out: Tensor, counter: SkipCounter) -> Tensor:
    """`out` once counted as decoded: attempts minus decodes are the images whose decode failed."""
    tf_ = tf()
    with tf_.control_dependencies(tf_.nest.flatten(out)):
        done = counter.decoded.assign_add(1)
    with tf_.control_dependencies([done]):
        return tf_.nest.map_structure(tf_.identity, out)

"""The reading stages: list_files, shard, interleave (one shard's verified read, in the
resumable order when the plan has one), cache, shuffle and repeat. Until decode, every element
is `(record, source)` (see stages/pipeline.py).

The resumable order (`StagePlan.order`, see order/resumable.py) makes the whole ordered,
endless stream in "interleave" (from the plan's files, not from the stages before it, and from
its own in-memory cache with cache="memory"), in the elements of the plan's batching
(`Batching.ordered`); "shard", "cache", "shuffle" and "repeat" are then the identity.
"""

from __future__ import annotations

from collections.abc import Callable

from tfpipe._tf import Dataset, Tensor, plain, tf
from tfpipe.pipeline.read import raw
from tfpipe.pipeline.read.generation import Generation
from tfpipe.pipeline.read.shard import read_shard, verify_group
from tfpipe.pipeline.stages.stage import StageFn, StagePlan


def list_files_stage(p: StagePlan) -> StageFn:
    """Every file with its size and record count (the first stage: its input is ignored)."""

    def list_files(_: Dataset | None) -> Dataset:
        tf_ = tf()
        src = p.source
        return tf_.data.Dataset.from_tensor_slices(
            (list(src.files), tf_.constant(src.sizes, tf_.int64), tf_.constant(src.counts, tf_.int64))
        )

    return list_files


def shard_stage(p: StagePlan) -> StageFn:
    """This input pipeline's files (file sharding) or records (record sharding)."""

    def shard(ds: Dataset) -> Dataset:
        if p.shard_by == "none" or p.order is not None:  # the resumable order shards itself
            return ds
        return ds.shard(p.num_shards, p.shard_index)

    return shard


def interleave_stage(p: StagePlan) -> StageFn:
    """The files' records as `(record, source)`: source is the shard path when the decoder
    names shards in its errors, else an empty string. Training interleaves files; eval reads
    them in source order."""
    cfg = p.config
    read = shard_reader(p)

    def interleave(ds: Dataset) -> Dataset:
        tf_ = tf()
        if p.order is not None:  # in the batching's elements (records, or text's chunks)
            return p.batching.ordered(
                p, lambda path, size, count: read(path, size, count, grouped=True), read_calls(p)
            )
        if not p.training:
            # Source order: shard 0 whole, then shard 1, ... A parallel interleave of one
            # file at a time still reads in the background and opens the next two files
            # ahead (tf.data prefetches 2 * cycle_length inputs); the elements are groups of
            # records, so each open file reads ahead 3 groups (2 * block_length + 1).
            ds = ds.interleave(
                plain(lambda *f: read(*f, grouped=True)),
                cycle_length=1,
                block_length=1,
                num_parallel_calls=tf_.data.AUTOTUNE,
                deterministic=True,
            )
            ds = raw.unbatch(ds)
        else:
            if not p.ordered_read and p.read_files > 1:
                ds = ds.shuffle(p.read_files, seed=cfg.seed, reshuffle_each_iteration=True)
            ds = ds.interleave(
                plain(lambda *f: read(*f, grouped=False)),
                cycle_length=p.cycle,
                block_length=cfg.block_length,
                num_parallel_calls=read_calls(p),
                deterministic=p.deterministic or p.ordered_read,
            )
        if p.read_records is not None:
            # Keras then knows the steps of an epoch (no "ran out of data", a progress total).
            ds = ds.apply(tf_.data.experimental.assert_cardinality(p.read_records))
        return ds

    return interleave


def shard_reader(p: StagePlan) -> Callable[..., Dataset]:
    """`(path, size, count, grouped) -> Dataset`: one shard's verified read as the plan sets it."""
    src = p.source
    mean_bytes = src.bytes // src.examples if src.bytes and src.examples else None
    group = verify_group(mean_bytes)
    buffer = p.reader_buffer
    generation = Generation.of(src)  # reads never mix two conversions of the split

    def read(path: Tensor, size: Tensor, count: Tensor, grouped: bool) -> Dataset:
        return read_shard(
            path,
            size,
            count,
            compression=src.compression,
            buffer=buffer,
            verify=p.verify,
            counter=p.counter,
            source=path if p.decoder.needs_source else "",
            group=group,
            counts_known=src.counts_known,
            grouped=grouped,
            generation=generation,
            probe_open=not src.on_gcs,
        )

    return read


def read_calls(p: StagePlan) -> int:
    """Files read in parallel: tf.data refuses more parallel calls than files in the cycle."""
    calls = p.config.read_parallelism
    return calls if calls < 0 else min(calls, p.cycle)


def cache_stage(p: StagePlan) -> StageFn:
    """The serialized records in memory or on disk, before shuffle and augmentation (the
    resumable order keeps its own cache, see order/stream.py)."""

    def cache(ds: Dataset) -> Dataset:
        if p.cache == "none" or p.order is not None:
            return ds
        return ds.cache(p.cache[len("disk:") :] if p.cache.startswith("disk:") else "")

    return cache


def shuffle_stage(p: StagePlan) -> StageFn:
    def shuffle(ds: Dataset) -> Dataset:
        if not p.training or p.order is not None:  # the resumable order permutes its windows
            return ds
        return ds.shuffle(p.shuffle_buffer, seed=p.config.seed, reshuffle_each_iteration=True)

    return shuffle


def repeat_stage(p: StagePlan) -> StageFn:
    def repeat(ds: Dataset) -> Dataset:
        return ds.repeat() if p.training and p.order is None else ds  # the resumable order is endless

    return repeat

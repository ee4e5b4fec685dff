"""The named stages of a pipeline. `build()` applies them in order; `tfpipe bench` times
their prefixes. There is one list, so the pipeline that is measured is the one that trains.

Order (all stages are always present; a disabled one is the identity):
  list_files, shard, interleave, cache, shuffle, repeat, then
  batched presets (tabular):   batch, parse, decode, map
  per-record presets (images): parse, decode, batch, map
  text (a packing preset):     chunk, parse, pack, batch, map (text/stages.py)
  then pad (eval: static shapes, stages/padding.py), [service], prefetch.
Per-record presets parse inside the decode map ("parse" is then the identity), and that map
fuses with the batch: one map per record, as in the baseline pipeline, with no stage and no
thread hand-off between parse, decode and batch.
With record sharding (fewer files than input pipelines) "shard" moves after "interleave",
because it must split records, not files. Training interleaves files; eval reads them in
manifest order, so element i of the eval dataset is record i of the source.

Each stage is made by a module-level factory of the `StagePlan`. Until decode, every element
is `(record, source)` (batched presets: a batch of each): the source is the shard path when the
preset's errors name shards (`Decoder.needs_source`), else an empty string, so no stage needs a
second element structure. Decode drops it.

The resumable order (`StagePlan.order`, see order/resumable.py) makes the whole ordered, endless stream
in "interleave" (from the plan's files, not from the stages before it, and from its own
in-memory cache with cache="memory"); "shard", "cache", "shuffle" and "repeat" are then the
identity. Its records of random per-record presets carry a third element, their augmentation
seed (from the seed, the epoch and the example id); for batched presets it yields batches of
serialized records already, and "batch" is the identity.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from tfpipe._tf import plain, tf
from tfpipe.pipeline.order import stream as order_stream
from tfpipe.pipeline.read import raw, skips
from tfpipe.pipeline.read.generation import Generation
from tfpipe.pipeline.read.shard import read_shard, verify_group
from tfpipe.pipeline.read.sharding import FileShare, ShardBy
from tfpipe.pipeline.stages import padding
from tfpipe.pipeline.text import stages as text_stages

if TYPE_CHECKING:
    from tfpipe.pipeline.config import PipelineConfig
    from tfpipe.pipeline.order.resumable import OrderSpec
    from tfpipe.pipeline.read.resolve import ResolvedData
    from tfpipe.presets import Decoder

StageName = Literal[
    "list_files",
    "shard",
    "interleave",
    "chunk",
    "cache",
    "shuffle",
    "repeat",
    "batch",
    "parse",
    "decode",
    "pack",
    "map",
    "pad",
    "service",
    "prefetch",
]
Group = Literal["read", "parse", "decode", "pack", "batch", "final"]
StageFn = Callable[[Any], Any]


@dataclasses.dataclass(frozen=True, slots=True)
class Stage:
    """One named step `tf.data.Dataset -> tf.data.Dataset` (the first stage ignores its input).

    Attributes:
      name: the stage name (see the module docstring).
      fn: the transformation.
      group: the benchmark's prefix group: read, parse, decode, batch or final.
      batches: from this stage on, elements are batches of the batch size.
    """

    name: StageName
    fn: StageFn
    group: Group
    batches: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class StagePlan:
    """Everything the stage factories read, decided by `plan()`.

    `source.files` are all the data's files, which "list_files" lists; `files` are the ones
    this input pipeline reads (`share`: after file sharding).
    """

    source: ResolvedData
    share: FileShare  # what this input pipeline reads of the source's files
    read_records: int | None  # records the interleave yields, when known for sure
    decoder: Decoder
    config: PipelineConfig  # with deterministic and drop_remainder resolved
    training: bool
    batch_size: int  # per pipeline
    num_shards: int  # input pipelines
    shard_index: int
    cache: str  # resolved: "none", "memory" or "disk:<path>"
    shuffle_buffer: int
    service: str | None
    counter: skips.SkipCounter | None
    order: OrderSpec | None = None  # the resumable order; None: "shuffle_buffer"
    start: Callable[[], Any] | None = None  # its start position (read when an iterator starts)
    batches: int | None = None  # eval: the batches it yields, when known (its cardinality)
    padding_batches: int = 0  # eval: whole batches of padding after its own (pad_remainder)

    @property
    def files(self) -> tuple[str, ...]:
        """The files this input pipeline reads (all of them with record sharding)."""
        return tuple(self.source.files[j] for j in self.share.files)

    @property
    def shard_by(self) -> ShardBy:
        return self.share.shard_by

    @property
    def read_files(self) -> int:
        """Files this input pipeline reads."""
        return len(self.share.files)

    @property
    def keyed(self) -> bool:
        """Records carry their augmentation seed (resumable order, random per-record preset)."""
        return self.order is not None and self.decoder.random and not self.decoder.batched

    @property
    def deterministic(self) -> bool:
        return bool(self.config.deterministic)

    @property
    def ordered_read(self) -> bool:
        """Record sharding needs every pipeline to see the same record order before the split."""
        return self.shard_by == "record"

    @property
    def verify(self) -> bool:
        """Check each shard was read to its end: needs a manifest count or an uncompressed size."""
        return self.config.verify_shards and (
            self.source.manifest is not None or self.source.compression == ""
        )

    @property
    def parse_in_decode(self) -> bool:
        """Per-record presets parse inside the decode map, so each record takes one map, as
        in the baseline pipeline, and the decode map fuses with the batch (tf.data's
        map_and_batch_fusion). skip_corrupt's filter needs parsed features before decode."""
        counting = self.counter is not None and self.decoder.check is not None
        return not self.decoder.batched and not counting

    @property
    def cycle(self) -> int:
        return max(1, min(self.config.cycle_length, self.read_files))

    @property
    def reader_buffer(self) -> int:
        """Read-ahead bytes per open file: the open files' buffers take at most 1/8 of the RAM budget."""
        cfg = self.config
        open_files = self.cycle if self.training else min(3, self.read_files)  # eval: one, plus two ahead
        return max(64 << 10, min(cfg.reader_buffer, cfg.resolved_ram_budget() // (8 * open_files)))


def make_stages(p: StagePlan) -> tuple[Stage, ...]:
    """The ordered stage list for a plan."""
    read = [Stage("list_files", list_files_stage(p), "read")]
    shard = Stage("shard", shard_stage(p), "read")
    pre_batched = p.order is not None and p.decoder.batched and p.decoder.packing is None
    interleave = Stage("interleave", interleave_stage(p), "read", batches=pre_batched)
    # With record sharding "shard" splits the records the interleave yields, not the files.
    read += [interleave, shard] if p.shard_by == "record" else [shard, interleave]
    read += [
        Stage("cache", cache_stage(p), "read"),
        Stage("shuffle", shuffle_stage(p), "read"),
        Stage("repeat", repeat_stage(p), "read"),
    ]
    parse = Stage("parse", parse_stage(p), "parse")
    decode = Stage("decode", decode_stage(p), "decode")
    batch = Stage("batch", batch_stage(p), "batch", batches=True)
    middle = [batch, parse, decode] if p.decoder.batched else [parse, decode, batch]
    if p.decoder.packing is not None:  # text: chunks of documents, packed into rows
        middle = [
            Stage("chunk", text_stages.chunk_stage(p), "read"),
            parse,
            Stage("pack", text_stages.pack_stage(p), "pack"),
            Stage("batch", text_stages.batch_stage(p), "batch", batches=True),
        ]
    final = [Stage("map", map_stage(p), "final"), Stage("pad", pad_stage(p), "final")]
    if p.service:
        final.append(Stage("service", service_stage(p), "final"))
    final.append(Stage("prefetch", prefetch_stage(p), "final"))
    return tuple(read + middle + final)


def list_files_stage(p: StagePlan) -> StageFn:
    """Every file with its size and record count (the first stage: its input is ignored)."""

    def list_files(_: Any) -> Any:
        tf_ = tf()
        src = p.source
        return tf_.data.Dataset.from_tensor_slices(
            (list(src.files), tf_.constant(src.sizes, tf_.int64), tf_.constant(src.counts, tf_.int64))
        )

    return list_files


def shard_stage(p: StagePlan) -> StageFn:
    """This input pipeline's files (file sharding) or records (record sharding)."""

    def shard(ds: Any) -> Any:
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

    def interleave(ds: Any) -> Any:
        tf_ = tf()
        if p.order is not None and p.decoder.packing is not None:
            return text_stages.resumable_chunks(
                p, lambda path, size, count: read(path, size, count, grouped=True), read_calls(p)
            )
        if p.order is not None:
            return order_stream.stream(
                p.order,
                lambda path, size, count: read(path, size, count, grouped=True),
                p.start,
                cached=p.cache == "memory",
                sources=p.decoder.needs_source,
                keys=p.keyed,
                batch=p.batch_size if p.decoder.batched else None,
                parallelism=read_calls(p),
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


def shard_reader(p: StagePlan) -> Callable[..., Any]:
    """`(path, size, count, grouped) -> Dataset`: one shard's verified read as the plan sets it."""
    src = p.source
    mean_bytes = src.bytes // src.examples if src.bytes and src.examples else None
    group = verify_group(mean_bytes)
    buffer = p.reader_buffer
    generation = Generation.of(src)  # reads never mix two conversions of the split

    def read(path: Any, size: Any, count: Any, grouped: bool) -> Any:
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

    def cache(ds: Any) -> Any:
        if p.cache == "none" or p.order is not None:
            return ds
        return ds.cache(p.cache[len("disk:") :] if p.cache.startswith("disk:") else "")

    return cache


def shuffle_stage(p: StagePlan) -> StageFn:
    def shuffle(ds: Any) -> Any:
        if not p.training or p.order is not None:  # the resumable order permutes its windows
            return ds
        return ds.shuffle(p.shuffle_buffer, seed=p.config.seed, reshuffle_each_iteration=True)

    return shuffle


def repeat_stage(p: StagePlan) -> StageFn:
    def repeat(ds: Any) -> Any:
        return ds.repeat() if p.training and p.order is None else ds  # the resumable order is endless

    return repeat


def batch_stage(p: StagePlan) -> StageFn:
    """Batches; after a per-record decode map a plain batch, which tf.data fuses with that map
    (map_and_batch_fusion: each image is written straight into its batch, no stage between)."""

    def batch(ds: Any) -> Any:
        drop = bool(p.config.drop_remainder)
        if p.order is not None and p.decoder.batched:  # the resumable order batched already
            return ds
        if p.parse_in_decode:
            return ds.batch(p.batch_size, drop_remainder=drop)
        return ds.batch(
            p.batch_size,
            drop_remainder=drop,
            num_parallel_calls=p.config.map_parallelism,
            deterministic=p.deterministic,
        )

    return batch


def parse_stage(p: StagePlan) -> StageFn:
    """`(record, source) -> (features, source)`: one record, or a batch of them. The identity
    when the decode map parses (`StagePlan.parse_in_decode`)."""
    dec = p.decoder

    def parse(ds: Any) -> Any:
        tf_ = tf()
        if p.parse_in_decode:
            return ds
        parse_fn = tf_.io.parse_example if dec.batched else tf_.io.parse_single_example
        return ds.map(
            plain(lambda records, source, *key: (parse_fn(records, dec.spec), source, *key)),
            num_parallel_calls=p.config.map_parallelism,
            deterministic=p.deterministic,
        )

    return parse


def decode_stage(p: StagePlan) -> StageFn:
    """The preset's decode of `(features, source)` (or of `(record, source)`, parsed first, when
    `parse_in_decode`), with the corrupt-image check around it and, for random augmentation one
    record at a time, a seed per record."""
    cfg, dec, counter = p.config, p.decoder, p.counter
    counting = counter is not None and dec.check is not None

    def run(features: Any, source: Any, seed: Any) -> Any:
        if p.parse_in_decode:  # `features` is still the serialized record
            features = tf().io.parse_single_example(features, dec.spec)
        features = skips.checked(features, source, dec, counter)
        out = dec.decode(features, seed, source if dec.needs_source else None)
        return skips.count_decoded(out, counter) if counting else out

    def decode(ds: Any) -> Any:
        tf_ = tf()
        par, det = cfg.map_parallelism, p.deterministic
        if p.keyed:
            # Each record's seed came with it: (seed, epoch, example id), whatever came before.
            if counting:  # drop_bad takes (features, source): carry the seed beside the source
                ds = ds.map(plain(lambda f, s, k: (f, (s, k))))
                ds = skips.drop_bad(ds, dec.check, counter).map(plain(lambda f, sk: (f, *sk)))
            ds = ds.map(
                plain(lambda features, source, seed: run(features, source, seed)),
                num_parallel_calls=par,
                deterministic=det,
            )
            return ds.ignore_errors() if counting else ds
        if counting:
            ds = skips.drop_bad(ds, dec.check, counter)
        if dec.random and not dec.batched:
            # One seed per record, drawn from a seeded stream zipped in order: the augmentation of
            # a record does not depend on which thread runs it, so seed + deterministic repeats.
            seeds = tf_.data.Dataset.random(seed=cfg.seed).batch(2)
            ds = tf_.data.Dataset.zip((ds, seeds))
            ds = ds.map(
                plain(lambda element, seed: run(*element, seed)), num_parallel_calls=par, deterministic=det
            )
        else:
            ds = ds.map(
                plain(lambda features, source: run(features, source, None)),
                num_parallel_calls=par,
                deterministic=det,
            )
        if counting:
            ds = ds.ignore_errors()  # the backstop for images that pass the check yet fail decode
        return ds

    return decode


def map_stage(p: StagePlan) -> StageFn:
    """The preset's final map on batches, if it has one."""
    finalize = p.decoder.finalize

    def final_map(ds: Any) -> Any:
        if finalize is None:
            return ds
        return ds.map(
            plain(finalize), num_parallel_calls=p.config.map_parallelism, deterministic=p.deterministic
        )

    return final_map


def pad_stage(p: StagePlan) -> StageFn:
    """Eval: the last batch padded to full size with weight 0, and whole batches of padding up to
    the batches every input pipeline yields (`pad_remainder`, see stages/padding.py); the cardinality
    set when known."""

    def pad(ds: Any) -> Any:
        if p.training:
            return ds
        if p.config.pad_remainder:
            marked = p.decoder.packing is not None  # text rows: padding is segment_ids == 0
            ds = padding.pad(ds, p.batch_size, p.padding_batches, marked=marked)
        if p.batches is not None:
            ds = ds.apply(tf().data.experimental.assert_cardinality(p.batches))
        return ds

    return pad


def service_stage(p: StagePlan) -> StageFn:
    def service(ds: Any) -> Any:
        from tfpipe import service as tf_service  # owned by the service module; lazy

        # Options applied after this stage never reach the workers: hand them over here.
        cfg = p.config
        return tf_service.distribute(
            ds,
            p.service,
            processing_mode=cfg.processing_mode,
            job_name=cfg.job_name,
            options=make_options(cfg, p.shard_by),
            connect_timeout=cfg.service_connect_timeout,
            peer_timeout=cfg.service_peer_timeout,
        )

    return service


def prefetch_stage(p: StagePlan) -> StageFn:
    def prefetch(ds: Any) -> Any:
        return ds.prefetch(p.config.prefetch)

    return prefetch


def make_options(cfg: PipelineConfig, shard_by: str, threadpool_size: int | None = None) -> Any:
    """The tf.data.Options of a pipeline: set deliberately, not left to defaults.

    Autotune on, with the RAM budget and CPU budget; map parallelisation and parallel batch
    on (they only add parallelism where a stage left it at 1); max_intra_op_parallelism and
    the private pool from the config (see PipelineConfig for how they were measured).
    """
    tf_ = tf()
    opts = tf_.data.Options()
    opts.deterministic = bool(cfg.deterministic)
    opts.autotune.enabled = True
    opts.autotune.ram_budget = cfg.resolved_ram_budget()
    if cfg.cpu_budget:
        opts.autotune.cpu_budget = cfg.cpu_budget
    opts.experimental_optimization.map_parallelization = True
    opts.experimental_optimization.parallel_batch = True
    opts.experimental_optimization.map_and_batch_fusion = True
    size = cfg.private_threadpool_size if threadpool_size is None else threadpool_size
    opts.threading.private_threadpool_size = size
    opts.threading.max_intra_op_parallelism = cfg.max_intra_op_parallelism
    if shard_by != "none":
        # tfpipe shards itself; a strategy's auto-sharding would shard a second time.
        opts.experimental_distribute.auto_shard_policy = tf_.data.experimental.AutoShardPolicy.OFF
    return opts

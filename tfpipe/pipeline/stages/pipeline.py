"""The chain: `make_stages`, a plan's stages in order, and `Pipeline`, what `plan()` decided, the
named stages, and the dataset they make. `build()` applies the stages in order; `tfpipe bench`
times their prefixes. There is one list, so the pipeline that is measured is the one that trains.

Order (all stages are always present; a disabled one is the identity):
  list_files, shard, interleave, cache, shuffle, repeat, then the batching's stages
  (`StagePlan.batching`): for a record an example (stages/batching.py)
    batched presets (tabular):   batch, parse, decode
    per-record presets (images): parse, decode, batch
  or a modality's own (text: chunk, parse, pack, batch); then map, pad (eval: static shapes,
  stages/padding.py), [service], prefetch.
Per-record presets parse inside the decode map, which fuses with the batch (stages/preset.py).
With record sharding (fewer files than input pipelines) "shard" moves after "interleave",
because it must split records, not files. Training interleaves files; eval reads them in
manifest order, so element i of the eval dataset is record i of the source.

Each stage is made by a module-level factory of the `StagePlan`. Until decode, every element
is `(record, source)` (batched presets: a batch of each): the source is the shard path when the
preset's errors name shards (`Decoder.needs_source`), else an empty string, so no stage needs a
second element structure. Decode drops it.

The resumable order (`StagePlan.order`, see order/resumable.py) makes the whole ordered, endless
stream in "interleave" (stages/read.py); "shard", "cache", "shuffle" and "repeat" are then the
identity; the batching makes its stream (`Batching.ordered`). Its records of random per-record
presets carry a third element, their augmentation seed (from the seed, the epoch and the example
id); for batched presets it yields batches of serialized records already, and "batch" is the
identity.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from tfpipe._tf import Dataset
from tfpipe.errors import ConfigError
from tfpipe.pipeline.config import PipelineConfig
from tfpipe.pipeline.order.resumable import ORDER_VERSION, OrderSpec
from tfpipe.pipeline.read.resolve import ResolvedData
from tfpipe.pipeline.read.sharding import ShardBy
from tfpipe.pipeline.read.skips import SkipCounter, SkipCounts
from tfpipe.pipeline.stages.final import make_options, pad_stage, prefetch_stage, service_stage
from tfpipe.pipeline.stages.preset import map_stage
from tfpipe.pipeline.stages.read import (
    cache_stage,
    interleave_stage,
    list_files_stage,
    repeat_stage,
    shard_stage,
    shuffle_stage,
)
from tfpipe.pipeline.stages.stage import Stage, StagePlan
from tfpipe.plural import counted
from tfpipe.presets import Decoder, PresetLike

if TYPE_CHECKING:
    from tfpipe.pipeline.order.position import Position  # imports TensorFlow


def make_stages(p: StagePlan) -> tuple[Stage, ...]:
    """The ordered stage list for a plan."""
    read = [Stage("list_files", list_files_stage(p), "read")]
    shard = Stage("shard", shard_stage(p), "read")
    interleave = Stage("interleave", interleave_stage(p), "read", batches=p.batching.batched_read(p))
    # With record sharding "shard" splits the records the interleave yields, not the files.
    read += [interleave, shard] if p.shard_by == "record" else [shard, interleave]
    read += [
        Stage("cache", cache_stage(p), "read"),
        Stage("shuffle", shuffle_stage(p), "read"),
        Stage("repeat", repeat_stage(p), "read"),
    ]
    middle = p.batching.stages(p)
    final = [Stage("map", map_stage(p), "final"), Stage("pad", pad_stage(p), "final")]
    if p.service:
        final.append(Stage("service", service_stage(p), "final"))
    final.append(Stage("prefetch", prefetch_stage(p), "final"))
    return tuple(read + middle + final)


@dataclasses.dataclass(frozen=True)
class Pipeline:
    """A planned pipeline: the ordered stages, the plan they were made from, and what else
    `plan()` decided.

    Attributes:
      stages: the named stages, in order.
      plan: what the stages were made from (`StagePlan`): the data, this pipeline's share of
        its files, the bound preset, the resolved config, cache and order.
      global_batch_size: the batch_size argument.
      preset: the preset object.
      notes: what plan() decided that changes or explains the data (label offsets, how a
        glob was resolved, record sharding); the defaults among them were also warned.
      position: the Position the dataset starts from, or None (a fixed start_step).
      start_step: the fixed start step (0 with a Position: the step is read at iterator start).

    The plan's fields most callers read are properties here too: `training`, `batch_size`
    (per replica with an input_context), `config` (mode-dependent defaults filled in),
    `files` (this pipeline's, after file sharding), `shard_by`, `cache` ("none", "memory" or
    "disk:<path>"), `examples` (records per epoch, None if unknown), `decoder`, `source`,
    `counter` (skip_corrupt's, or None) and `order` (the resumable order, or None).
    """

    stages: tuple[Stage, ...]
    plan: StagePlan
    global_batch_size: int
    preset: PresetLike
    notes: tuple[str, ...] = ()
    position: Position | None = None
    start_step: int = 0

    @property
    def training(self) -> bool:
        return self.plan.training

    @property
    def batch_size(self) -> int:
        return self.plan.batch_size

    @property
    def config(self) -> PipelineConfig:
        return self.plan.config

    @property
    def files(self) -> tuple[str, ...]:
        return self.plan.files

    @property
    def shard_by(self) -> ShardBy:
        return self.plan.shard_by

    @property
    def cache(self) -> str:
        return self.plan.cache

    @property
    def decoder(self) -> Decoder:
        return self.plan.decoder

    @property
    def source(self) -> ResolvedData:
        return self.plan.source

    @property
    def counter(self) -> SkipCounter | None:
        return self.plan.counter

    @property
    def order(self) -> OrderSpec | None:
        return self.plan.order

    @property
    def examples(self) -> int | None:
        """Records this pipeline reads per epoch, if the manifest says (else None)."""
        return self.plan.share.examples

    def describe(self) -> str:
        """A few lines saying what this pipeline reads and what it decided."""
        src = self.source
        what = (
            f"split {src.split!r} of {src.where} (manifest)"
            if src.manifest is not None
            else f"split {src.split!r} of {src.where} (TFDS dataset_info.json)"
            if src.tfds is not None
            else f"{src.where} (no manifest)"
        )
        records = counted(self.examples, "record") if self.examples is not None else "records: unknown count"
        mode = "training" if self.training else "eval, in source order"
        lines = [
            f"tfpipe pipeline: preset {self.preset.name!r}, {what}",
            (
                f"  {counted(len(self.files), 'file')}, {records}, batch {self.batch_size} ({mode}), "
                f"shard_by={self.shard_by}, cache={self.cache}, skip_corrupt={self.config.skip_corrupt}"
            ),
        ]
        if self.order is not None:
            o = self.order
            start = "the step of its Position" if self.position is not None else f"step {self.start_step}"
            lines.append(
                f"  order: resumable, seed {o.seed}, groups of {counted(o.cycle, 'file')}, windows of "
                f"{counted(o.window, 'record')}, starting at {start} (order version {ORDER_VERSION})"
            )
        elif self.training:
            lines.append("  order: shuffle_buffer (not resumable)")
        return "\n".join(lines + [f"  note: {n}" for n in self.notes])

    def _index(self, upto: str | int | None) -> int:
        if upto is None:
            return len(self.stages)
        if isinstance(upto, int) and not isinstance(upto, bool):
            if not 0 <= upto <= len(self.stages):
                raise ConfigError(f"upto must be in 0..{len(self.stages)}. Received: upto={upto}")
            return upto
        names = [s.name for s in self.stages]
        if upto not in names:
            raise ConfigError(f"upto must be a stage name {names} or a count. Received: upto={upto!r}")
        return names.index(upto) + 1

    def options(self, threadpool_size: int | None = None) -> Any:  # tf.data.Options
        """The tf.data.Options every dataset of this pipeline gets."""
        return make_options(self.config, self.shard_by, threadpool_size)

    def dataset(
        self, upto: str | int | None = None, *, threadpool_size: int | None = None, options: bool = True
    ) -> Dataset:
        """Applies `stages[:upto]` (a stage name: through that stage; a count; None: all),
        then the tf.data.Options (`threadpool_size` overrides private_threadpool_size). None
        when no stage runs (`upto=0`)."""
        ds = None
        for stage in self.stages[: self._index(upto)]:
            ds = stage.fn(ds)
        if ds is not None and options:
            ds = ds.with_options(self.options(threadpool_size))
        if ds is not None and self.counter is not None:
            setattr(ds, _COUNTER_ATTRIBUTE, self.counter)  # read by `skipped(ds)`
        return ds

    def examples_per_element(self, upto: str | int | None = None) -> int:
        """`batch_size` once a stage that batches has run within `upto`, else 1."""
        return self.batch_size if any(s.batches for s in self.stages[: self._index(upto)]) else 1

    def skipped(self) -> SkipCounts:
        """What `skip_corrupt=True` dropped so far (all zeros without skip_corrupt)."""
        return self.counter.read() if self.counter is not None else SkipCounts()


# The attribute of a dataset `Pipeline.dataset()` returned that holds its skip counter: the
# counter lives as long as the dataset, and a derived dataset does not carry it.
_COUNTER_ATTRIBUTE = "_tfpipe_skip_counter"


def skipped(ds: Dataset) -> SkipCounts:
    """What `skip_corrupt=True` dropped so far from a dataset `build()` returned.

    Readable at any time, e.g. after `model.fit`.

    Raises:
      ConfigError: `ds` was not built by tfpipe with skip_corrupt=True.
    """
    counter = getattr(ds, _COUNTER_ATTRIBUTE, None)
    if not isinstance(counter, SkipCounter):
        raise ConfigError(
            "skipped() needs the dataset returned by tfpipe.build(..., skip_corrupt=True) "
            "(datasets derived from it by further transformations are not tracked). "
            f"Received: {type(ds).__name__}"
        )
    return counter.read()

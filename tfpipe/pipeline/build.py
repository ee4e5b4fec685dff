"""`plan()`, `build()` and `steps_per_epoch()`: from data + preset + config to a tf.data.Dataset."""

from __future__ import annotations

import dataclasses
import math
import warnings
import weakref
from collections.abc import Sequence
from typing import Any

from tfpipe.errors import ConfigError, DataError
from tfpipe.pipeline import sources
from tfpipe.pipeline.config import PipelineConfig
from tfpipe.pipeline.corrupt import Skipped, SkipCounter
from tfpipe.pipeline.stages import Stage, StagePlan, make_options, make_stages
from tfpipe.presets import Decoder, PresetContext, PresetLike, get_preset

# Share of ram_budget "auto" may give the cache: the rest is for the shuffle buffer, the
# prefetch and autotuned buffers that autotune.ram_budget also governs.
CACHE_SHARE = 0.5
# Share of ram_budget the shuffle buffer may take.
SHUFFLE_SHARE = 0.25
# Serialized records expand about this much when a gzip shard is decompressed into the cache
# (measured on tfpipe's table shards; JPEG records barely compress, so this overestimates).
GZIP_EXPANSION = 3


class ShardingWarning(UserWarning):
    """Input pipelines share files by record, not by file (fewer files than pipelines)."""


@dataclasses.dataclass(frozen=True)
class Pipeline:
    """A planned pipeline: the ordered stages plus what `plan()` decided.

    Attributes:
      stages: the named stages, in order.
      batch_size: the batch each element holds (per replica with an input_context).
      global_batch_size: the batch_size argument.
      config: the PipelineConfig, with mode-dependent defaults filled in.
      preset: the preset object.
      files: the files this pipeline reads (after file sharding).
      shard_by: "none", "file" or "record".
      cache: the resolved cache: "none", "memory" or "disk:<path>".
      examples: records this pipeline reads per epoch, if the manifest says (else None).
      decoder: the preset bound to this data.
      source: the resolved data.
    """

    stages: tuple[Stage, ...]
    batch_size: int
    global_batch_size: int
    config: PipelineConfig
    preset: PresetLike
    files: tuple[str, ...]
    shard_by: str
    cache: str
    examples: int | None
    decoder: Decoder
    source: sources.Source
    counter: SkipCounter | None = None

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

    def options(self, threadpool_size: int | None = None) -> Any:
        """The tf.data.Options every dataset of this pipeline gets."""
        return make_options(self.config, self.shard_by, threadpool_size)

    def dataset(self, upto: str | int | None = None, *, threadpool_size: int | None = None,
                options: bool = True) -> Any:
        """Applies `stages[:upto]` (a stage name: through that stage; a count; None: all),
        then the tf.data.Options (`threadpool_size` overrides private_threadpool_size)."""
        ds = None
        for stage in self.stages[: self._index(upto)]:
            ds = stage.fn(ds)
        if ds is not None and options:
            ds = ds.with_options(self.options(threadpool_size))
        if ds is not None and self.counter is not None:
            _COUNTERS[ds] = self.counter
        return ds

    def examples_per_element(self, upto: str | int | None = None) -> int:
        """`batch_size` once a "batch" stage has run within `upto`, else 1."""
        names = [s.name for s in self.stages[: self._index(upto)]]
        return self.batch_size if "batch" in names else 1

    def skipped(self) -> Skipped:
        """What `skip_corrupt=True` dropped so far (all zeros without skip_corrupt)."""
        return self.counter.read() if self.counter is not None else Skipped()


_COUNTERS: weakref.WeakKeyDictionary[Any, SkipCounter] = weakref.WeakKeyDictionary()


def skipped(ds: Any) -> Skipped:
    """What `skip_corrupt=True` dropped so far from a dataset `build()` returned.

    Readable at any time, e.g. after `model.fit`.

    Raises:
      ConfigError: `ds` was not built by tfpipe with skip_corrupt=True.
    """
    try:
        return _COUNTERS[ds].read()
    except (KeyError, TypeError):
        raise ConfigError(
            "skipped() needs the dataset returned by tfpipe.build(..., skip_corrupt=True) "
            "(datasets derived from it by further transformations are not tracked). "
            f"Received: {type(ds).__name__}"
        ) from None


def _split_kwargs(config: PipelineConfig | None, kwargs: dict[str, Any]) -> tuple[PipelineConfig, dict[str, Any]]:
    if config is not None and not isinstance(config, PipelineConfig):
        raise ConfigError(f"config must be a PipelineConfig. Received: {type(config).__name__}")
    names = PipelineConfig.field_names()
    overrides = {k: v for k, v in kwargs.items() if k in names}
    preset_options = {k: v for k, v in kwargs.items() if k not in names}
    return dataclasses.replace(config or PipelineConfig(), **overrides), preset_options


def _check_batch_size(batch_size: Any) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
        raise ConfigError(
            f"batch_size must be a positive int (the global batch). Received: batch_size={batch_size!r}"
        )


def _per_replica_batch(batch_size: int, input_context: Any) -> int:
    if input_context is None:
        return batch_size
    replicas = int(input_context.num_replicas_in_sync)
    if batch_size % replicas:
        lower, upper = batch_size // replicas * replicas, (batch_size // replicas + 1) * replicas
        raise ConfigError(
            f"batch_size is the global batch and must divide evenly among the {replicas} replicas "
            f"in sync, or some replicas would get a smaller batch. Received: batch_size={batch_size} "
            f"({batch_size}/{replicas} = {batch_size / replicas:g}). Use "
            + (f"{lower} or {upper}." if lower else f"{upper}.")
        )
    return input_context.get_per_replica_batch_size(batch_size)


def _default_preset(src: sources.Source) -> str:
    if src.manifest is not None:
        return "tabular" if src.manifest.layout == "table" else "imagenet"
    if "image/encoded" in src.keys:
        return "imagenet"
    raise ConfigError(
        f"Cannot tell which preset reads {src.where}: there is no manifest and no image/encoded "
        f"feature. Pass preset='tabular' (with label=...) or your own. Features: {sorted(src.keys)}"
    )


_SPEC_DTYPES = {"int64": "int64", "float32": "float32", "string": "bytes"}


def _check_keys(decoder: Decoder, src: sources.Source, preset_name: str) -> None:
    how = ("checked against the manifest schema" if src.manifest is not None
           else f"checked against the first record of {src.files[0]}")
    missing = [k for k in decoder.required if k not in src.keys]
    if missing:
        raise DataError(
            f"Preset {preset_name!r} needs feature(s) {missing}, absent from the records at "
            f"{src.where} ({how}). The records hold: {sorted(src.keys)}"
        )
    for key, feature in decoder.spec.items():
        dtype = getattr(getattr(feature, "dtype", None), "name", None)
        want = _SPEC_DTYPES.get(dtype or "")
        if key in src.keys and want and src.keys[key] != want:
            raise DataError(
                f"Preset {preset_name!r} parses feature {key!r} as {want}, but the records at "
                f"{src.where} hold {src.keys[key]} ({how})."
            )


def _resolve_cache(cfg: PipelineConfig, decoder: Decoder, src: sources.Source,
                   files_bytes: int | None) -> str:
    if cfg.cache != "auto":
        return cfg.cache
    if files_bytes is None:
        return "none"
    estimate = files_bytes * (GZIP_EXPANSION if src.compression else 1)
    return "memory" if estimate <= CACHE_SHARE * cfg.resolved_ram_budget() else "none"


def plan(data: str | Sequence[str], *, preset: str | PresetLike | None = None, batch_size: int,
         training: bool = True, input_context: Any = None, service: str | None = None,
         config: PipelineConfig | None = None, **preset_options: Any) -> Pipeline:
    """Plans the pipeline `build()` returns: resolves data, preset and config into stages.

    Args: as for `build()`.

    Returns:
      A Pipeline; `.dataset()` is the tf.data.Dataset, `.stages` the named stages.
    """
    cfg, options = _split_kwargs(config, preset_options)
    cfg = cfg.for_mode(bool(training))
    _check_batch_size(batch_size)
    if service is not None and (not isinstance(service, str) or "://" not in service):
        raise ConfigError(f"service must be a dispatcher address like 'grpc://host:port'. Received: {service!r}")
    if service is not None and cfg.skip_corrupt:
        raise ConfigError(
            "skip_corrupt=True counts in this process, but service= runs the pipeline on tf.data "
            "service workers where the counts cannot be read. Received: skip_corrupt=True, "
            f"service={service!r}"
        )
    per_replica = _per_replica_batch(batch_size, input_context)

    src = sources.resolve(data, split=cfg.split, training=bool(training))
    preset_obj = get_preset(preset if preset is not None else _default_preset(src))
    ctx = PresetContext(manifest=src.manifest, schema=src.schema, keys=src.keys,
                        training=bool(training), where=src.where)
    decoder = preset_obj.bind(ctx, options)
    _check_keys(decoder, src, preset_obj.name)

    n, i = 1, 0
    if input_context is not None:
        n, i = int(input_context.num_input_pipelines), int(input_context.input_pipeline_id)
    idx = list(range(len(src.files)))
    if n == 1:
        shard_by = "none"
    elif len(src.files) >= n:
        shard_by = "file"
        idx = idx[i::n]
    else:
        shard_by = "record"
        warnings.warn(
            f"{len(src.files)} file(s) for {n} input pipelines: sharding by record instead of by "
            "file. Every pipeline reads all files and keeps every "
            f"{n}th record, so reads cost {n}x and file order is not shuffled. Write at least "
            f"{n} shards (tfpipe convert --num-shards) to shard by file.",
            ShardingWarning,
            stacklevel=3,
        )
    files = tuple(src.files[j] for j in idx)
    sizes = tuple(src.sizes[j] for j in idx)
    counts = tuple(src.counts[j] for j in idx)

    examples = None
    if sources.UNKNOWN not in counts:
        examples = sum(counts)
        if shard_by == "record":
            examples = len(range(i, examples, n))
        drop = bool(cfg.drop_remainder)
        if examples == 0 or (drop and not training and examples < per_replica):
            raise DataError(
                f"Input pipeline {i} of {n} gets {examples} records from {src.where}, fewer than one "
                f"batch of {per_replica}" + (" with drop_remainder=True" if drop else "")
                + ": it would yield no batches. Use a smaller batch_size or more data."
            )
    files_bytes = None
    if sources.UNKNOWN not in sizes:
        # With record sharding each pipeline caches only its 1/n of the records.
        files_bytes = sum(sizes) // (n if shard_by == "record" else 1)
    cache = _resolve_cache(cfg, decoder, src, files_bytes)

    shuffle_buffer = cfg.shuffle_buffer
    if src.bytes and src.examples:
        mean = max(1, src.bytes // max(1, src.examples))
        shuffle_buffer = max(1, min(shuffle_buffer, int(SHUFFLE_SHARE * cfg.resolved_ram_budget()) // mean))

    counter = SkipCounter() if cfg.skip_corrupt else None
    stage_plan = StagePlan(
        source=src, files=src.files, sizes=src.sizes, counts=src.counts, read_files=len(files),
        decoder=decoder, config=cfg,
        training=bool(training), batch_size=per_replica, num_shards=n, shard_index=i,
        shard_by=shard_by, cache=cache, shuffle_buffer=shuffle_buffer, service=service,
        counter=counter,
    )
    return Pipeline(
        stages=make_stages(stage_plan), batch_size=per_replica, global_batch_size=batch_size,
        config=cfg, preset=preset_obj, files=files if shard_by == "file" else tuple(src.files),
        shard_by=shard_by, cache=cache, examples=examples, decoder=decoder, source=src,
        counter=counter,
    )


def build(data: str | Sequence[str], *, preset: str | PresetLike | None = None, batch_size: int,
          training: bool = True, input_context: Any = None, service: str | None = None,
          config: PipelineConfig | None = None, **preset_options: Any) -> Any:
    """A tuned `tf.data.Dataset` of `(features, labels)` for `model.fit`.

    Args:
      data: a dataset directory with `tfpipe.json` (local or gs://), a glob such as
        `gs://b/imagenet/train-*`, or a list of TFRecord files without a manifest.
      preset: "imagenet", "tabular", a registered name or a Preset; None picks one from the
        manifest's layout (or "imagenet" for records with `image/encoded`).
      batch_size: the global batch. With `input_context`, each pipeline yields
        `input_context.get_per_replica_batch_size(batch_size)`.
      training: shuffle, repeat and drop the remainder (True); or yield every record exactly
        once in a stable order (False).
      input_context: a `tf.distribute.InputContext`; files are sharded across input pipelines.
      service: a tf.data service dispatcher, "grpc://host:port".
      config: a PipelineConfig.
      **preset_options: PipelineConfig fields (seed, deterministic, cache, skip_corrupt, ...)
        override `config`; the rest go to the preset (e.g. image_size, dtype, label).

    Returns:
      A `tf.data.Dataset` of `(features, labels)`.

    Raises:
      ConfigError: a bad option, batch size or preset name.
      DataError / ManifestError: missing manifest, files or features, naming them.

    Example:
      >>> ds = tfpipe.build("gs://bucket/imagenet", preset="imagenet", batch_size=1024)
      >>> model.fit(ds, steps_per_epoch=tfpipe.steps_per_epoch("gs://bucket/imagenet", 1024))
    """
    return plan(data, preset=preset, batch_size=batch_size, training=training,
                input_context=input_context, service=service, config=config,
                **preset_options).dataset()


def steps_per_epoch(data: str, batch_size: int, *, split: str | None = None,
                    drop_remainder: bool = True) -> int:
    """Batches in one pass over a split, from the manifest's record counts.

    Raises:
      ManifestError: `data` has no manifest (foreign files have no known count).
      DataError: fewer records than one batch with drop_remainder.
    """
    from tfpipe.manifest import Manifest

    _check_batch_size(batch_size)
    if not isinstance(data, str) or any(c in data for c in sources.GLOB_CHARS):
        raise ConfigError(
            "steps_per_epoch needs a tfpipe dataset directory: record counts come from its "
            f"manifest. Received: {data!r}"
        )
    manifest = Manifest.load(data.rstrip("/"))
    name = split or sources.default_split(manifest, True)
    examples = manifest.split(name).examples
    steps = examples // batch_size if drop_remainder else math.ceil(examples / batch_size)
    if steps == 0:
        raise DataError(
            f"Split {name!r} of {data} has {examples} records, fewer than one batch of {batch_size}."
        )
    return steps

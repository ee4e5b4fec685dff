"""`plan()`, `build()` and `steps_per_epoch()`: from data + preset + config to a tf.data.Dataset
(a `Pipeline`, planned.py)."""

from __future__ import annotations

import dataclasses
import math
import os
import warnings
from collections.abc import Sequence
from typing import Any

from tfpipe import storage
from tfpipe.errors import ConfigError, DataError, ManifestError
from tfpipe.pipeline import config as config_module
from tfpipe.pipeline import order as order_module
from tfpipe.pipeline import sources, text_stages
from tfpipe.pipeline.config import PipelineConfig
from tfpipe.pipeline.corrupt import SkipCounter, verify_group
from tfpipe.pipeline.planned import Pipeline, skipped
from tfpipe.pipeline.sharding import RECORD_FRAMING, FileShare, share_files
from tfpipe.pipeline.stages import StagePlan, make_stages
from tfpipe.presets import Decoder, PresetContext, PresetLike, get_preset
from tfpipe.schema import dtype_of_tf
from tfpipe.validation import check_bool

__all__ = [
    "DefaultWarning",
    "Pipeline",
    "ShardingWarning",
    "TilingWarning",
    "build",
    "plan",
    "skipped",
    "steps_per_epoch",
]

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


class DefaultWarning(UserWarning):
    """A default changed the data, e.g. the label offset of records without a manifest."""


class TilingWarning(UserWarning):
    """Text batches off a TPU's tiling: sequence_length not a multiple of 128, or the batch per
    replica not a multiple of 8."""


def _split_kwargs(
    config: PipelineConfig | None, kwargs: dict[str, Any]
) -> tuple[PipelineConfig, dict[str, Any]]:
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


def _default_preset(src: sources.ResolvedData) -> str:
    if src.manifest is not None:
        return {"table": "tabular", "text": "text"}.get(src.manifest.layout, "imagenet")
    if "image/encoded" in src.keys:
        return "imagenet"
    raise ConfigError(
        f"Cannot tell which preset reads {src.where}: there is no manifest and no image/encoded "
        f"feature. Pass preset='tabular' (with label=...) or your own. Features: {sorted(src.keys)}"
    )


def _check_keys(decoder: Decoder, src: sources.ResolvedData, preset_name: str) -> None:
    how = (
        "checked against the manifest schema"
        if src.manifest is not None
        else f"checked against the first record of {src.files[0]}"
    )
    missing = [k for k in decoder.required if k not in src.keys]
    if missing:
        raise DataError(
            f"Preset {preset_name!r} needs feature(s) {missing}, absent from the records at "
            f"{src.where} ({how}). The records hold: {sorted(src.keys)}"
        )
    for key, feature in decoder.spec.items():
        want = dtype_of_tf(getattr(feature, "dtype", None))
        if key in src.keys and want and src.keys[key] != want:
            raise DataError(
                f"Preset {preset_name!r} parses feature {key!r} as {want}, but the records at "
                f"{src.where} hold {src.keys[key]} ({how})."
            )


def _cache_bytes(share: FileShare, src: sources.ResolvedData, resumable: bool) -> int | None:
    """Bytes this pipeline would cache: with record sharding the resumable order caches every
    file (each pipeline orders the global stream), the shuffle buffer's order its share."""
    if resumable and share.shard_by == "record":
        return src.bytes
    return share.cache_bytes


def _resolve_cache(cfg: PipelineConfig, src: sources.ResolvedData, cache_bytes: int | None) -> str:
    """The cache setting, with "auto" resolved: memory when `cache_bytes` (serialized, as read
    from the files) fit in CACHE_SHARE of the RAM budget once decompressed."""
    if cfg.cache != "auto":
        return cfg.cache
    if cache_bytes is None:
        return "none"
    estimate = cache_bytes * (GZIP_EXPANSION if src.compression else 1)
    return "memory" if estimate <= CACHE_SHARE * cfg.resolved_ram_budget() else "none"


def _shuffle_buffer(cfg: PipelineConfig, src: sources.ResolvedData, copies: int = 1) -> int:
    """The configured buffer, capped so `copies` of it take at most SHUFFLE_SHARE of the RAM
    budget in mean-size records."""
    if not (src.bytes and src.examples):
        return cfg.shuffle_buffer
    mean = max(1, src.bytes // max(1, src.examples))
    return max(1, min(cfg.shuffle_buffer, int(SHUFFLE_SHARE * cfg.resolved_ram_budget()) // (mean * copies)))


def plan(
    data: str | Sequence[str],
    *,
    preset: str | PresetLike | None = None,
    batch_size: int,
    training: bool = True,
    input_context: Any = None,
    service: str | None = None,
    config: PipelineConfig | None = None,
    start_step: Any = 0,
    **preset_options: Any,
) -> Pipeline:
    """Plans the pipeline `build()` returns: resolves data, preset and config into stages.

    Args: as for `build()`.

    Returns:
      A Pipeline; `.dataset()` is the tf.data.Dataset, `.stages` the named stages.
    """
    cfg, options = _split_kwargs(config, preset_options)
    check_bool("training", training)
    position, step = order_module.parse_start(start_step)
    resuming = position is not None or step > 0
    _check_batch_size(batch_size)
    _check_service(service, cfg)
    per_replica = _per_replica_batch(batch_size, input_context)
    src = _resolve_data(data, cfg, training)
    chosen, order_notes = order_module.decide(
        cfg,
        src,
        default=config_module.DEFAULT_TRAINING_ORDER,
        training=training,
        service=service,
        resuming=resuming,
    )
    cfg = cfg.for_mode(training, chosen)
    resumable = chosen == "resumable"
    if resumable and cfg.seed is None:
        cfg = dataclasses.replace(cfg, seed=order_module.draw_seed())
        order_notes += (
            f"seed=None: the resumable order drew seed={cfg.seed}; pass it as seed= to repeat this run",
        )
    if training:
        cfg = cfg.for_storage(src.on_gcs)
    _check_cache_dir(cfg.cache)
    preset_obj, decoder = _bind(preset, src, training, options)
    n, i = _pipelines(input_context)
    share = share_files(src.sizes, src.counts, n, i, compressed=bool(src.compression))
    notes = src.notes + decoder.notes + _sharding_notes(share, n, resumable) + order_notes
    if decoder.packing is not None:
        text_notes, tiling = text_stages.plan_notes(decoder.packing, per_replica)
        for message in tiling:
            _warn(message, TilingWarning)
        notes += text_notes + tiling
    _check_enough(
        share.examples,
        share.at_most,
        per_replica,
        training=training,
        drop=bool(cfg.drop_remainder),
        where=src.where,
        n=n,
        i=i,
    )
    read_records, why_unknown = _known_length(share, cfg, service)
    if why_unknown and not training:
        notes += (f"the eval dataset's length is unknown (cardinality -2): {why_unknown}",)
    cache = _resolve_cache(cfg, src, _cache_bytes(share, src, resumable))
    if resumable and cache == "memory" and cfg.cache == "auto" and cfg.skip_corrupt:
        cache = "none"  # the resumable order's cache needs every listed record
    counter = SkipCounter() if cfg.skip_corrupt else None
    spec = start = None
    if resumable:
        mean = src.bytes // src.examples if src.bytes and src.examples else None
        window = _shuffle_buffer(cfg, src, order_module.WINDOW_COPIES)
        spec = order_module.make_spec(
            cfg,
            src,
            share,
            pipelines=n,
            index=i,
            global_batch=batch_size,
            per_replica=per_replica,
            window=window,
            run=order_module.run_length(verify_group(mean), window, cfg.cycle_length, len(share.files)),
            resuming=resuming,
        )
        start = (
            text_stages.start_fn(spec, decoder.packing, position, step)
            if decoder.packing is not None
            else order_module.start_fn(spec, position, step)
        )
    stage_plan = StagePlan(
        source=src,
        files=src.files,
        sizes=src.sizes,
        counts=src.counts,
        read_files=len(share.files),
        read_records=read_records,
        decoder=decoder,
        config=cfg,
        training=training,
        batch_size=per_replica,
        num_shards=n,
        shard_index=i,
        shard_by=share.shard_by,
        cache=cache,
        shuffle_buffer=_shuffle_buffer(cfg, src),
        service=service,
        counter=counter,
        order=spec,
        start=start,
    )
    files = tuple(src.files[j] for j in share.files)
    return Pipeline(
        stages=make_stages(stage_plan),
        training=training,
        batch_size=per_replica,
        global_batch_size=batch_size,
        config=cfg,
        preset=preset_obj,
        files=files if share.shard_by == "file" else tuple(src.files),
        shard_by=share.shard_by,
        cache=cache,
        examples=share.examples,
        decoder=decoder,
        source=src,
        counter=counter,
        notes=notes,
        order=spec,
        position=position,
        start_step=step,
    )


def _resolve_data(data: str | Sequence[str], cfg: PipelineConfig, training: bool) -> sources.ResolvedData:
    """The data, refused when skip_corrupt could not count what a corrupt shard loses."""
    src = sources.resolve(data, split=cfg.split, training=training)
    if cfg.skip_corrupt and src.manifest is None and src.compression:
        raise ConfigError(
            f"skip_corrupt=True cannot count what a corrupt shard loses in {src.where}: gzip files "
            "without a tfpipe manifest have no record count or size to check a read against. "
            "Convert them with `tfpipe convert`, or read without skip_corrupt (errors are raised)."
        )
    return src


def _pipelines(input_context: Any) -> tuple[int, int]:
    """(input pipelines, this one's index): (1, 0) without an input_context."""
    if input_context is None:
        return 1, 0
    return int(input_context.num_input_pipelines), int(input_context.input_pipeline_id)


def _sharding_notes(share: FileShare, n: int, resumable: bool) -> tuple[str, ...]:
    """With record sharding, a warning (also kept as a note) saying what it costs."""
    if share.shard_by != "record":
        return ()
    files = len(share.files)
    message = (
        f"{files} file(s) for {n} input pipelines: sharding by record instead "
        f"of by file. Every pipeline reads all files and keeps every {n}th record, so "
        f"reads cost {n}x"
        + ("" if resumable else " and file order is not shuffled")
        + f". Write at least {n} shards "
        "(tfpipe convert --num-shards) to shard by file."
    )
    _warn(message, ShardingWarning)
    return (message,)


def _known_length(share: FileShare, cfg: PipelineConfig, service: str | None) -> tuple[int | None, str]:
    """Records the interleave yields when known for sure (for assert_cardinality), else None
    and why: skip_corrupt may drop records; tf.data service workers may each read part of the files."""
    if share.examples is None:
        return None, "records without a manifest have no count"
    if cfg.skip_corrupt:
        return None, "skip_corrupt=True may drop records"
    if service is not None:
        return None, "tf.data service workers split the files"
    return share.read_records, ""


def _bind(
    preset: str | PresetLike | None, src: sources.ResolvedData, training: bool, options: dict[str, Any]
) -> tuple[PresetLike, Decoder]:
    """The preset bound to this data, its keys checked and its data-changing defaults warned."""
    preset_obj = get_preset(preset if preset is not None else _default_preset(src))
    ctx = PresetContext(
        manifest=src.manifest,
        schema=src.schema,
        keys=src.keys,
        training=training,
        where=src.where,
        split=src.split,
    )
    decoder = preset_obj.bind(ctx, options)
    _check_keys(decoder, src, preset_obj.name)
    for message in decoder.warnings:
        _warn(message, DefaultWarning)
    return preset_obj, decoder


def _warn(message: str, category: type[Warning]) -> None:
    """Warns at the caller's line, the first frame outside tfpipe (build() or plan())."""
    import sys

    level, frame = 2, sys._getframe(1)  # stacklevel 2 is the frame that called _warn
    while frame is not None and frame.f_globals.get("__name__", "").startswith("tfpipe."):
        level, frame = level + 1, frame.f_back
    warnings.warn(message, category, stacklevel=level)


def _check_enough(
    examples: int | None,
    most: int | None,
    batch: int,
    *,
    training: bool,
    drop: bool,
    where: str,
    n: int,
    i: int,
) -> None:
    """Refuses data with fewer records than one batch where that cannot work: no batch at all
    (eval with drop_remainder), or, in training, batches that repeat records and a batch
    buffer far beyond the data (a huge batch_size grows memory until the machine runs out)."""
    whose = f"Input pipeline {i} of {n} gets" if n > 1 else "It gets"
    if examples is not None:
        if examples == 0 or ((training or drop) and examples < batch):
            raise DataError(
                f"{whose} {examples} records from {where}, fewer than one batch of {batch}"
                + (
                    " with drop_remainder=True: it would yield no batches"
                    if drop and not training
                    else ": every batch would repeat records"
                    if training
                    else ""
                )
                + ". Use a smaller batch_size or more data."
            )
    elif most is not None and (training or drop) and most < batch:
        # Foreign files have no count, but every record takes at least 16 bytes of framing.
        raise DataError(
            f"{whose} at most {most} records from {where} (each TFRecord record takes at least "
            f"{RECORD_FRAMING} bytes), fewer than one batch of {batch}. Use a smaller "
            "batch_size or more data."
        )


def _check_service(service: Any, cfg: PipelineConfig) -> None:
    if service is not None and (not isinstance(service, str) or "://" not in service):
        raise ConfigError(
            f"service must be a dispatcher address like 'grpc://host:port'. Received: {service!r}"
        )
    if service is not None and cfg.skip_corrupt:
        raise ConfigError(
            "skip_corrupt=True counts in this process, but service= runs the pipeline on tf.data "
            "service workers where the counts cannot be read. Received: skip_corrupt=True, "
            f"service={service!r}"
        )


def _check_cache_dir(cache: str) -> None:
    """A disk cache's directory must exist and be writable now, not at the first batch."""
    if not cache.startswith("disk:"):
        return

    prefix = cache[len("disk:") :]
    if storage.is_gcs(prefix):
        try:
            storage.listdir(prefix.rsplit("/", 1)[0])
        except FileNotFoundError:
            raise ConfigError(f"cache={cache!r}: the bucket does not exist.") from None
        return
    parent = os.path.dirname(prefix) or "."
    if not os.path.isdir(parent):
        raise ConfigError(
            f"cache={cache!r}: the directory {parent!r} does not exist (a disk cache "
            "writes files named <path>.index and <path>.data-*)."
        )
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"cache={cache!r}: the directory {parent!r} is not writable.")


def build(
    data: str | Sequence[str],
    *,
    preset: str | PresetLike | None = None,
    batch_size: int,
    training: bool = True,
    input_context: Any = None,
    service: str | None = None,
    config: PipelineConfig | None = None,
    start_step: Any = 0,
    **preset_options: Any,
) -> Any:
    """A tuned `tf.data.Dataset` of `(features, labels)` for `model.fit`.

    Args:
      data: a dataset directory with `tfpipe.json` (local or gs://), a glob such as
        `gs://b/imagenet/train-*`, or a list of TFRecord files. Files beside a manifest that
        lists them are read through it; part of a sharded set is refused.
      preset: "imagenet", "tabular", a registered name or a Preset; None picks one from the
        manifest's layout (or "imagenet" for records with `image/encoded`).
      batch_size: the global batch. With `input_context`, each pipeline yields
        `input_context.get_per_replica_batch_size(batch_size)`.
      training: shuffle, repeat and drop the remainder (True); or yield every record exactly
        once in source order, with the cardinality set when the manifest knows it (False).
      input_context: a `tf.distribute.InputContext`; files are sharded across input pipelines.
      service: a tf.data service dispatcher, "grpc://host:port".
      config: a PipelineConfig.
      start_step: the first training step: an int, or a `tfpipe.Position` whose step is read
        when the dataset's iterator starts (restored by a checkpoint or the Keras callback of
        `tfpipe.resume`). The dataset then yields exactly the batches an uninterrupted run
        with the same data, batch_size and seed yields from that step on (resumable order).
      **preset_options: PipelineConfig fields (seed, deterministic, cache, skip_corrupt, ...)
        override `config`; the rest go to the preset (e.g. image_size, dtype, label).

    Returns:
      A `tf.data.Dataset` of `(features, labels)`.

    Raises:
      ConfigError: a bad option, batch size or preset name.
      DataError / ManifestError: missing manifest, files or features, a partial set of
        shards, shards of the wrong size, fewer records than a training batch; naming them.
      StorageError: gs:// refused a request.

    While iterating, a corrupt shard, a shard holding other records than listed, or a read
    that kept failing raise `tf.errors.InvalidArgumentError` naming the shard; a network error
    that outlasts the retries is raised as TensorFlow raised it.

    Example:
      >>> ds = tfpipe.build("gs://bucket/imagenet", preset="imagenet", batch_size=1024)
      >>> model.fit(ds, steps_per_epoch=tfpipe.steps_per_epoch("gs://bucket/imagenet", 1024))
    """
    return plan(
        data,
        preset=preset,
        batch_size=batch_size,
        training=training,
        input_context=input_context,
        service=service,
        config=config,
        start_step=start_step,
        **preset_options,
    ).dataset()


def steps_per_epoch(
    data: str | Sequence[str], batch_size: int, *, split: str | None = None, drop_remainder: bool = True
) -> int:
    """Batches in one pass over a split, from the manifest's record counts.

    `data` is a dataset directory, or a glob or list of all the shards of one of its splits.

    Raises:
      ManifestError: `data` has no manifest (foreign files have no known count).
      DataError: fewer records than one batch with drop_remainder.
    """
    _check_batch_size(batch_size)
    check_bool("drop_remainder", drop_remainder)
    src = sources.resolve(data, split=split, training=True)
    if src.manifest is None:
        raise ManifestError(
            "steps_per_epoch needs a tfpipe dataset (a directory with tfpipe.json, or its shards): "
            f"record counts come from its manifest. Received: {data!r}, files without one."
        )
    examples = sum(src.counts)
    steps = examples // batch_size if drop_remainder else math.ceil(examples / batch_size)
    if steps == 0:
        raise DataError(
            f"Split {src.split!r} of {src.where} has {examples} records, fewer than one batch of {batch_size}."
        )
    return steps

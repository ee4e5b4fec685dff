"""`plan()`'s second step for one dataset: every choice of the pipeline, as `Decisions`: the
order, the config for this mode and storage, the preset bound to the data, the share of files,
eval's static shape, the cache; each refusal of data that cannot work (fewer records than a
batch) and each note saying what was done (warned too when a default changed the data).
"""

from __future__ import annotations

import dataclasses
import sys
import warnings
from collections.abc import Mapping

from tfpipe.errors import ConfigError, DefaultWarning, ShardingWarning, TilingWarning
from tfpipe.modalities import modality_of_records
from tfpipe.pipeline import checks
from tfpipe.pipeline.config import DEFAULT_TRAINING_ORDER, PipelineConfig
from tfpipe.pipeline.order import resumable
from tfpipe.pipeline.read.resolve import ResolvedData
from tfpipe.pipeline.read.sharding import FileShare, share_files
from tfpipe.pipeline.read.skips import SkipCounter
from tfpipe.pipeline.request import Request
from tfpipe.pipeline.stages import padding
from tfpipe.pipeline.stages.batching import batching_of
from tfpipe.pipeline.stages.stage import Batching
from tfpipe.plural import counted
from tfpipe.presets import Decoder, PresetContext, PresetLike, get_preset

# Share of ram_budget "auto" may give the cache: the rest is for the shuffle buffer, the
# prefetch and autotuned buffers that autotune.ram_budget also governs.
CACHE_SHARE = 0.5
# Serialized records expand about this much when a gzip shard is decompressed into the cache
# (measured on tfpipe's table shards; JPEG records barely compress, so this overestimates).
GZIP_EXPANSION = 3


@dataclasses.dataclass(frozen=True, slots=True)
class Decisions:
    """What `plan()` chose for a request (its second step)."""

    config: PipelineConfig  # mode, order and storage defaults filled in
    preset: PresetLike
    decoder: Decoder
    batching: Batching  # the decoder's, or records
    share: FileShare
    read_records: int | None
    cache: str
    counter: SkipCounter | None
    notes: tuple[str, ...]
    resumable: bool  # the resumable order (training only)
    batches: int | None  # eval: the batches this pipeline yields, if known
    padding_batches: int  # eval: whole batches of padding after its own (pad_remainder)


def decide(r: Request) -> Decisions:
    """Every choice of the pipeline: order, config, preset, file share, cache; each refusal of
    data that cannot work (fewer records than a batch) and each note saying what was done."""
    src, training = r.src, r.training
    chosen, order_notes = resumable.decide(
        r.config,
        src,
        default=DEFAULT_TRAINING_ORDER,
        training=training,
        service=r.service,
        resuming=r.resuming,
    )
    cfg = r.config.for_mode(training, chosen)
    is_resumable = chosen == "resumable"
    if is_resumable and cfg.seed is None:
        cfg = dataclasses.replace(cfg, seed=resumable.draw_seed())
        order_notes += (
            f"seed=None: the resumable order drew seed={cfg.seed}; pass it as seed= to repeat this run",
        )
    if training:
        cfg = cfg.for_storage(src.on_gcs)
    checks.check_cache_dir(cfg.cache)
    preset_obj, decoder = _bind(r.preset, src, training, r.options)
    batching = batching_of(decoder)
    share = share_files(src.sizes, src.counts, r.pipelines, r.index, compressed=bool(src.compression))
    notes = src.notes + decoder.notes + _sharding_notes(share, r.pipelines, is_resumable) + order_notes
    notes += _batching_notes(batching, r, is_resumable)
    _check_enough(r, batching, share, drop=bool(cfg.drop_remainder))
    read_records, why_unknown = _known_length(share, cfg, r.service)
    pad, batches, extra, eval_notes = padding.eval_shape(
        cfg,
        src,
        batching,
        training=training,
        hosts=r.pipelines if r.hosts else 1,
        why_unknown=why_unknown,
        pipelines=r.pipelines,
        index=r.index,
        batch=r.per_replica,
    )
    cfg, notes = dataclasses.replace(cfg, pad_remainder=pad), notes + eval_notes
    cache = _resolve_cache(cfg, src, _cache_bytes(share, src, is_resumable))
    if is_resumable and cache == "memory" and cfg.cache == "auto" and cfg.skip_corrupt:
        cache = "none"  # the resumable order's cache needs every listed record
    counter = SkipCounter() if cfg.skip_corrupt else None
    return Decisions(
        cfg,
        preset_obj,
        decoder,
        batching,
        share,
        read_records,
        cache,
        counter,
        notes,
        is_resumable,
        batches,
        extra,
    )


def _batching_notes(batching: Batching, r: Request, resumable: bool) -> tuple[str, ...]:
    """What the batching decided (text: its chunks, the predicted fill), and its warnings (text:
    a shape off a TPU's tiles), warned too."""
    notes, warned = batching.notes(r.per_replica, r.src, resumable)
    for message in warned:
        _warn(message, TilingWarning)
    return notes + warned


def _check_enough(r: Request, batching: Batching, share: FileShare, *, drop: bool) -> None:
    """Refuses a share of data smaller than one batch, in what a batch counts (its records, or
    a text pipeline's rows: `Batching.units`)."""
    src = r.src
    count, unit = share.examples, "records"
    if share.examples is not None:
        count, unit = batching.units(share.examples, src)
    checks.check_enough(
        count,
        share.at_most,
        r.per_replica,
        training=r.training,
        drop=drop,
        where=src.where,
        n=r.pipelines,
        i=r.index,
        unit=unit,
    )


def _bind(
    preset: str | PresetLike | None, src: ResolvedData, training: bool, options: Mapping[str, object]
) -> tuple[PresetLike, Decoder]:
    """The preset bound to this data, its keys checked and its data-changing defaults warned."""
    preset_obj = get_preset(preset if preset is not None else _default_preset(src, options))
    ctx = PresetContext(
        manifest=src.manifest,
        schema=src.schema,
        keys=src.keys,
        training=training,
        where=src.where,
        split=src.split,
        suggested=src.tfds.preset_options if src.tfds is not None else {},
    )
    decoder = preset_obj.bind(ctx, options)
    checks.check_keys(decoder, src, preset_obj.name)
    for message in decoder.warnings:
        _warn(message, DefaultWarning)
    return preset_obj, decoder


def _default_preset(src: ResolvedData, options: Mapping[str, object]) -> PresetLike:
    """The preset of the data's modality: its manifest's layout's, else the modality that
    recognizes its records (images: the imagenet_to_gcs key, a TFDS dataset's image feature, or
    an `image_key` given)."""
    modality = modality_of_records(src.manifest, src.keys, src.tfds, options)
    if modality is not None:
        return modality.preset
    raise ConfigError(
        f"Cannot tell which preset reads {src.where}: there is no manifest and no image feature "
        "(image/encoded, or a TFDS image). Pass preset='tabular' (with label=...), image_key=... "
        f"for images, or your own preset. Features: {sorted(src.keys)}"
    )


def _sharding_notes(share: FileShare, n: int, resumable: bool) -> tuple[str, ...]:
    """With record sharding, a warning (also kept as a note) saying what it costs."""
    if share.shard_by != "record":
        return ()
    files = len(share.files)
    message = (
        f"{counted(files, 'file')} for {n} input pipelines: sharding by record instead "
        f"of by file. Every pipeline reads all files and keeps one record in {n}, so "
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


def _cache_bytes(share: FileShare, src: ResolvedData, resumable: bool) -> int | None:
    """Bytes this pipeline would cache: with record sharding the resumable order caches every
    file (each pipeline orders the global stream), the shuffle buffer's order its share."""
    if resumable and share.shard_by == "record":
        return src.bytes
    return share.cache_bytes


def _resolve_cache(cfg: PipelineConfig, src: ResolvedData, cache_bytes: int | None) -> str:
    """The cache setting, with "auto" resolved: memory when `cache_bytes` (serialized, as read
    from the files) fit in CACHE_SHARE of the RAM budget once decompressed."""
    if cfg.cache != "auto":
        return cfg.cache
    if cache_bytes is None:
        return "none"
    estimate = cache_bytes * (GZIP_EXPANSION if src.compression else 1)
    return "memory" if estimate <= CACHE_SHARE * cfg.resolved_ram_budget() else "none"


def _warn(message: str, category: type[Warning]) -> None:
    """Warns at the caller's line, the first frame outside tfpipe (build() or plan())."""
    level, frame = 2, sys._getframe(1)  # stacklevel 2 is the frame that called _warn
    while frame is not None and frame.f_globals.get("__name__", "").startswith("tfpipe."):
        level, frame = level + 1, frame.f_back
    warnings.warn(message, category, stacklevel=level)

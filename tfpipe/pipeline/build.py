"""`plan()`, `build()` and `steps_per_epoch()`: from data + preset + config to a tf.data.Dataset
(a `Pipeline`, stages/pipeline.py)."""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tfpipe.errors import (
    ConfigError,
    DataError,
    DefaultWarning,
    ManifestError,
    ShardingWarning,
    TilingWarning,
)
from tfpipe.packing.fill import epoch_rows
from tfpipe.pipeline import checks
from tfpipe.pipeline import config as config_module
from tfpipe.pipeline.config import PipelineConfig
from tfpipe.pipeline.order import resumable as order_module
from tfpipe.pipeline.read.resolve import ResolvedData, resolve
from tfpipe.pipeline.read.shard import verify_group
from tfpipe.pipeline.read.sharding import FileShare, share_files
from tfpipe.pipeline.read.skips import SkipCounter
from tfpipe.pipeline.stages import padding
from tfpipe.pipeline.stages.pipeline import Pipeline, skipped
from tfpipe.pipeline.stages.stage import StagePlan, make_stages
from tfpipe.pipeline.text import stages as text_stages
from tfpipe.presets import Decoder, PresetContext, PresetLike, get_preset, options_of
from tfpipe.presets.text import TextOptions, TextPacking, plan_packing
from tfpipe.validation import check_batch_size, check_bool

if TYPE_CHECKING:
    from tfpipe.pipeline.order.position import Position  # imports TensorFlow

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


def _split_kwargs(
    config: PipelineConfig | None, kwargs: dict[str, Any]
) -> tuple[PipelineConfig, dict[str, Any]]:
    if config is not None and not isinstance(config, PipelineConfig):
        raise ConfigError(f"config must be a PipelineConfig. Received: {type(config).__name__}")
    names = PipelineConfig.field_names()
    overrides = {k: v for k, v in kwargs.items() if k in names}
    preset_options = {k: v for k, v in kwargs.items() if k not in names}
    return dataclasses.replace(config or PipelineConfig(), **overrides), preset_options


def _default_preset(src: ResolvedData, options: dict[str, Any]) -> str:
    """The preset for the data: the manifest's layout's; imagenet for images (the imagenet_to_gcs
    key, a TFDS dataset's image feature, or an `image_key` given)."""
    if src.manifest is not None:
        return {"table": "tabular", "text": "text"}.get(src.manifest.layout, "imagenet")
    if "image/encoded" in src.keys or "image_key" in options or (src.tfds and src.tfds.image_key):
        return "imagenet"
    raise ConfigError(
        f"Cannot tell which preset reads {src.where}: there is no manifest and no image feature "
        "(image/encoded, or a TFDS image). Pass preset='tabular' (with label=...), image_key=... "
        f"for images, or your own preset. Features: {sorted(src.keys)}"
    )


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


def _shuffle_buffer(cfg: PipelineConfig, src: ResolvedData, copies: int = 1) -> int:
    """The configured buffer, capped so `copies` of it take at most SHUFFLE_SHARE of the RAM
    budget in mean-size records."""
    if not (src.bytes and src.examples):
        return cfg.shuffle_buffer
    mean = max(1, src.bytes // max(1, src.examples))
    return max(1, min(cfg.shuffle_buffer, int(SHUFFLE_SHARE * cfg.resolved_ram_budget()) // (mean * copies)))


def plan(
    data: str | Sequence[str] | Mapping[str, Any],
    *,
    preset: str | PresetLike | None = None,
    batch_size: int,
    training: bool = True,
    input_context: Any = None,
    num_hosts: int | None = None,
    host_index: int | None = None,
    service: str | None = None,
    config: PipelineConfig | None = None,
    start_step: Any = 0,
    weights: Mapping[str, float] | None = None,
    mix_by: str | None = None,
    **preset_options: Any,
) -> Pipeline:
    """Plans the pipeline `build()` returns: resolves data, preset and config into stages.

    Three steps: `_resolve` checks the arguments and finds the data, `_decide` makes every
    choice (the order, the config for this mode and storage, the preset bound to the data,
    the share of files, the cache), and `_assemble` makes the stages.

    Args: as for `build()`.

    Returns:
      A Pipeline; `.dataset()` is the tf.data.Dataset, `.stages` the named stages.
    """
    if isinstance(data, Mapping) or weights is not None or mix_by is not None:
        arguments = dict(locals())  # every argument as given, for each source's own plan
        return _mixture(arguments.pop("data"), arguments.pop("preset_options"), arguments)
    request = _resolve(
        data,
        preset=preset,
        batch_size=batch_size,
        training=training,
        input_context=input_context,
        num_hosts=num_hosts,
        host_index=host_index,
        service=service,
        config=config,
        start_step=start_step,
        preset_options=preset_options,
    )
    return _assemble(request, _decide(request))


def _mixture(data: Any, preset_options: dict[str, Any], arguments: dict[str, Any]) -> Pipeline:
    """A weighted mixture of datasets (mixture/plan.py), each source planned by `plan`."""
    if not isinstance(data, Mapping):
        raise ConfigError(
            "weights and mix_by weigh the sources of a mixture: pass data as a mapping of names to "
            f"datasets, e.g. {{'web': PATH, 'code': PATH}}. Received: data={data!r}"
        )
    from tfpipe.pipeline.mixture.plan import plan_mixture

    return plan_mixture(data, plan_one=plan, **arguments, **preset_options)


@dataclasses.dataclass(frozen=True, slots=True)
class _Request:
    """`plan()`'s arguments, checked, with the data resolved (its first step)."""

    src: ResolvedData
    config: PipelineConfig  # as given: mode and storage defaults not filled in yet
    preset: str | PresetLike | None
    options: dict[str, Any]  # the preset's options
    training: bool
    service: str | None
    batch_size: int  # global
    per_replica: int  # the batch of each replica (input_context), or of each host (num_hosts)
    pipelines: int
    index: int
    hosts: bool  # the share came from num_hosts/host_index
    position: Position | None  # None for a fixed step
    step: int

    @property
    def resuming(self) -> bool:
        return self.position is not None or self.step > 0


def _resolve(
    data: str | Sequence[str],
    *,
    preset: str | PresetLike | None,
    batch_size: int,
    training: bool,
    input_context: Any,
    num_hosts: Any,
    host_index: Any,
    service: str | None,
    config: PipelineConfig | None,
    start_step: Any,
    preset_options: dict[str, Any],
) -> _Request:
    """The arguments checked (each refused by name) and the data resolved."""
    cfg, options = _split_kwargs(config, preset_options)
    check_bool("training", training)
    position, step = order_module.parse_start(start_step)
    batch_size = check_batch_size("batch_size", batch_size)
    checks.check_service(service, cfg)
    hosts = checks.hosts(num_hosts, host_index, input_context, batch_size)
    checks.check_context_on_jax(input_context)
    if hosts is None:
        per_replica = checks.per_replica_batch(batch_size, input_context)
        n, i = _pipelines(input_context)
    else:
        (n, i), per_replica = hosts, batch_size // hosts[0]
    checks.check_keras_sharding(n, hosts is not None or input_context is not None)
    return _Request(
        src=_resolve_data(data, cfg, training),
        config=cfg,
        preset=preset,
        options=options,
        training=training,
        service=service,
        batch_size=batch_size,
        per_replica=per_replica,
        pipelines=n,
        index=i,
        hosts=hosts is not None,
        position=position,
        step=step,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class _Decisions:
    """What `plan()` chose for a request (its second step)."""

    config: PipelineConfig  # mode, order and storage defaults filled in
    preset: PresetLike
    decoder: Decoder
    share: FileShare
    read_records: int | None
    cache: str
    counter: SkipCounter | None
    notes: tuple[str, ...]
    resumable: bool  # the resumable order (training only)
    batches: int | None  # eval: the batches this pipeline yields, if known
    padding_batches: int  # eval: whole batches of padding after its own (pad_remainder)


def _decide(r: _Request) -> _Decisions:
    """Every choice of the pipeline: order, config, preset, file share, cache; each refusal of
    data that cannot work (fewer records than a batch) and each note saying what was done."""
    src, training = r.src, r.training
    chosen, order_notes = order_module.decide(
        r.config,
        src,
        default=config_module.DEFAULT_TRAINING_ORDER,
        training=training,
        service=r.service,
        resuming=r.resuming,
    )
    cfg = r.config.for_mode(training, chosen)
    resumable = chosen == "resumable"
    if resumable and cfg.seed is None:
        cfg = dataclasses.replace(cfg, seed=order_module.draw_seed())
        order_notes += (
            f"seed=None: the resumable order drew seed={cfg.seed}; pass it as seed= to repeat this run",
        )
    if training:
        cfg = cfg.for_storage(src.on_gcs)
    checks.check_cache_dir(cfg.cache)
    preset_obj, decoder = _bind(r.preset, src, training, r.options)
    share = share_files(src.sizes, src.counts, r.pipelines, r.index, compressed=bool(src.compression))
    notes = src.notes + decoder.notes + _sharding_notes(share, r.pipelines, resumable) + order_notes
    if decoder.packing is not None:
        text_notes, tiling = text_stages.plan_notes(decoder.packing, r.per_replica, src, resumable)
        for message in tiling:
            _warn(message, TilingWarning)
        notes += text_notes + tiling
    _check_enough(r, decoder.packing, share, drop=bool(cfg.drop_remainder))
    read_records, why_unknown = _known_length(share, cfg, r.service)
    pad, batches, extra, eval_notes = padding.eval_shape(
        cfg,
        src,
        decoder.packing,
        training=training,
        hosts=r.pipelines if r.hosts else 1,
        why_unknown=why_unknown,
        pipelines=r.pipelines,
        index=r.index,
        batch=r.per_replica,
    )
    cfg, notes = dataclasses.replace(cfg, pad_remainder=pad), notes + eval_notes
    cache = _resolve_cache(cfg, src, _cache_bytes(share, src, resumable))
    if resumable and cache == "memory" and cfg.cache == "auto" and cfg.skip_corrupt:
        cache = "none"  # the resumable order's cache needs every listed record
    counter = SkipCounter() if cfg.skip_corrupt else None
    return _Decisions(
        cfg, preset_obj, decoder, share, read_records, cache, counter, notes, resumable, batches, extra
    )


def _check_enough(r: _Request, pack: TextPacking | None, share: FileShare, *, drop: bool) -> None:
    """Refuses a share of data smaller than one batch: its records, or a text pipeline's rows."""
    src = r.src
    count, unit = share.examples, "records"
    if pack is not None and pack.histogram and share.examples is not None:
        count, unit = _text_rows_of_share(pack, share.examples, src)
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


def _text_rows_of_share(pack: TextPacking, documents: int, src: ResolvedData) -> tuple[int, str]:
    """(rows, what they are) of a text pipeline's share of documents: a batch holds rows
    (packed sequences), not records, so a text batch is checked against the rows an epoch
    packs into (`packing.fill.epoch_rows`, the count steps_per_epoch and bench use), its share of them."""
    total = sum(src.counts)
    rows = epoch_rows(pack) * documents // total if total else 0
    return rows, (
        f"rows (packed sequences of {pack.sequence_length} tokens; {documents:,} documents, the "
        "rows predicted from the length histogram)"
    )


def _assemble(r: _Request, d: _Decisions) -> Pipeline:
    """The stages of the decided pipeline (its third step), with the resumable order's spec."""
    src, cfg = r.src, d.config
    spec = start = None
    if d.resumable:
        mean = src.bytes // src.examples if src.bytes and src.examples else None
        window = _shuffle_buffer(cfg, src, order_module.WINDOW_COPIES)
        spec = order_module.make_spec(
            cfg,
            src,
            d.share,
            pipelines=r.pipelines,
            index=r.index,
            global_batch=r.batch_size,
            per_replica=r.per_replica,
            window=window,
            run=order_module.run_length(verify_group(mean), window, cfg.cycle_length, len(d.share.files)),
            resuming=r.resuming,
        )
        start = (
            text_stages.start_fn(spec, d.decoder.packing, r.position, r.step)
            if d.decoder.packing is not None
            else order_module.start_fn(spec, r.position, r.step)
        )
    stage_plan = StagePlan(
        source=src,
        share=d.share,
        read_records=d.read_records,
        decoder=d.decoder,
        config=cfg,
        training=r.training,
        batch_size=r.per_replica,
        num_shards=r.pipelines,
        shard_index=r.index,
        cache=d.cache,
        shuffle_buffer=_shuffle_buffer(cfg, src),
        service=r.service,
        counter=d.counter,
        order=spec,
        start=start,
        batches=d.batches,
        padding_batches=d.padding_batches,
    )
    return Pipeline(
        stages=make_stages(stage_plan),
        plan=stage_plan,
        global_batch_size=r.batch_size,
        preset=d.preset,
        notes=d.notes,
        position=r.position,
        start_step=r.step,
    )


def _resolve_data(data: str | Sequence[str], cfg: PipelineConfig, training: bool) -> ResolvedData:
    """The data, refused when skip_corrupt could not count what a corrupt shard loses."""
    src = resolve(data, split=cfg.split, training=training)
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
    preset: str | PresetLike | None, src: ResolvedData, training: bool, options: dict[str, Any]
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


def _warn(message: str, category: type[Warning]) -> None:
    """Warns at the caller's line, the first frame outside tfpipe (build() or plan())."""
    import sys

    level, frame = 2, sys._getframe(1)  # stacklevel 2 is the frame that called _warn
    while frame is not None and frame.f_globals.get("__name__", "").startswith("tfpipe."):
        level, frame = level + 1, frame.f_back
    warnings.warn(message, category, stacklevel=level)


def build(
    data: str | Sequence[str] | Mapping[str, Any],
    *,
    preset: str | PresetLike | None = None,
    batch_size: int,
    training: bool = True,
    input_context: Any = None,
    num_hosts: int | None = None,
    host_index: int | None = None,
    service: str | None = None,
    config: PipelineConfig | None = None,
    start_step: Any = 0,
    weights: Mapping[str, float] | None = None,
    mix_by: str | None = None,
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
        `input_context.get_per_replica_batch_size(batch_size)`; with `num_hosts`, each host
        `batch_size / num_hosts`.
      training: shuffle, repeat and drop the remainder (True); or yield every record exactly
        once in source order, with the cardinality set when the manifest knows it (False).
      input_context: a `tf.distribute.InputContext`; files are sharded across input pipelines.
      num_hosts: the same without tf.distribute: how many hosts read the data (with JAX:
        `jax.process_count()`). Each host reads its share of the files. Not with
        `input_context`.
      host_index: this host's index among them, from 0 (with JAX: `jax.process_index()`).
      service: a tf.data service dispatcher, "grpc://host:port".
      config: a PipelineConfig.
      start_step: the first training step: an int, or a `tfpipe.Position` whose step is read
        when the dataset's iterator starts (restored by a checkpoint or the Keras callback of
        `tfpipe.resume`). The dataset then yields exactly the batches an uninterrupted run
        with the same data, batch_size and seed yields from that step on (resumable order).
      weights: a mixture's weights by name, when `data` maps names to datasets (`{"web": PATH,
        "code": PATH}`); None: each source's size. Text: shares of the tokens.
      mix_by: what text's weights share, "tokens" (default) or "documents"; else "records".
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

    Long: the docstring is the public contract of tfpipe's main entry point; the body is one call.
    """
    return plan(
        data,
        preset=preset,
        batch_size=batch_size,
        training=training,
        input_context=input_context,
        num_hosts=num_hosts,
        host_index=host_index,
        service=service,
        config=config,
        start_step=start_step,
        weights=weights,
        mix_by=mix_by,
        **preset_options,
    ).dataset()


def steps_per_epoch(
    data: str | Sequence[str],
    batch_size: int,
    *,
    split: str | None = None,
    drop_remainder: bool = True,
    sequence_length: int | None = None,
    packing: str | None = None,
    **text_options: Any,
) -> int:
    """Batches in one pass over a split, from the manifest's record counts.

    `data` is a dataset directory (tfpipe's, or a TFDS version folder), or a glob or list of all
    the shards of one of its splits. A text split's batches are rows (packed sequences of
    `sequence_length` tokens), not its records (documents): their count is predicted from the
    manifest's length histogram as `build()` packs them (`packing.fill.epoch_rows`), without reading
    data. `packing` and `text_options` (output, eos, truncate, chunk, label) are those `build()`
    gets: they change the rows.

    Raises:
      ManifestError: `data` has no manifest (foreign files have no known count).
      ConfigError: a text split without `sequence_length`, or text options for other data.
      DataError: fewer records (text: rows) than one batch with drop_remainder.
    """
    batch_size = check_batch_size("batch_size", batch_size)
    check_bool("drop_remainder", drop_remainder)
    src = resolve(data, split=split, training=True)
    if src.examples is None:
        raise ManifestError(
            "steps_per_epoch needs the record counts of a tfpipe dataset (a directory with "
            "tfpipe.json, or its shards) or of a TFDS dataset (its version folder, with "
            f"dataset_info.json). Received: {data!r}, files without either."
        )
    examples, what = _units(src, batch_size, sequence_length, packing, text_options)
    steps = examples // batch_size if drop_remainder else math.ceil(examples / batch_size)
    if steps == 0:
        raise DataError(
            f"Split {src.split!r} of {src.where} has {what}, fewer than one batch of {batch_size}."
        )
    return steps


def _units(
    src: ResolvedData,
    batch_size: int,
    sequence_length: int | None,
    packing: str | None,
    text_options: dict[str, Any],
) -> tuple[int, str]:
    """(what one pass over the split `src` holds in units of a batch, and how to name it): its
    records, or a text split's rows as build() packs them."""
    manifest = src.manifest
    text = manifest.split(src.split).text if manifest is not None and src.split is not None else None
    if manifest is not None and manifest.layout == "text" and text is not None:
        if sequence_length is None:
            raise ConfigError(
                f"{src.where} is text: a batch is {batch_size} rows of sequence_length tokens, so "
                "steps_per_epoch needs the sequence_length (and packing) build() gets. Received: "
                "sequence_length=None"
            )
        rows = _text_rows(src, sequence_length, packing, text_options)
        return rows, (
            f"{text.documents:,} records (documents) that pack into {rows:,} rows of {sequence_length} tokens"
        )
    if sequence_length is not None or packing is not None or text_options:
        given = {"sequence_length": sequence_length, "packing": packing, **text_options}
        raise ConfigError(
            f"sequence_length, packing and the text options count the rows of a text split; "
            f"{src.where} is {manifest.layout if manifest is not None else 'TFDS'!r} data. Received: "
            + ", ".join(f"{k}={v!r}" for k, v in given.items() if v is not None)
        )
    return src.examples, f"{src.examples} records"


def _text_rows(src: ResolvedData, sequence_length: int, packing: str | None, options: dict[str, Any]) -> int:
    """The rows one epoch of the text split `src` packs into, as build() would pack it."""
    opts = options_of(
        TextOptions, {"sequence_length": sequence_length, "packing": packing, **options}, "text"
    )
    ctx = PresetContext(src.manifest, src.manifest.schema, {}, True, src.where, src.split)
    return epoch_rows(plan_packing(ctx, opts)[0])

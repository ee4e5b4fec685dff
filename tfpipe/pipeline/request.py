"""`plan()`'s first step: its arguments checked (each refused by name) and the data resolved,
as a `Request`.

The arguments are routed here: a `PipelineConfig` field given as a keyword overrides `config`,
the rest go to the preset (`_split_kwargs`). The hosts (`input_context`, or `num_hosts` and
`host_index`) become this input pipeline's index among them and its batch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tfpipe.errors import ConfigError
from tfpipe.pipeline import checks
from tfpipe.pipeline.config import PipelineConfig
from tfpipe.pipeline.order import resumable
from tfpipe.pipeline.read.resolve import ResolvedData, resolve
from tfpipe.presets import PresetLike
from tfpipe.validation import check_batch_size, check_bool

if TYPE_CHECKING:
    from tfpipe.pipeline.order.position import Position  # imports TensorFlow


@dataclasses.dataclass(frozen=True, slots=True)
class Request:
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


def make_request(
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
) -> Request:
    """The arguments checked (each refused by name) and the data resolved."""
    cfg, options = _split_kwargs(config, preset_options)
    check_bool("training", training)
    position, step = resumable.parse_start(start_step)
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
    return Request(
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


def _split_kwargs(
    config: PipelineConfig | None, kwargs: dict[str, Any]
) -> tuple[PipelineConfig, dict[str, Any]]:
    if config is not None and not isinstance(config, PipelineConfig):
        raise ConfigError(f"config must be a PipelineConfig. Received: {type(config).__name__}")
    names = PipelineConfig.field_names()
    overrides = {k: v for k, v in kwargs.items() if k in names}
    preset_options = {k: v for k, v in kwargs.items() if k not in names}
    return dataclasses.replace(config or PipelineConfig(), **overrides), preset_options


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

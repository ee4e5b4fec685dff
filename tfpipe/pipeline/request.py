"""`plan()`'s first step for one dataset: its arguments checked (each refused by name) and the
data resolved, as a `Request`.

The options arrive typed (pipeline/arguments.py read the short forms into their objects); the
hosts become this input pipeline's index among them and its batch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from tfpipe.errors import ConfigError
from tfpipe.pipeline import checks, hosts
from tfpipe.pipeline.arguments import Arguments
from tfpipe.pipeline.config import PipelineConfig
from tfpipe.pipeline.mixture.sources import Mixture
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
    options: Mapping[str, object]  # the preset's options given as keywords
    training: bool
    service: str | None
    batch_size: int  # global
    per_replica: int  # the batch of each replica (tf.distribute's context), or of each host
    pipelines: int
    index: int
    hosts: bool  # each host yields its share of the global batch (Hosts.per_host, several)
    position: Position | None  # None for a fixed step
    step: int

    @property
    def resuming(self) -> bool:
        return self.position is not None or self.step > 0


def make_request(args: Arguments, *, batch_size: int, training: bool, start_step: int | Position) -> Request:
    """The arguments checked (each refused by name) and the data resolved."""
    assert not isinstance(args.data, Mixture), "a mixture plans each source as one dataset"
    cfg, share = args.config, args.hosts
    check_bool("training", training)
    position, step = resumable.parse_start(start_step)
    batch_size = check_batch_size("batch_size", batch_size)
    checks.check_service(args.service, cfg)
    per_replica = share.batch(batch_size) if share is not None else batch_size
    hosts.check_on_jax(share)
    hosts.check_keras_sharding(share)
    return Request(
        src=_resolve_data(args.data, cfg, training),
        config=cfg,
        preset=args.preset,
        options=args.preset_options,
        training=training,
        service=args.service,
        batch_size=batch_size,
        per_replica=per_replica,
        pipelines=share.num_hosts if share is not None else 1,
        index=share.host_index if share is not None else 0,
        hosts=share is not None and share.per_host,
        position=position,
        step=step,
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

"""The refusals of `plan()`: arguments and data that cannot make a working pipeline, each
refused by name with what was expected and what was received."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from tfpipe import storage
from tfpipe.errors import ConfigError, DataError
from tfpipe.format.schema import dtype_of_tf
from tfpipe.pipeline.config import PipelineConfig, check_address
from tfpipe.pipeline.read.sharding import RECORD_FRAMING

if TYPE_CHECKING:
    from tfpipe.pipeline.order.position import Position  # imports TensorFlow
    from tfpipe.pipeline.read.resolve import ResolvedData
    from tfpipe.presets import Decoder


def check_keys(decoder: Decoder, src: ResolvedData, preset_name: str) -> None:
    """Refuses records that lack a feature the preset needs, or hold it as another dtype."""
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


def check_enough(
    examples: int | None,
    most: int | None,
    batch: int,
    *,
    training: bool,
    drop: bool,
    where: str,
    n: int,
    i: int,
    unit: str = "records",
) -> None:
    """Refuses data with fewer records than one batch where that cannot work: no batch at all
    (eval with drop_remainder), or, in training, batches that repeat records and a batch
    buffer far beyond the data (a huge batch_size grows memory until the machine runs out).

    Args:
      unit: what `examples` counts and a batch holds: "records", or for text the rows (packed
        sequences) an epoch packs into, with what they are.
    """
    whose = f"Input pipeline {i} of {n} gets" if n > 1 else "It gets"
    if examples is not None:
        if examples == 0 or ((training or drop) and examples < batch):
            noun = unit.split(" ", 1)[0]
            raise DataError(
                f"{whose} {examples:,} {unit} from {where}, fewer than one batch of {batch} {noun}"
                + (
                    " with drop_remainder=True: it would yield no batches"
                    if drop and not training
                    else f": every batch would repeat {noun}"
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


def check_service(service: str | None, cfg: PipelineConfig) -> None:
    """Refuses a service address that is none, and skip_corrupt's counts on the service."""
    if service is not None:
        check_address(service)
    if service is not None and cfg.skip_corrupt:
        raise ConfigError(
            "skip_corrupt=True counts in this process, but service= runs the pipeline on tf.data "
            "service workers where the counts cannot be read. Received: skip_corrupt=True, "
            f"service={service!r}"
        )


def check_cache_dir(cache: str) -> None:
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
    why = storage.write_problem(parent)
    if why:
        raise ConfigError(f"cache={cache!r}: the directory {parent!r} is not writable ({why}).")


def check_mixture_service(
    service: str | None, position: Position | None, config: PipelineConfig | None, mode: str | None
) -> None:
    """Refuses what the tf.data service cannot run of a mixture: a Position (its variable lives
    in this process) and sharding modes that split the stream (its order is the mixture's)."""
    if service is None:
        return
    check_service(service, config or PipelineConfig())
    if position is not None:
        raise ConfigError(
            "A mixture on the tf.data service starts at an int start_step: a Position's variable "
            "lives in this process, and the service's workers cannot read it. Pass "
            "start_step=position.step. Received: start_step=Position"
        )
    mode = mode or getattr(config, "processing_mode", "parallel_epochs")
    if mode != "parallel_epochs":
        raise ConfigError(
            "A mixture on the tf.data service runs whole on each worker (processing_mode="
            f"'parallel_epochs'), so its order holds. Received: processing_mode={mode!r}"
        )

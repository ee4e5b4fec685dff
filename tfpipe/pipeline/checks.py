"""The refusals of `plan()`: arguments and data that cannot make a working pipeline, each
refused by name with what was expected and what was received."""

from __future__ import annotations

import os
from types import ModuleType
from typing import TYPE_CHECKING, Any

from tfpipe import storage
from tfpipe.errors import ConfigError, DataError
from tfpipe.format.schema import dtype_of_tf
from tfpipe.pipeline.read.sharding import RECORD_FRAMING
from tfpipe.validation import check_int

if TYPE_CHECKING:
    from tfpipe.pipeline.config import PipelineConfig
    from tfpipe.pipeline.read.resolve import ResolvedData
    from tfpipe.presets import Decoder


def per_replica_batch(batch_size: int, input_context: Any) -> int:
    """The batch of each replica: the global batch, which must divide among the replicas."""
    if input_context is None:
        return batch_size
    replicas = int(input_context.num_replicas_in_sync)
    _divides(
        batch_size, replicas, f"the {replicas} replicas in sync, or some replicas would get a smaller batch"
    )
    return input_context.get_per_replica_batch_size(batch_size)


def _divides(batch_size: int, n: int, among: str) -> None:
    """Refuses a global batch that does not divide among `n` (replicas or hosts), naming the two
    nearest that do."""
    if batch_size % n:
        lower, upper = batch_size // n * n, (batch_size // n + 1) * n
        raise ConfigError(
            f"batch_size is the global batch and must divide evenly among {among}. Received: "
            f"batch_size={batch_size} ({batch_size}/{n} = {batch_size / n:g}). Use "
            + (f"{lower} or {upper}." if lower else f"{upper}.")
        )


def hosts(num_hosts: Any, host_index: Any, input_context: Any, batch_size: int) -> tuple[int, int] | None:
    """(hosts, this host's index) from `num_hosts` and `host_index`, or None when neither is
    given. The global batch must divide among the hosts: each reads `batch_size / num_hosts`.

    Raises:
      ConfigError: one of the two without the other, either beside an input_context, an index
        out of range, or a batch that does not divide.
    """
    if num_hosts is None and host_index is None:
        return None
    if input_context is not None:
        raise ConfigError(
            "num_hosts and host_index say what input_context says (the input pipelines and this "
            "one's index): pass one or the other. Received: input_context="
            f"{type(input_context).__name__}, num_hosts={num_hosts!r}, host_index={host_index!r}"
        )
    if num_hosts is None or host_index is None:
        raise ConfigError(
            "num_hosts and host_index come together (with JAX: num_hosts=jax.process_count(), "
            f"host_index=jax.process_index()). Received: num_hosts={num_hosts!r}, host_index={host_index!r}"
        )
    n = check_int("num_hosts", num_hosts, 1)
    i = check_int("host_index", host_index, 0, n - 1, what=f"an int in [0, num_hosts - 1 = {n - 1}]")
    _divides(batch_size, n, f"the num_hosts={n} hosts: each host reads batch_size / num_hosts")
    return n, i


def check_context_on_jax(input_context: Any) -> None:
    """Refuses an input_context whose replicas are not its input pipelines when Keras runs on
    JAX: it makes per-replica batches, where Keras on JAX takes each host's batch as that host's
    share of the global batch (`num_replicas_in_sync=jax.device_count()` would shrink it)."""
    import sys

    keras = sys.modules.get("keras")
    if input_context is None or keras is None or not _backend_is(keras, "jax"):
        return
    replicas, pipelines = int(input_context.num_replicas_in_sync), int(input_context.num_input_pipelines)
    if replicas != pipelines:
        raise ConfigError(
            "Keras runs on JAX, which takes each host's batches as its share of the global batch, but "
            f"this input_context makes per-replica batches ({replicas} replicas over {pipelines} input "
            "pipelines: batch_size / replicas each). Pass num_hosts=jax.process_count(), "
            "host_index=jax.process_index() instead of input_context. Received: input_context("
            f"num_input_pipelines={pipelines}, input_pipeline_id={input_context.input_pipeline_id}, "
            f"num_replicas_in_sync={replicas})"
        )


def check_keras_sharding(pipelines: int, given: bool) -> None:
    """Refuses a tfpipe host share that a multi-process `keras.distribution.DataParallel` (JAX)
    would shard again, or a whole dataset on every host that it would not shard.

    Only when Keras is imported and a DataParallel distribution is set (so JAX already knows its
    processes); `given`: the caller passed num_hosts/host_index or an input_context.
    """
    import sys

    keras = sys.modules.get("keras")
    if keras is None or not _backend_is(keras, "jax"):
        return
    try:
        distribution = keras.distribution.distribution()
        data_parallel = isinstance(distribution, keras.distribution.DataParallel)
    except Exception:  # an older Keras without the distribution API: nothing to check against
        return
    if not data_parallel:  # none, or a model-parallel layout (hosts may share a replica's data)
        return
    import jax

    processes = jax.process_count()
    if processes <= 1:
        return
    auto = bool(getattr(distribution, "auto_shard_dataset", False))
    name = type(distribution).__name__
    if given and auto:
        raise ConfigError(
            f"keras.distribution.{name} has auto_shard_dataset=True: Keras would cut each host's "
            f"batches again and keep one in {processes}, where tfpipe already gives each host its share. "
            f"Set it with {name}(auto_shard_dataset=False) (tfpipe reads only this host's files), or "
            "build the global dataset without num_hosts (every host then reads every file)."
        )
    if not given and not auto:
        raise ConfigError(
            f"keras.distribution.{name} has auto_shard_dataset=False across {processes} JAX processes, "
            "so each host must give its own share of the global batch: without num_hosts every host "
            "would read the same examples. Pass num_hosts=jax.process_count(), "
            "host_index=jax.process_index()."
        )
    if given and pipelines != processes:
        raise ConfigError(
            f"JAX runs {processes} processes, but the data is shared among {pipelines} input "
            f"pipelines. Pass num_hosts=jax.process_count() ({processes}), host_index=jax.process_index()."
        )


def _backend_is(keras: ModuleType, name: str) -> bool:
    try:
        return keras.backend.backend() == name
    except Exception:  # keras partly imported (during its own import): not yet a backend
        return False


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


def check_service(service: Any, cfg: PipelineConfig) -> None:
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

"""`Hosts`: the input pipelines that share the data, and which one this is, in one object; and
the refusals of a share that cannot work (a batch that does not divide, a share Keras on JAX
would cut again).

One idea had three spellings: `input_context` (tf.distribute's), `num_hosts` and `host_index`
(what a JAX job knows). They are one `Hosts`: `Hosts.from_jax()`, `Hosts.from_context(ctx)`,
or `Hosts(num_hosts=..., host_index=...)`, as grain's `ShardOptions`/`ShardByJaxProcess`.
The keywords remain as build()'s short forms of it (pipeline/arguments.py).
"""

from __future__ import annotations

import dataclasses
import sys
from types import ModuleType
from typing import Protocol

from tfpipe.errors import ConfigError
from tfpipe.validation import check_int


class InputContext(Protocol):
    """What `Hosts.from_context` reads of a `tf.distribute.InputContext`."""

    @property
    def num_input_pipelines(self) -> int: ...
    @property
    def input_pipeline_id(self) -> int: ...
    @property
    def num_replicas_in_sync(self) -> int: ...


@dataclasses.dataclass(frozen=True, slots=True)
class Hosts:
    """The input pipelines reading the data (one per host), and this one's index among them.

    Each reads its share of the files (of the records, when there are fewer files than hosts)
    and yields its part of the global batch.

    Example:
      >>> ds = tfpipe.build(path, batch_size=1024, hosts=tfpipe.Hosts.from_jax())

    Attributes:
      num_hosts: the input pipelines (with JAX: `jax.process_count()`).
      host_index: this one's index among them, from 0 (with JAX: `jax.process_index()`).
      num_replicas_in_sync: None: each host yields `batch_size / num_hosts`, its share of the
        global batch (what Keras on JAX and a JAX training step take), and eval pads every host
        to the same batches by default (each must run the same steps). An int (set by
        `from_context`): tf.distribute's per-replica batches, `batch_size / replicas`.
    """

    num_hosts: int
    host_index: int
    num_replicas_in_sync: int | None = None

    def __post_init__(self) -> None:
        n = check_int("num_hosts", self.num_hosts, 1)
        i = check_int("host_index", self.host_index, 0, n - 1, what=f"an int in [0, num_hosts - 1 = {n - 1}]")
        replicas = check_int("num_replicas_in_sync", self.num_replicas_in_sync, 1, optional=True)
        object.__setattr__(self, "num_hosts", n)
        object.__setattr__(self, "host_index", i)
        object.__setattr__(self, "num_replicas_in_sync", replicas)

    @classmethod
    def from_jax(cls) -> Hosts:
        """This JAX process among the job's: `jax.process_count()`, `jax.process_index()`."""
        import jax  # an optional extra, and seconds to import: only when asked for

        return cls(num_hosts=jax.process_count(), host_index=jax.process_index())

    @classmethod
    def from_context(cls, input_context: InputContext) -> Hosts:
        """The input pipeline a `tf.distribute.InputContext` describes (the one
        `strategy.distribute_datasets_from_function` hands its function), with its replicas."""
        try:
            n, i = int(input_context.num_input_pipelines), int(input_context.input_pipeline_id)
            replicas = int(input_context.num_replicas_in_sync)
        except (AttributeError, TypeError, ValueError):
            raise ConfigError(
                "input_context must be a tf.distribute.InputContext (num_input_pipelines, "
                f"input_pipeline_id, num_replicas_in_sync). Received: {type(input_context).__name__}"
            ) from None
        return cls(num_hosts=n, host_index=i, num_replicas_in_sync=replicas)

    @property
    def per_host(self) -> bool:
        """Each host yields its share of the global batch (not tf.distribute's per replica)."""
        return self.num_replicas_in_sync is None

    def batch(self, batch_size: int) -> int:
        """The batch each of these pipelines yields of the global `batch_size`.

        Raises:
          ConfigError: a global batch that does not divide among the hosts (or replicas).
        """
        if self.num_replicas_in_sync is None:
            n = self.num_hosts
            _divides(batch_size, n, f"the num_hosts={n} hosts: each host reads batch_size / num_hosts")
            return batch_size // n
        replicas = self.num_replicas_in_sync
        _divides(
            batch_size,
            replicas,
            f"the {replicas} replicas in sync, or some replicas would get a smaller batch",
        )
        return batch_size // replicas


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


def check_on_jax(hosts: Hosts | None) -> None:
    """Refuses per-replica batches (tf.distribute's) when Keras runs on JAX: JAX takes each
    host's batch as that host's share of the global batch (`num_replicas_in_sync=
    jax.device_count()` would shrink it)."""
    keras = sys.modules.get("keras")
    if hosts is None or hosts.per_host or keras is None or not _backend_is(keras, "jax"):
        return
    replicas, pipelines = hosts.num_replicas_in_sync, hosts.num_hosts
    if replicas != pipelines:
        raise ConfigError(
            "Keras runs on JAX, which takes each host's batches as its share of the global batch, but "
            f"this input_context makes per-replica batches ({replicas} replicas over {pipelines} input "
            "pipelines: batch_size / replicas each). Pass hosts=tfpipe.Hosts.from_jax() (num_hosts="
            "jax.process_count(), host_index=jax.process_index()) instead of input_context. Received: "
            f"input_context(num_input_pipelines={pipelines}, input_pipeline_id={hosts.host_index}, "
            f"num_replicas_in_sync={replicas})"
        )


def check_keras_sharding(hosts: Hosts | None) -> None:
    """Refuses a tfpipe host share that a multi-process `keras.distribution.DataParallel` (JAX)
    would shard again, or a whole dataset on every host that it would not shard.

    Only when Keras is imported and a DataParallel distribution is set (so JAX already knows its
    processes); `hosts` None: the caller gave none.
    """
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
    import jax  # Keras runs on it here: already imported

    processes = jax.process_count()
    if processes <= 1:
        return
    auto = bool(getattr(distribution, "auto_shard_dataset", False))
    name = type(distribution).__name__
    if hosts is not None and auto:
        raise ConfigError(
            f"keras.distribution.{name} has auto_shard_dataset=True: Keras would cut each host's "
            f"batches again and keep one in {processes}, where tfpipe already gives each host its share. "
            f"Set it with {name}(auto_shard_dataset=False) (tfpipe reads only this host's files), or "
            "build the global dataset without num_hosts (every host then reads every file)."
        )
    if hosts is None and not auto:
        raise ConfigError(
            f"keras.distribution.{name} has auto_shard_dataset=False across {processes} JAX processes, "
            "so each host must give its own share of the global batch: without num_hosts every host "
            "would read the same examples. Pass hosts=tfpipe.Hosts.from_jax() (num_hosts="
            "jax.process_count(), host_index=jax.process_index())."
        )
    if hosts is not None and hosts.num_hosts != processes:
        raise ConfigError(
            f"JAX runs {processes} processes, but the data is shared among {hosts.num_hosts} input "
            f"pipelines. Pass hosts=tfpipe.Hosts.from_jax() (num_hosts=jax.process_count() ({processes}), "
            "host_index=jax.process_index())."
        )


def _backend_is(keras: ModuleType, name: str) -> bool:
    try:
        return bool(keras.backend.backend() == name)
    except Exception:  # keras partly imported (during its own import): not yet a backend
        return False

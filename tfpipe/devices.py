"""Which accelerator trains here, and the `tf.distribute` strategy for it.

`tfpipe.strategy()` returns a TPUStrategy when a TPU is attached, else a MirroredStrategy over
the local GPUs, else the default strategy, and says which it chose. A TPU is looked for only
where something says one is there (a TPU VM's device files, or `TPU_NAME` / `COLAB_TPU_ADDR`):
TensorFlow's TPU resolver, given a TPU name, asks the GCE metadata server for the project and
zone, and on a machine that is not on GCE that request waits instead of failing.

Example:
  >>> strategy = tfpipe.strategy()      # stderr: tfpipe.strategy: TPUStrategy over 8 TPU cores ...
  >>> with strategy.scope():
  ...     model = make_model()
"""

from __future__ import annotations

import dataclasses
import glob
import math
import os
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Literal

from tfpipe._tf import tf
from tfpipe.errors import TpuBatchWarning as TpuBatchWarning  # raised by bench.consumer; its old home
from tfpipe.errors import TpuUnavailableError

if TYPE_CHECKING:
    import tensorflow  # seconds to import: tfpipe._tf.tf() where a strategy is made

# A TPU core's matrix units multiply 128x128 tiles (v2 to v5): a batch per core that is a
# multiple of 128 fills them, a smaller remainder pads a tile with zeros.
TPU_BATCH_MULTIPLE = 128

# Environment variables that name a TPU: TPU_NAME on TPU VMs and pods (and for a TPU Node),
# COLAB_TPU_ADDR in Colab.
_TPU_VARIABLES = ("TPU_NAME", "COLAB_TPU_ADDR")


@dataclasses.dataclass(frozen=True)
class Choice:
    """The device that trains here and the strategy that places a model on it.

    Attributes:
      kind: "TPU", "GPU" or "CPU".
      name: e.g. "TPU (8 cores)", "2 GPUs", "CPU".
      strategy: the `tensorflow.distribute.Strategy`.
      replicas: the strategy's `num_replicas_in_sync`.
      why: how it was chosen, in words (which signs of a TPU were found, or not).
    """

    kind: Literal["TPU", "GPU", "CPU"]
    name: str
    strategy: tensorflow.distribute.Strategy
    replicas: int
    why: str

    @property
    def description(self) -> str:
        if self.kind == "CPU":
            return f"the default strategy on the CPU: {self.why}"
        return f"{type(self.strategy).__name__} over {self.name}: {self.why}"


def tpu_signs() -> list[str]:
    """What says a TPU is attached to this machine: device files or variables, by name."""
    signs = [f"{v}={os.environ[v]}" for v in _TPU_VARIABLES if os.environ.get(v)]
    # /dev/accel* on TPU v2-v4 VMs; /dev/vfio/<n> (numbered groups, not /dev/vfio/vfio) on v5e+.
    signs += sorted(glob.glob("/dev/accel[0-9]*"))
    signs += sorted(p for p in glob.glob("/dev/vfio/*") if os.path.basename(p).isdigit())
    return signs


def choose(*, tpu: str | None = None) -> Choice:
    """The best device here: a TPU, else the local GPUs, else the CPU. Prints nothing.

    Args:
      tpu: the TPU to connect to (a name, "local", or "grpc://host:port"); None uses
        `TPU_NAME`, else "local" when a TPU VM's device files are present. Passing one skips the
        search for signs of a TPU.

    Raises:
      TpuUnavailableError: a TPU is named or its device files are present, but TensorFlow
        could not connect to it (another process may hold it).
    """
    tf_ = tf()
    signs = [f"tpu={tpu!r}"] if tpu else tpu_signs()
    if signs:
        return _tpu(tf_, tpu or os.environ.get("TPU_NAME") or "local", signs)
    no_tpu = f"no TPU here (no {', '.join(_TPU_VARIABLES)}, /dev/accel* or /dev/vfio/<n>)"
    gpus = tf_.config.list_physical_devices("GPU")
    if gpus:
        name = f"{len(gpus)} GPU{'s' if len(gpus) > 1 else ''}"
        strategy = tf_.distribute.MirroredStrategy()
        return Choice("GPU", name, strategy, strategy.num_replicas_in_sync, f"{no_tpu}; {name} found")
    return Choice("CPU", "CPU", tf_.distribute.get_strategy(), 1, f"{no_tpu} and no GPU")


def _tpu(tf_: ModuleType, name: str, signs: list[str]) -> Choice:
    """Connects to the TPU as tensorflow/tpu's scripts do."""
    try:
        resolver = tf_.distribute.cluster_resolver.TPUClusterResolver(tpu=name)
        tf_.config.experimental_connect_to_cluster(resolver)
        tf_.tpu.experimental.initialize_tpu_system(resolver)
        strategy = tf_.distribute.TPUStrategy(resolver)
    except Exception as e:  # TensorFlow raises several kinds here; all mean the same to the user
        raise TpuUnavailableError(
            f"A TPU looks attached ({', '.join(signs)}), but TensorFlow could not connect to "
            f"TPU {name!r}. Another process may hold it (one process at a time uses a TPU VM's "
            f"chips), or this TensorFlow is not the TPU build (tensorflow-tpu with libtpu). "
            f"Received: {type(e).__name__}: {e}"
        ) from e
    cores = strategy.num_replicas_in_sync
    return Choice("TPU", f"{cores} TPU cores", strategy, cores, f"a TPU is attached ({', '.join(signs)})")


def strategy(*, tpu: str | None = None, verbose: bool = True) -> tensorflow.distribute.Strategy:
    """The `tensorflow.distribute.Strategy` for this machine's accelerator.

    A TPUStrategy when a TPU is attached, else a MirroredStrategy over the local GPUs, else the
    default strategy. A TPU is looked for only where a TPU VM's device files or `TPU_NAME` /
    `COLAB_TPU_ADDR` say one is, so this never waits on the GCE metadata server elsewhere.

    Args:
      tpu: the TPU to connect to; None finds it (see `choose`).
      verbose: write one line to stderr saying which strategy was chosen and why, as Keras's
        `fit(verbose=...)` reports progress. `choose()` returns the same as data.

    Raises:
      TpuUnavailableError: a TPU looks attached but TensorFlow could not connect to it.

    Example:
      >>> strategy = tfpipe.strategy()
      >>> dist = strategy.distribute_datasets_from_function(
      ...     lambda ctx: tfpipe.build(data, batch_size=1024, hosts=tfpipe.Hosts.from_context(ctx)))
    """
    choice = choose(tpu=tpu)
    if verbose:
        print(f"tfpipe.strategy: {choice.description}", file=sys.stderr, flush=True)
    return choice.strategy


def tpu_batch_note(host_batch: int, cores: int) -> str | None:
    """Why `host_batch` split over `cores` TPU cores leaves the matrix units partly empty, or
    None when every core gets a multiple of 128."""
    per_core, rest = divmod(host_batch, cores)
    if not rest and per_core % TPU_BATCH_MULTIPLE == 0:
        return None
    better = max(1, math.ceil(host_batch / cores / TPU_BATCH_MULTIPLE)) * TPU_BATCH_MULTIPLE
    split = f"{per_core} per core" if not rest else f"{host_batch / cores:g} per core on average"
    return (
        f"the batch per TPU core is {split} ({host_batch} over {cores} cores), not a multiple of "
        f"{TPU_BATCH_MULTIPLE}: the TPU's matrix units run partly empty, so each example costs "
        f"more than it would at {better} per core ({better * cores} per host)"
    )

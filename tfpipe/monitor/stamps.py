"""The end-of-pipeline stage that timestamps every element as its consumer takes it.

`Stamps.watch(dataset)` appends two cheap stages to a `tf.data.Dataset`, run in the thread of
whoever calls `get_next`, and leaves its elements as they were:

1. `zip` with a counter whose map reads `tf.timestamp()`. Zip takes from its inputs in order,
   so this time is taken when the consumer asks for an element, before the pipeline is asked;
2. a map after it, which reads the time again once the pipeline has answered and writes
   `[i, k, asked, got]` into a ring of rows kept in a variable on the host (i: the row's
   number, which marks it written; k: the element's index in its iterator).

Both run inside TensorFlow, so they time the `get_next` of a compiled train function
(TensorFlow: inside `tf.function`, any `steps_per_execution`, XLA or not: `get_next` stays
outside the compiled cluster) as well as Python's `next()` (Keras on JAX iterates the dataset
in Python). tf.data's `inject_prefetch` optimization would add a prefetch after the last stage
and so take the time in a background thread: it is turned off for the watched dataset, and
the prefetch it would have added after the user's pipeline is added there explicitly, so the
pipeline runs as it did unwatched.

Cost: two stages and a scatter into a variable per element, tens of microseconds, measured
in `benchmarks/monitor_cost.py`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tfpipe._tf import Dataset, Nest, Options, Tensor, tf
from tfpipe.errors import ConfigError

# Rows the ring holds. The callback reads it every CAPACITY // 4 elements at most, so it never
# wraps between reads; 4 float64 a row, 256 KiB.
CAPACITY = 8192


class Stamps:
    """The timestamps of a watched dataset's elements, in a ring on the host.

    Attributes:
      read_rows: rows read so far (the ring's next row to read).
      lost: rows written over before they were read (never, when read as the callback does).
    """

    def __init__(self, capacity: int = CAPACITY) -> None:
        tf_ = tf()
        # A plain variable on the host even inside a strategy's scope: a mirrored one would be
        # written on every replica's device for every element.
        from tensorflow.python.ops.resource_variable_ops import ResourceVariable

        with tf_.init_scope(), tf_.device("/cpu:0"):
            self._ring = ResourceVariable(
                tf_.fill([capacity, 4], tf_.constant(-1.0, tf_.float64)),
                trainable=False,
                name="tfpipe_monitor_stamps",
            )
            self._count = ResourceVariable(
                tf_.constant(0, tf_.int64), trainable=False, name="tfpipe_monitor_count"
            )
        self.capacity = capacity
        self.read_rows = 0
        self.lost = 0

    def watch(self, dataset: Dataset) -> Dataset:
        """`dataset` with its elements timestamped as they are taken (see the module doc)."""
        tf_ = tf()
        if not isinstance(dataset, tf_.data.Dataset):
            raise ConfigError(
                "watch() takes the tf.data.Dataset that model.fit trains on (a distributed dataset: "
                "watch the dataset before distributing it). Received: "
                f"{type(dataset).__module__}.{type(dataset).__qualname__}"
            )
        options = dataset.options()
        if _would_inject_prefetch(dataset, options):
            dataset = dataset.prefetch(tf_.data.AUTOTUNE)
        ring, count, capacity = self._ring, self._count, self.capacity

        def asked(k: Tensor) -> tuple[Tensor, Tensor]:
            return k, tf_.timestamp()

        def got(ask: tuple[Tensor, Tensor], element: Nest) -> Nest:
            k, t0 = ask
            t1 = tf_.timestamp()
            i = count.assign_add(1) - 1
            row = tf_.stack([tf_.cast(i, tf_.float64), tf_.cast(k, tf_.float64), t0, t1])
            write = ring.scatter_nd_update(tf_.reshape(i % capacity, [1, 1]), tf_.reshape(row, [1, 4]))
            with tf_.control_dependencies([write]):
                return tf_.nest.map_structure(tf_.identity, element, expand_composites=True)

        stamps = _inline_map(tf_.data.Dataset.counter(), asked)
        watched = _inline_map(tf_.data.Dataset.zip((stamps, dataset)), got)
        keep = tf_.data.Options()
        keep.experimental_optimization.inject_prefetch = False
        return watched.with_options(keep)

    def count(self) -> int:
        """Rows written so far."""
        return int(self._count.numpy())

    def read(self) -> np.ndarray:
        """The rows written since the last read, `[n, 3]` of `[k, asked, got]`, oldest first.

        A row being written as this reads (a strategy's input thread fetches while the step
        computes) has its number but not yet its values: it and the rows after it wait for
        the next read. Rows written over before this read are counted in `lost`."""
        written = self.count()
        if written - self.read_rows > self.capacity:
            self.lost += written - self.capacity - self.read_rows
            self.read_rows = written - self.capacity
        wanted = np.arange(self.read_rows, written)
        if not len(wanted):
            return np.zeros((0, 3))
        rows = self._ring.numpy()[wanted % self.capacity]
        done = np.cumprod(rows[:, 0] == wanted).astype(bool)
        self.read_rows += int(done.sum())
        return rows[done, 1:]


def _inline_map(dataset: Dataset, fn: Callable[..., Nest]) -> Dataset:
    """`dataset.map(fn)`, its function run in the calling thread (a map's ops otherwise go to
    TensorFlow's inter-op threads, which a busy host makes a wait of their own: measured ~80
    of ~150 microseconds a batch on 2 loaded cores). Through tf.data's own map class, which
    takes that choice; where a TensorFlow lacks it, a plain map."""
    try:
        from tensorflow.python.data.ops.map_op import _MapDataset

        return _MapDataset(dataset, fn, use_inter_op_parallelism=False)
    except (ImportError, TypeError):  # pragma: no cover - another TensorFlow's internals
        return dataset.map(fn)


def _would_inject_prefetch(dataset: Dataset, options: Options) -> bool:
    """Whether tf.data would add a prefetch after `dataset`'s last stage (its inject_prefetch
    optimization: with autotune on, unless the last stage, past options, is a prefetch)."""
    if options.autotune.enabled is False or options.experimental_optimization.inject_prefetch is False:
        return False
    last = dataset
    while type(last).__name__ == "_OptionsDataset":
        last = last._input_dataset
    return type(last).__name__ != "_PrefetchDataset"

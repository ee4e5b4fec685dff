"""`InputWait`: the Keras callback that measures, during `model.fit`, how much of each step waits
for its batch (see `tfpipe/monitor/__init__.py` for how, on each backend)."""

from __future__ import annotations

import dataclasses
import math
import os
import time
from typing import TYPE_CHECKING

import keras
import numpy as np

from tfpipe._tf import Dataset, tf
from tfpipe.errors import ConfigError
from tfpipe.monitor import hosts
from tfpipe.monitor.figures import Figure, Result, figure, job_series
from tfpipe.monitor.stamps import CAPACITY, Stamps
from tfpipe.monitor.timeline import Calls, Deliveries, Method, waits_and_periods, window_batches

if TYPE_CHECKING:
    from tensorflow.summary import SummaryWriter

# The logs Keras hands a callback: metric names to their values; input_wait's are added.
Logs = dict[str, object]

# The first steps of each fit are left out: tracing and compiling the train function (seconds
# on the first step, and some again on the second when Keras retraces with relaxed shapes)
# and the pipeline's buffers filling for the first time.
WARMUP_STEPS = 5


class InputWait(keras.callbacks.Callback):
    """Measures the share of each training step spent waiting for its batch, in `model.fit`.

    Args:
      log_dir: also write the figures as TensorBoard scalars (`tf.summary`), per epoch, under
        `log_dir/train` beside Keras's own `TensorBoard` callback's (each host of several
        under `log_dir/train-host-<i>`, and the job's figure by host 0): `epoch_input_wait`
        and its interval's `epoch_input_wait_low` / `_high`.
      warmup_steps: the first steps of each fit left out (tracing, compiling, buffers
        filling).
      verbose: 1 prints the figure when fit ends; 0 prints nothing.

    What it gives:
      - each epoch's `input_wait` (and `input_wait_low`, `input_wait_high`, its interval) in
        the epoch's logs, so in `History` and the progress bar;
      - `result` after fit: this host's figure, every host's and the job's (JAX processes).

    With `steps_per_execution` > 1 only each call's bounds are seen: its steps are taken to
    compute equally long (tfpipe/monitor/timeline.py).

    Raises:
      ConfigError: a backend other than TensorFlow or JAX (when fit begins); a training
        dataset that was not `watch()`ed (after the warm-up steps).

    Example:
      >>> monitor = tfpipe.monitor.InputWait()
      >>> model.fit(monitor.watch(ds), epochs=3, steps_per_epoch=100, callbacks=[monitor])
      >>> monitor.result.host.input_wait, monitor.result.host.low, monitor.result.host.high
    """

    # Its on_train_batch_end only takes the time: Keras may keep dispatching batch-end
    # callbacks on its own threads (it stops when a callback is not async-safe), so the
    # training it measures runs as it does without it. On JAX that thread wakes when the
    # step's outputs are ready: the time the step was done on the device.
    async_safe = True

    def __init__(
        self, *, log_dir: str | None = None, warmup_steps: int = WARMUP_STEPS, verbose: int = 1
    ) -> None:
        super().__init__()
        if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int) or warmup_steps < 0:
            raise ConfigError(f"warmup_steps must be an int >= 0. Received: warmup_steps={warmup_steps!r}")
        if log_dir is not None and (not isinstance(log_dir, str) or not log_dir):
            raise ConfigError(f"log_dir must be a directory (str) or None. Received: log_dir={log_dir!r}")
        self.log_dir = log_dir
        self.warmup_steps = warmup_steps
        self.verbose = verbose
        self._stamps: Stamps | None = None
        self._fit: _Fit | None = None
        self._writer: SummaryWriter | None = None
        self.result: Result | None = None

    def watch(self, dataset: Dataset) -> Dataset:
        """`dataset`, its elements timestamped as the training step takes them (the elements
        are unchanged). Pass the result to `model.fit`, with this callback. Watch the training
        dataset only: batches taken from it outside fit's steps are not a step's."""
        if self._stamps is None:
            self._stamps = Stamps()
        return self._stamps.watch(dataset)

    # Keras's hooks.

    def on_train_begin(self, logs: Logs | None = None) -> None:
        backend = keras.backend.backend()
        spe = int(getattr(self.model, "steps_per_execution", 1) or 1)
        method = _method(self.model, backend)
        stamps = self._stamps or Stamps()
        self._stamps = stamps
        stamps.read()  # what fit read before training (building the model) is not a step's
        self._fit = _Fit(method, backend, spe, warmup_calls=math.ceil(self.warmup_steps / spe))
        self.result = None

    def on_epoch_begin(self, epoch: int, logs: Logs | None = None) -> None:
        if self._fit is not None:
            self._fit.epoch_begins(epoch)

    def on_train_batch_begin(self, batch: int, logs: Logs | None = None) -> None:
        fit = self._fit
        if fit is None:
            return
        j = fit.call_begins(batch, time.time())
        if j % fit.read_every == 0 or j == fit.check_at:
            fit.take(self._stamps.read())  # type: ignore[union-attr]
            if j >= fit.check_at and fit.rows_read == 0:
                raise ConfigError(
                    "InputWait saw no batch taken: model.fit is not reading the watched dataset. Pass "
                    "model.fit(monitor.watch(ds), callbacks=[monitor]) (the same InputWait). Received: "
                    f"{j} steps and no timestamps"
                )

    def on_train_batch_end(self, batch: int, logs: Logs | None = None) -> None:
        # On Keras's callback thread (see async_safe): only take the time.
        if self._fit is not None:
            self._fit.call_done(batch, time.time())

    def on_test_begin(self, logs: Logs | None = None) -> None:
        if self._fit is not None:
            self._fit.loop_ends(time.time())

    def on_epoch_end(self, epoch: int, logs: Logs | None = None) -> None:
        fit = self._fit
        if fit is None:
            return
        fit.loop_ends(time.time())
        fit.take(self._stamps.read())  # type: ignore[union-attr]
        got = fit.settle_epoch()
        if got is not None and logs is not None:
            logs["input_wait"] = got.input_wait
            if got.low is not None:
                logs["input_wait_low"], logs["input_wait_high"] = got.low, got.high
        self._write({"epoch_input_wait": got}, epoch)

    def on_train_end(self, logs: Logs | None = None) -> None:
        fit = self._fit
        if fit is None:
            return
        self._fit = None
        waits, periods, steps = fit.series()
        own = figure(waits, periods, steps)
        count = hosts.process_count()
        if count > 1:
            every_w, every_p = hosts.gather(waits, periods)
            each = tuple(figure(w, p, fit.spe) for w, p in zip(every_w, every_p, strict=True))
            job = figure(*job_series(every_w, every_p), fit.spe)
        else:
            each, job = (own,), own
        self.result = Result(
            backend=fit.backend,
            method=fit.method,
            host=own,
            hosts=each,
            job=job,
            epochs=tuple(fit.epoch_figures),
            lost_rows=self._stamps.lost if self._stamps is not None else 0,
        )
        if count > 1 and hosts.process_index() == 0:
            self._write({"job_input_wait": job}, len(fit.epoch_figures))
        if self.verbose:
            print(f"tfpipe.monitor: {self.result}")

    def _write(self, figures: dict[str, Figure | None], step: int) -> None:
        """TensorBoard scalars of `figures` at `step`, when log_dir is set."""
        if self.log_dir is None:
            return
        tf_ = tf()
        if self._writer is None:  # one events file for the monitor's life, as Keras's own callback
            count = hosts.process_count()
            sub = "train" if count == 1 else f"train-host-{hosts.process_index()}"
            self._writer = tf_.summary.create_file_writer(os.path.join(self.log_dir, sub))
        writer = self._writer
        with writer.as_default():
            for name, got in figures.items():
                if got is None:
                    continue
                _scalar(name, got.input_wait, step)
                if got.low is not None:
                    _scalar(f"{name}_low", got.low, step)
                    _scalar(f"{name}_high", got.high, step)  # type: ignore[arg-type]
        writer.flush()


def _scalar(name: str, value: float, step: int) -> None:
    """A TensorBoard scalar, as `tf.summary.scalar` writes it (the "scalars" plugin's metadata),
    without needing the tensorboard package that `tf.summary.scalar` imports."""
    from tensorflow.core.framework import summary_pb2

    metadata = summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
    )
    tf().summary.write(name, tf().constant(value, tf().float32), step=step, metadata=metadata)


def _method(model: keras.Model, backend: str) -> Method:
    """How this fit's steps meet their batches (see timeline), or a refusal by name."""
    if backend == "jax":
        return "window"
    if backend != "tensorflow":
        raise ConfigError(
            f"InputWait measures Keras's TensorFlow and JAX backends, which read tf.data. Received: backend={backend!r}"
        )
    strategy = model.distribute_strategy
    return "window" if type(strategy).__name__.startswith("_DefaultDistributionStrategy") else "buffered"


@dataclasses.dataclass
class _Fit:
    """One fit's timestamps: the epoch's under way, and what earlier epochs came to."""

    method: Method
    backend: str
    spe: int
    warmup_calls: int
    epoch_figures: list[Figure | None] = dataclasses.field(default_factory=list)
    rows_read: int = 0
    _before: int = 0  # calls in the epochs settled
    _begins: list[float] = dataclasses.field(default_factory=list)  # this epoch's calls
    _done: dict[int, float] = dataclasses.field(default_factory=dict)  # by this epoch's call
    _by_batch: dict[int, int] = dataclasses.field(default_factory=dict)
    _loop_end: float = math.nan
    _rows: list[np.ndarray] = dataclasses.field(default_factory=list)
    _deliveries: Deliveries = dataclasses.field(default_factory=Deliveries)
    _waits: list[np.ndarray] = dataclasses.field(default_factory=list)
    _periods: list[np.ndarray] = dataclasses.field(default_factory=list)
    _steps: list[np.ndarray] = dataclasses.field(default_factory=list)

    @property
    def check_at(self) -> int:
        """The call at which some batch must have been taken from the watched dataset."""
        return max(1, self.warmup_calls)

    @property
    def read_every(self) -> int:
        """Calls between reads of the ring, so it never wraps between two."""
        return max(1, CAPACITY // (4 * self.spe))

    def epoch_begins(self, epoch: int) -> None:
        self._before += len(self._begins)
        self._begins, self._done, self._by_batch = [], {}, {}
        self._loop_end = math.nan

    def call_begins(self, batch: int, at: float) -> int:
        """Records a call's beginning; returns its number since fit began."""
        self._by_batch[batch + self.spe - 1] = len(self._begins)
        self._begins.append(at)
        return self._before + len(self._begins) - 1

    def call_done(self, batch: int, at: float) -> None:
        i = self._by_batch.get(batch)
        if i is not None:
            self._done[i] = at

    def loop_ends(self, at: float) -> None:
        if not math.isfinite(self._loop_end):
            self._loop_end = at

    def take(self, rows: np.ndarray) -> None:
        if len(rows):
            self._rows.append(rows)
            self.rows_read += len(rows)
            if self.method == "buffered":
                self._deliveries.add(rows)

    def settle_epoch(self) -> Figure | None:
        """This epoch's calls measured; the epoch's figure."""
        n = len(self._begins)
        if n == 0:
            self.epoch_figures.append(None)
            return None
        begin = np.array(self._begins)
        until = np.append(begin[1:], self._loop_end)
        # TensorFlow's calls are synchronous: each ends by the next one's beginning.
        jax = self.backend == "jax"
        done = np.array([self._done.get(i, math.nan) if jax else math.nan for i in range(n)])
        index = self._before + np.arange(n)
        calls = Calls(begin, until, done, np.arange(n) == 0, index)
        if self.method == "window":
            rows = np.concatenate(self._rows) if self._rows else np.zeros((0, 3))
            avail, asked = window_batches(rows, calls, self.spe)
        else:
            avail = self._deliveries.consumed(calls, self.spe)
            asked = np.full_like(avail, np.nan)
            self._deliveries.forget_before(begin[-1])
        self._rows = []
        waits, periods, steps = waits_and_periods(calls, avail, asked)
        measured = index >= self.warmup_calls
        waits, periods = np.where(measured, waits, np.nan), np.where(measured, periods, np.nan)
        self._waits.append(waits)
        self._periods.append(periods)
        self._steps.append(steps)
        got = figure(waits, periods, steps)
        self.epoch_figures.append(got)
        return got

    def series(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every call's wait, period and steps since fit began (NaN: not measured)."""
        if not self._waits:
            return np.zeros(0), np.zeros(0), np.zeros(0, np.int64)
        return np.concatenate(self._waits), np.concatenate(self._periods), np.concatenate(self._steps)

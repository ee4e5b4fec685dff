"""The monitor's figures: the share of step time spent waiting for input, with its interval,
from per-step waits and periods. Pure arithmetic on NumPy arrays (no TensorFlow, no Keras).

A run's steps are not independent draws: a pipeline's buffers carry a slow stretch over
several steps. So the interval comes from batch means: the steps, in order, are cut into
contiguous blocks, and the spread of the blocks' figures (the ratio estimator's delta method
over block sums) gives a Student-t interval. Contiguous blocks keep the correlation between
neighbouring steps inside a block, which is what independent-step formulas get wrong.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

# The steps are cut into at most this many blocks for the interval, each of at least
# MIN_BLOCK_STEPS measured steps; fewer than MIN_BLOCKS blocks give no interval.
MAX_BLOCKS = 20
MIN_BLOCK_STEPS = 5
MIN_BLOCKS = 4
# Two-sided 95% Student-t quantiles by degrees of freedom (blocks - 1).
_T95 = {
    3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228, 11: 2.201,
    12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093,
}  # fmt: skip


@dataclasses.dataclass(frozen=True, slots=True)
class Figure:
    """The share of step time spent waiting for input over a run of steps.

    Attributes:
      input_wait: the time the steps waited for their batch over their whole time (0..1).
      low, high: its 95% interval from batch means of the steps in order (None with fewer than
        MIN_BLOCKS x MIN_BLOCK_STEPS steps measured).
      steps: steps measured (after warm-up).
      wait_ms: mean wait per step, ms.
      step_ms: mean step time (wait included), ms.
    """

    input_wait: float
    low: float | None
    high: float | None
    steps: int
    wait_ms: float
    step_ms: float

    def __str__(self) -> str:
        low, high = self.low, self.high
        interval = "" if low is None or high is None else f" [{100 * low:.1f}, {100 * high:.1f}]"
        return (
            f"input wait {100 * self.input_wait:.1f}%{interval} of step time: {self.wait_ms:.2f} ms of "
            f"{self.step_ms:.2f} ms per step over {self.steps} steps"
        )


def figure(waits: np.ndarray, periods: np.ndarray, steps: np.ndarray | int = 1) -> Figure | None:
    """The Figure of calls that waited `waits` seconds within `periods` seconds each.

    Args:
      waits, periods: per call of the train function, in order; NaN where a call was not
        measured (it is left out).
      steps: the steps each call ran (Keras's steps_per_execution), per call or for all.

    Returns:
      The Figure, or None when no call was measured.
    """
    per_call = np.broadcast_to(np.asarray(steps, dtype=float), np.shape(waits))
    ok = np.isfinite(waits) & np.isfinite(periods) & (periods > 0)
    w, p, n = np.minimum(waits[ok], periods[ok]), periods[ok], per_call[ok]
    if len(p) == 0:
        return None
    total, count = float(p.sum()), int(n.sum())
    share = float(w.sum()) / total
    low = high = None
    blocks = min(MAX_BLOCKS, count // MIN_BLOCK_STEPS, len(p))
    if blocks >= MIN_BLOCKS:
        cuts = np.array_split(np.arange(len(p)), blocks)
        wb = np.array([w[c].sum() for c in cuts])
        pb = np.array([p[c].sum() for c in cuts])
        # The ratio estimator's variance from block sums (delta method).
        var = float(((wb - share * pb) ** 2).sum()) / (blocks * (blocks - 1)) / float(pb.mean()) ** 2
        half = _T95[blocks - 1] * math.sqrt(var)
        low, high = max(0.0, share - half), min(1.0, share + half)
    return Figure(
        input_wait=share,
        low=low,
        high=high,
        steps=count,
        wait_ms=1000.0 * float(w.sum()) / count,
        step_ms=1000.0 * total / count,
    )


def job_series(waits: np.ndarray, periods: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The job's per-call waits and periods from every host's, `[hosts, calls]` each.

    In synchronous data-parallel training every step ends when the slowest host's ends: a
    host that waits for its batch holds the others at the step's collective, where their
    wait reads as compute. So the job waited, at each step, as long as the host that waited
    longest, and the step took as long as the longest. Calls a host did not measure (NaN)
    are left out of the job's.
    """
    if waits.ndim != 2 or waits.shape != periods.shape:
        raise ValueError(
            f"hosts' series must be [hosts, calls] alike. Received: {waits.shape}, {periods.shape}"
        )
    measured = np.isfinite(waits).all(axis=0) & np.isfinite(periods).all(axis=0)
    w = np.where(measured, np.max(np.where(measured, waits, 0.0), axis=0), np.nan)
    p = np.where(measured, np.max(np.where(measured, periods, 0.0), axis=0), np.nan)
    return w, p


@dataclasses.dataclass(frozen=True, slots=True)
class Result:
    """What `InputWait` measured in one `model.fit`.

    Attributes:
      backend: Keras's backend, "tensorflow" or "jax".
      method: how a step meets its batch: "window" (the step's own thread takes it from the
        pipeline: TensorFlow without a strategy, JAX) or "buffered" (a tf.distribute
        strategy's input thread fills a buffer on the devices).
      host: this host's figure (None: no step measured after warm-up).
      hosts: every host's, by JAX process index (this one's alone when not JAX processes).
      job: the job's: at each step the host that waited longest sets the step.
      epochs: this host's figure per epoch.
      lost_rows: timestamps written over before they were read (0 unless the dataset was
        also read outside fit's steps).
    """

    backend: str
    method: str
    host: Figure | None
    hosts: tuple[Figure | None, ...]
    job: Figure | None
    epochs: tuple[Figure | None, ...]
    lost_rows: int = 0

    def __str__(self) -> str:
        if len(self.hosts) == 1:
            return str(self.host) if self.host is not None else "no step measured (all in warm-up)"
        each = "; ".join(f"host {i}: {f}" for i, f in enumerate(self.hosts))
        return f"job ({len(self.hosts)} hosts, the slowest sets each step): {self.job}; {each}"

"""Each train call's wait for input and its whole time, from the monitor's timestamps. NumPy
only: no TensorFlow, no Keras.

The timestamps (seconds on one clock: `time.time()` and `tf.timestamp()` agree to microseconds):

- fetches `[k, asked, got]`, taken inside tf.data at the end of the watched pipeline, one row
  per element: its index in its iterator (0 starts a new iterator), when the consumer asked
  for it and when it got it;
- calls of Keras's train function: when each began (`on_train_batch_begin`), until when it ran
  at the latest (the next call's beginning, or its epoch's end), and, on JAX, when its last
  step was done on the device (a batch-end callback runs once the step's outputs are ready).

The device (an accelerator, or the CPU's threads running the step) runs a call's steps one
after another. Step i starts when the step before it is done and its batch is there:

    start_i = max(done_(i-1), avail_i)      wait_i = max(0, avail_i - max(done_(i-1), asked_i))

- The device is free for a call's first step from the call's beginning (TensorFlow: the call
  before it returned; a call is synchronous) or from the last step of the call before (JAX:
  the step is dispatched asynchronously, and Python runs ahead fetching while the device
  computes: a fetch then costs the device nothing).
- A batch is there (avail) when the step's own thread got it from the pipeline ("window":
  TensorFlow without a strategy takes it with `get_next` inside the train function, JAX in
  Python before dispatching), or, under a tf.distribute strategy that prefetches to its
  devices ("buffered"), when the pipeline delivered the element the step consumes to the
  strategy's input thread (the wait at the pipeline's end is then that thread's, not the
  step's). `asked` keeps a window fetch's wait from counting time before it was asked for.
- With several steps in one call (`steps_per_execution`), only the call's bounds are seen,
  not each step's end: the steps of one call are taken to compute equally long (one compiled
  program on batches of one shape), and that length is the one that makes the steps end when
  the call does. With one step a call, nothing is assumed.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np

Method = Literal["window", "buffered"]
# Bisection steps for a call's compute time: 2^-40 of the call, far below a microsecond.
_BISECT = 40


@dataclasses.dataclass(frozen=True)
class Calls:
    """Train-function calls in order.

    Attributes:
      begin: when each call began (s).
      until: when it ended at the latest: the next call's beginning, or its epoch's end.
      done: when its last step was done on the device (NaN: not known; TensorFlow's calls
        are synchronous, so they end by `until`).
      first: whether it is the first call of its epoch (the device was idle before it).
      index: each call's number since fit began.
    """

    begin: np.ndarray
    until: np.ndarray
    done: np.ndarray
    first: np.ndarray
    index: np.ndarray

    def steps_done(self) -> np.ndarray:
        """`done`, each no later than any later call's: the device runs the calls in order, so a
        call's end taken after the next one's was taken late (its thread woke late)."""
        done = self.done[::-1].copy()
        known = np.isfinite(done)
        done[known] = np.minimum.accumulate(done[known])
        return done[::-1]

    def device_free(self) -> np.ndarray:
        """When the device was free for each call's first step."""
        prev_done = np.concatenate([[np.nan], self.steps_done()[:-1]])
        return np.where(self.first | ~np.isfinite(prev_done), self.begin, prev_done)

    def end(self) -> np.ndarray:
        """When each call's last step was done."""
        done = self.steps_done()
        return np.where(np.isfinite(done), done, self.until)


def window_batches(fetches: np.ndarray, calls: Calls, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """The batches each call's own thread fetched, `[calls, steps]` of (avail, asked): the
    fetches asked for within the call (NaN where a call fetched fewer, e.g. at the end of
    data; with more, its last `steps`)."""
    avail = np.full((len(calls.begin), steps), np.nan)
    asked = np.full((len(calls.begin), steps), np.nan)
    if not len(fetches):
        return avail, asked
    order = np.argsort(fetches[:, 1], kind="stable")
    t_asked, t_got = fetches[order, 1], fetches[order, 2]
    j = np.searchsorted(calls.begin, t_asked, side="right") - 1
    inside = (j >= 0) & (t_asked < calls.until[np.maximum(j, 0)])
    for call in np.unique(j[inside]):
        rows = np.flatnonzero(inside & (j == call))[-steps:]
        avail[call, : len(rows)] = t_got[rows]
        asked[call, : len(rows)] = t_asked[rows]
    return avail, asked


def waits_and_periods(
    calls: Calls, avail: np.ndarray, asked: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per call: the seconds its steps waited for input, the seconds it took from the device
    being free to its last step done, and its steps (see the module doc).

    Args:
      calls: the calls.
      avail, asked: `[calls, steps]`: when each step's batch was there, and when its fetch
        was asked for (NaN: "buffered", or a step the call did not run).

    Returns:
      (waits, periods, steps); NaN wait and period where a call's batches were not recorded.
    """
    free, end = calls.device_free(), calls.end()
    ran = np.isfinite(avail)
    steps = ran.sum(axis=1)
    ok = (steps > 0) & np.isfinite(free) & np.isfinite(end) & (end > free)
    # Each call's compute per step: the one that ends its last step when the call ends.
    lo, hi = np.zeros(len(free)), np.where(ok, end - free, 0.0)
    for _ in range(_BISECT):
        mid = (lo + hi) / 2
        late = _simulate(free, avail, asked, mid)[1] > end
        hi, lo = np.where(late, mid, hi), np.where(late, lo, mid)
    waits, _ = _simulate(free, avail, asked, lo)
    return np.where(ok, waits, np.nan), np.where(ok, end - free, np.nan), steps


def _simulate(
    free: np.ndarray, avail: np.ndarray, asked: np.ndarray, compute: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Runs each call's steps at `compute` seconds each: (total wait, when the last is done)."""
    ready = free.copy()
    wait = np.zeros(len(free))
    for i in range(avail.shape[1]):
        a = avail[:, i]
        ran = np.isfinite(a)
        since = np.fmax(ready, asked[:, i])  # fmax: a NaN `asked` leaves `ready`
        wait += np.where(ran, np.maximum(0.0, a - since), 0.0)
        ready = np.where(ran, np.maximum(ready, a) + compute, ready)
    return wait, ready


class Deliveries:
    """The elements a strategy's input thread took from the pipeline, by iterator, and which
    of them each call's steps consumed ("buffered").

    Rows are cut into iterators: a row of index 0 starts one, and a row of index k continues
    the newest iterator that has k - 1 (rows of two iterators interleave while an abandoned
    one's prefetching thread finishes). A call consumes from the newest iterator that had
    started asking before the call ended (one fit makes before training, to build the model,
    started earlier and is left behind), `steps` elements a call, in order, from the first
    call since that iterator took over.
    """

    def __init__(self) -> None:
        self._got: list[list[float]] = []  # per iterator, when each element was delivered
        self._first_asked: list[float] = []
        self._took_over: dict[int, int] = {}  # iterator -> the first call that consumed from it

    def add(self, fetches: np.ndarray) -> None:
        for k, asked, got in fetches:
            if k == 0:
                self._got.append([got])
                self._first_asked.append(asked)
                continue
            for times in reversed(self._got):
                if len(times) == k:
                    times.append(got)
                    break

    def consumed(self, calls: Calls, steps: int) -> np.ndarray:
        """`[calls, steps]`: when the element each step consumed was delivered (NaN: not
        recorded)."""
        out = np.full((len(calls.begin), steps), np.nan)
        current = np.searchsorted(np.array(self._first_asked), calls.until, side="left") - 1
        for j, (number, it) in enumerate(zip(calls.index, current, strict=True)):
            if it < 0 or not np.isfinite(calls.until[j]):
                continue
            first = (int(number) - self._took_over.setdefault(int(it), int(number))) * steps
            got = self._got[it][first : first + steps]
            out[j, : len(got)] = got
        return out

    def forget_before(self, at: float) -> None:
        """Drops the elements of the iterators started before `at` but the newest of them:
        later calls consume only from it or from newer ones."""
        keep = max(0, int(np.searchsorted(np.array(self._first_asked), at)) - 1)
        for i in range(keep):
            self._got[i] = []

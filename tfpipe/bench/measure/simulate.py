"""Ground truth for the prediction: a sleeping consumer (--simulate) and real model.fit (--fit,
its wait measured by `tfpipe.monitor.InputWait`, as in the user's own training).

`simulate` runs the full pipeline against a consumer that holds each batch for the step time
while sleeping, so like an accelerator it takes no host CPU from the producer, and measures
the share of time spent waiting for the next batch.

What makes prediction and measurement agree: both describe the same producer under the same
conditions. One iterator of `pipeline.dataset()` (same stages, prefetch, threadpool, autotune
state) alternates between producer phases, pulled as fast as it yields (the prediction's
rate), and consumer phases, held for the step time (the measured wait). Alternating in rounds
of about a second means load from other processes on the host hits both alike; a producer
rate measured minutes earlier would describe a different machine. Waits are timed inside
TensorFlow around GetNext, as a device's infeed sees them, not around a Python call that
costs ~1-3 ms on a busy host. (GetNext itself still takes ~0.3-1 ms there while tf.data's
threads hold every core, so steps shorter than ~20 ms read a few percent of wait that a
device with its own infeed thread would partly hide.) Warm-up is excluded, and so are each consumer phase's steps
until the buffers refill (after a producer phase they are empty, which a steady consumer never
sees when the producer is faster). The consumer keeps one schedule, so a sleep's overshoot does
not slow it below batch/step (see `_consume`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from tfpipe._tf import Tensor, tf
from tfpipe.bench.measure import models
from tfpipe.bench.results import FitCheck, Simulation
from tfpipe.bench.wait import predicted_wait

if TYPE_CHECKING:
    import tensorflow  # imported where a dataset is made (tfpipe._tf.tf())

    from tfpipe.pipeline import Pipeline

# Rounds of (producer phase, consumer phase) in a simulation.
ROUNDS = 4
# A consumer phase lasts at least this many steps, so skipping its first step leaves enough.
MIN_PHASE_STEPS = 5
MIN_PHASE_BATCHES = 3
# A pull that blocks this long (s) found the buffers empty: the producer is the limit again.
BLOCKED = 0.001
# A consumer phase's steps are measured once the buffers refill, or after this share of it.
REFILL_SHARE = 0.25


def simulate(pipeline: Pipeline, *, step_time_ms: float, seconds: float, warmup: float) -> Simulation:
    """Runs the full pipeline against a consumer that sleeps `step_time_ms` per batch.

    Args:
      pipeline: the planned Pipeline; its full dataset is consumed.
      step_time_ms: how long the consumer holds each batch.
      seconds: total consumer time measured (and as much producer time), over ROUNDS rounds;
        longer when a phase needs it to hold MIN_PHASE_STEPS steps and MIN_PHASE_BATCHES
        batches.
      warmup: seconds run before the first round, after the first batch, and left out.

    Returns:
      The Simulation: measured_input_wait is waiting time over consumer-phase time, next to
      the prediction from the producer phases' rate.
    """
    step = step_time_ms / 1000.0
    take = _taker()
    it = iter(pipeline.dataset())
    take(it)  # traces, and the first batch can take seconds (buffers fill): not timed
    t0 = time.perf_counter()
    pulled = 0
    while time.perf_counter() - t0 < warmup or pulled == 0:
        take(it)
        pulled += 1
    interval = (time.perf_counter() - t0) / pulled
    # Each phase holds several steps and several batches, so neither is cut into a few pieces.
    phase = max(seconds / ROUNDS, MIN_PHASE_STEPS * step, MIN_PHASE_BATCHES * interval)

    produced = produced_sec = wait = window = 0.0
    steps = 0
    for _ in range(ROUNDS):
        n, sec = _produce(take, it, phase)
        produced += n
        produced_sec += sec
        w, k, sec = _consume(take, it, step, phase)
        wait, steps, window = wait + w, steps + k, window + sec

    producer_eps = produced * pipeline.examples_per_element() / produced_sec
    consumer_eps = pipeline.batch_size / step
    return Simulation(
        step_time_ms=step_time_ms,
        steps=steps,
        window_sec=window,
        wait_sec=wait,
        producer_examples_per_sec=producer_eps,
        predicted_input_wait=predicted_wait(producer_eps, consumer_eps),
        measured_input_wait=min(1.0, max(0.0, wait / window)),
    )


def _taker() -> Callable[[tensorflow.data.Iterator], Tensor]:
    """A tf.function that takes one element and returns the seconds GetNext blocked."""
    tf_ = tf()

    @tf_.function
    def take(iterator: tensorflow.data.Iterator) -> Tensor:
        t0 = tf_.timestamp()
        with tf_.control_dependencies([t0]):
            element = iterator.get_next()
        with tf_.control_dependencies(tf_.nest.flatten(element)):
            return tf_.timestamp() - t0

    return take


def _produce(
    take: Callable[[tensorflow.data.Iterator], Tensor], it: tensorflow.data.Iterator, seconds: float
) -> tuple[int, float]:
    """Pulls as fast as the pipeline yields for `seconds`: (elements, seconds).

    Batches the consumer phase left in the buffers come out at once; counting starts at the
    first pull that had to wait for the producer (within `seconds`, else from the start).
    """
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        if float(take(it)) > BLOCKED:
            break
    start = time.perf_counter()
    n = 0
    while time.perf_counter() - start < seconds:
        take(it)
        n += 1
    return n, time.perf_counter() - start


def _consume(
    take: Callable[[tensorflow.data.Iterator], Tensor],
    it: tensorflow.data.Iterator,
    step: float,
    seconds: float,
) -> tuple[float, int, float]:
    """The sleeping consumer for `seconds` after the buffers refill: (wait, steps, seconds).

    A producer phase leaves the buffers empty, which a steady consumer of a faster producer
    never sees; text fills them a chunk of documents (hundreds of rows) at a time. So steps
    are held but not measured until one finds its batch waiting (or REFILL_SHARE of the phase
    has passed: a slower producer never refills them, and its waits are the steady state).

    Steps keep one schedule: each ends `step` plus the time waited after the one before it
    ended, whatever the call and the sleep cost. A sleep that overshoots (by 5-15 ms on a
    loaded host, measured for issue 34) is made up by the next step instead of slowing the
    consumer below batch/step, which read as less wait than the prediction for that consumer.
    When the loop cannot keep the schedule at all (steps shorter than the call that takes a
    batch), the window says so: `Simulation.consumer_step_ms` is longer than the step.
    """
    refilled = time.perf_counter() + REFILL_SHARE * seconds
    while True:
        t = time.perf_counter()
        waited = float(take(it))
        time.sleep(max(0.0, t + step + waited - time.perf_counter()))
        if waited <= BLOCKED or time.perf_counter() >= refilled:
            break
    start = time.perf_counter()
    deadline = start + step
    wait, steps = 0.0, 0
    while time.perf_counter() - start < seconds or steps == 0:
        waited = float(take(it))
        deadline += waited
        remaining = deadline - time.perf_counter()
        if remaining > 0:
            time.sleep(remaining)
        # Made up at most one step late: a device that stalled does not then take a burst.
        deadline = max(deadline, time.perf_counter() - step) + step
        wait += waited
        steps += 1
    return wait, steps, time.perf_counter() - start


def fit_check(
    pipeline: Pipeline,
    model_name: str,
    *,
    num_classes: int,
    seconds: float,
    warmup: float,
    device: models.Device | None = None,
) -> FitCheck:
    """`model.fit` of `model_name` on the real pipeline, its wait for input measured by
    `tfpipe.monitor.InputWait`, beside the same model on a batch repeated from memory
    (synthetic input, no pipeline work): the differential method, max(0, 1 - synthetic / real),
    which also counts the compute the model loses to the pipeline where they share cores.
    """
    setup = models.model_on_device(model_name, pipeline, num_classes=num_classes, device=device)
    with setup.device.fit_scope():
        syn_step, _ = models.fit_step_seconds(setup.model, setup.synthetic, seconds=seconds)
        # Warm the real pipeline as long as the producer measurements do before measuring it.
        warm_steps = max(2, int(warmup / max(syn_step, 1e-3)))
        got = models.monitored_fit(setup.model, setup.real, seconds=seconds, warmup_steps=warm_steps)
    real_step = got.step_ms / 1000.0
    differential = max(0.0, min(1.0, 1.0 - syn_step / real_step))
    return FitCheck(
        model=model_name,
        device=setup.device.name,
        steps=got.steps,
        real_step_ms=got.step_ms,
        synthetic_step_ms=syn_step * 1000.0,
        measured_input_wait=got.input_wait,
        input_wait_low=got.low,
        input_wait_high=got.high,
        differential_input_wait=differential,
        contention=differential - got.input_wait,
    )

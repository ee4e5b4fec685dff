"""Ground truth for the prediction: a sleeping consumer (--simulate) and real model.fit (--fit).

`simulate` runs the full pipeline against a consumer that holds each batch for the step time
while sleeping, so like an accelerator it takes no host CPU from the producer. It measures the
share of time spent waiting for the next batch. The producer rate behind the prediction is
measured on the same `pipeline.dataset()` (same stages, prefetch and threadpool), and both
leave out a warm-up, so the two numbers describe the same steady state.
"""

from __future__ import annotations

import time
from typing import Any

from tfpipe.bench.report import FitCheck, Simulation


def simulate(pipeline: Any, *, step_time_ms: float, seconds: float, warmup: float) -> Simulation:
    """Runs the full pipeline against a consumer that sleeps `step_time_ms` per batch.

    The producer rate behind the prediction is measured right before and right after the
    simulated run, on the same `pipeline.dataset()`, and averaged: the host's load drifts, and
    a rate measured minutes earlier would compare two different machines.

    Args:
      pipeline: the planned Pipeline; its full dataset is consumed.
      step_time_ms: how long the consumer holds each batch.
      seconds: the timed window, for the run and for each producer measurement.
      warmup: seconds run before each window, and left out.

    Returns:
      The Simulation: measured_input_wait is waiting time over window time, next to the
      prediction from the bracketing producer rate.
    """
    from tfpipe.bench import producer, verdict

    def producer_rate() -> float:
        rate = producer.measure(
            pipeline.dataset, examples_per_element=pipeline.examples_per_element(), seconds=seconds, warmup=warmup
        )
        return rate.examples_per_sec

    before = producer_rate()
    wait, steps, window = _consume(pipeline.dataset(), step_time_ms / 1000.0, seconds, warmup)
    after = producer_rate()
    produced = (before + after) / 2
    consumed = pipeline.batch_size / (step_time_ms / 1000.0)
    return Simulation(
        step_time_ms=step_time_ms,
        steps=steps,
        window_sec=window,
        wait_sec=wait,
        producer_examples_per_sec=produced,
        predicted_input_wait=verdict.predicted_wait(produced, consumed),
        measured_input_wait=min(1.0, max(0.0, wait / window)),
    )


def _consume(ds: Any, step: float, seconds: float, warmup: float) -> tuple[float, int, float]:
    """The sleeping consumer: returns (seconds waiting, steps, window seconds)."""
    it = iter(ds)
    t0 = time.perf_counter()
    # The warm-up runs at the consumer's pace too, so buffers reach the state they keep in
    # the window: full when the producer is faster, empty when it is slower.
    while time.perf_counter() - t0 < warmup:
        _step(it, step)
    w0 = time.perf_counter()
    wait, steps = 0.0, 0
    while True:
        wait += _step(it, step)
        steps += 1
        if time.perf_counter() - w0 >= seconds and steps >= 3:
            break
    return wait, steps, time.perf_counter() - w0


def _step(it: Any, step: float) -> float:
    """Takes one batch, then sleeps for the step; returns the time spent waiting for it."""
    a = time.perf_counter()
    next(it)
    b = time.perf_counter()
    # Sleep to an absolute deadline so time spent in Python here does not add to the step.
    remaining = b + step - time.perf_counter()
    if remaining > 0:
        time.sleep(remaining)
    return b - a


def fit_check(
    pipeline: Any,
    model_name: str,
    *,
    num_classes: int,
    seconds: float,
    warmup: float,
    device: Any = None,
) -> FitCheck:
    """`model.fit` of `model_name` on the real pipeline, against the same model on a batch
    repeated from memory (synthetic input, no input pipeline work). The input wait is the
    share of the real step the synthetic one does not need: max(0, 1 - synthetic / real).
    """
    from tfpipe._tf import tf
    from tfpipe.bench import consumer

    tf_ = tf()
    device = device or consumer.discover_device()
    real = pipeline.dataset()
    batch = next(iter(real.take(1)))
    with device.strategy.scope():
        model = consumer.build_model(model_name, real.element_spec, num_classes)
    synthetic = tf_.data.Dataset.from_tensors(batch).repeat()
    syn_step, steps = consumer.fit_step_seconds(model, synthetic, seconds=seconds)
    # Warm the real pipeline as long as the producer measurements do before timing it.
    warm_steps = max(2, int(warmup / max(syn_step, 1e-3)))
    real_step, real_steps = consumer.fit_step_seconds(model, real, seconds=seconds, warmup_steps=warm_steps)
    return FitCheck(
        model=model_name,
        device=device.name,
        steps=real_steps,
        real_step_ms=real_step * 1000.0,
        synthetic_step_ms=syn_step * 1000.0,
        measured_input_wait=max(0.0, min(1.0, 1.0 - syn_step / real_step)),
    )

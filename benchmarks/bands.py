"""What the bench harnesses (images, text) share: --simulate aimed at each of the TF Profiler's
bands, the default run through the CLI, and the printed figures (their fixtures are in
conftest.py).

The step time is aimed at the band from the producer's measured rate; the simulation runs its
own producer phases, so it is retried (at most twice) only when the host's speed changed and
put the prediction in another band. Agreement itself is never retried.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

from tfpipe.bench import wait
from tfpipe.bench.measure import producer
from tfpipe.bench.measure.simulate import simulate
from tfpipe.bench.results import Simulation

# (target input wait, band): one case per band.
BANDS = [(0.0, "not_input_bound"), (0.12, "moderately_input_bound"), (0.5, "highly_input_bound")]


def simulate_in_band(
    pipe: Any, target: float, band: str, *, seconds: float, warmup: float, window: float
) -> list[Simulation]:
    """Simulations of `pipe` against a consumer aimed at `target` wait, until one predicts
    `band` (at most 3). `window`: each measurement's producer window; `seconds`: the
    simulation's (longer than the default: 2 s phases average out more of a shared host's load).
    """
    results: list[Simulation] = []
    for _ in range(3):
        rate = producer.measure(
            pipe.dataset, examples_per_element=pipe.batch_size, seconds=window, warmup=warmup
        )
        consumer = rate.examples_per_sec * 0.7 if target == 0 else rate.examples_per_sec / (1 - target)
        results.append(
            simulate(pipe, step_time_ms=pipe.batch_size / consumer * 1000, seconds=seconds, warmup=warmup)
        )
        if wait.band(results[-1].predicted_input_wait) == band:
            break
    return results


def default_cli_run(pipeline: str, cache_home: str, out: str, timeout: float) -> tuple[float, dict]:
    """(wall seconds, JSON report) of `tfpipe bench --pipeline=PIPELINE` with no --data, run as a
    new user runs it: a fresh process, its cache under `cache_home`, no TFPIPE_BENCH_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TFPIPE_BENCH_")}
    env["XDG_CACHE_HOME"] = cache_home
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "tfpipe", "bench", f"--pipeline={pipeline}", "--json", out, "--quiet"],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    wall = time.perf_counter() - start
    assert proc.returncode == 0, proc.stderr
    with open(out) as f:
        return wall, json.load(f)


def report(digits: int, name: str, **numbers: object) -> None:
    """Prints a harness's figures on one line, floats to `digits` places."""
    shown = (f"{k}={v:,.{digits}f}" if isinstance(v, float) else f"{k}={v}" for k, v in numbers.items())
    print(f"\n[{name}] " + ", ".join(shown))


def simulate_timed(benchmark: Any, pipe: Any, target: float, band: str, window: float, warmup: float):
    """(the last simulation, attempts) of `simulate_in_band` run once under pytest-benchmark,
    the simulation 4 windows long."""
    results: list[Simulation] = []

    def once() -> None:
        results.extend(simulate_in_band(pipe, target, band, seconds=4 * window, warmup=warmup, window=window))

    benchmark.pedantic(once, rounds=1, iterations=1)
    return results[-1], len(results)

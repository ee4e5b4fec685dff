"""A bench's producer measured once and shared, or given, for the tests of what a report says.

A bench measures its producer (a text pipeline's counts, every stage prefix, the scaling curve,
the storage reads) in `tfpipe.bench.run.measure_producer`, and what that returns depends on the
plan and the measuring options only, never on the consumer. A test of how a report reads a
profile, words its advice or writes its JSON needs no new measurement for each consumer:

- `bench_once`, a module-scoped fixture (registered by tests/conftest.py): the first bench of a
  plan in the module measures it for real, and every later bench planned alike (same data,
  preset, split, batch, hosts, cache, window, cores, text rows) is handed that measurement.
  A module takes it for all its tests with `pytestmark = pytest.mark.usefixtures("bench_once")`.
- `handing()`: every bench within is handed rates given for its plan's prefixes, not timed, for
  the fast lane's checks (a real measurement costs ~15 CPU-s).

Everything else a bench does (reading the profile, resolving the data, planning, finding the
consumer, the --simulate and --fit runs, concluding, rendering) runs as it always does.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator

import pytest

from tfpipe.bench import producer, run
from tfpipe.bench.config import BenchConfig
from tfpipe.bench.results import ProducerMeasurement, Rate, ScalingPoint, StageRate

# The BenchConfig fields the producer's measurement depends on, besides the global batch (the
# key holds BenchConfig.global_batch, which batch_size and the preset's default give).
MEASURING = (
    "pipeline",
    "data",
    "split",
    "hosts",
    "cache",
    "seconds",
    "warmup_seconds",
    "max_cores",
    "profile",
    "sequence_length",
    "packing",
    "truncate",
    "synthetic_examples",
    "workdir",
)
# The others: the consumer's, what runs after the producer is measured, the workers estimate.
CONSUMING = (
    "batch_size",
    "step_time_ms",
    "model",
    "accelerator",
    "from_profile",
    "profile_run",
    "simulate",
    "fit",
    "compare",
    "worker_cores",
)
# A field BenchConfig gains must be put in one of the two, or two plans could share a measurement.
assert {f.name for f in dataclasses.fields(BenchConfig)} == {*MEASURING, *CONSUMING}


def key(cfg, source) -> tuple:
    """What a measurement depends on: the data as resolved (a generated dataset's folder too),
    the global batch, and the measuring fields."""
    return (source.root, source.split, cfg.global_batch, *(getattr(cfg, name) for name in MEASURING))


@pytest.fixture(scope="module")
def bench_once():
    """Within the module, a bench planned as an earlier one reuses its measurement. Yields the
    list of every measurement the module's benches asked for (their keys, in order, reused or
    not): a test that expects a refusal before anything is measured checks it did not grow."""
    measured: dict[tuple, object] = {}
    asked: list[tuple] = []
    real = run.measure_producer

    def once(pipe, cfg, source, say):
        k = key(cfg, source)
        asked.append(k)
        if k not in measured:
            measured[k] = real(pipe, cfg, source, say)
        return measured[k]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(run, "measure_producer", once)
        yield asked


def given(pipe, cfg, examples_per_sec: float) -> ProducerMeasurement:
    """Rates given, not timed, for `pipe`'s own stage prefixes: each prefix a little faster than
    the next, the whole pipeline at `examples_per_sec`, on fewer cores slower; when it caches,
    the read prefix uncached and the first epoch slower. Not a text pipeline's (its rows must be
    counted)."""
    points = producer.prefix_points(pipe.stages)

    def rate(eps: float, upto: int) -> Rate:
        per_element = pipe.examples_per_element(upto)
        return Rate(eps, eps / per_element, int(eps / per_element), 1.0, 0.4, 0.5, 1000 / eps, 1.0)

    stages = tuple(
        StageRate(name, added, upto, rate(examples_per_sec * 1.05 ** (len(points) - 1 - k), upto))
        for k, (name, upto, added) in enumerate(points)
    )
    whole = len(pipe.stages)
    # The curve's points as bench picks them; the one at the pipeline's own pool is the producer.
    own = producer.available_cores()
    curve = tuple(
        ScalingPoint.of(c, stages[-1].rate if c == own else rate(examples_per_sec * c / (own + 1), whole))
        for c in producer.core_counts(cfg.max_cores or own)
    )
    if pipe.cache == "none":  # the read prefix is the storage's rate; no first epoch apart
        return ProducerMeasurement(None, stages, curve, stages[0].rate, None)
    # Cached: the read prefix again without the cache, and the first epoch, which fills it.
    read = rate(stages[0].rate.examples_per_sec * 0.8, points[0][1])
    return ProducerMeasurement(None, stages, curve, read, rate(examples_per_sec * 0.7, whole))


@contextlib.contextmanager
def handing(examples_per_sec: float = 400.0) -> Iterator[None]:
    """Within, every bench is handed rates `given` for its plan instead of timing them."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            run, "measure_producer", lambda pipe, cfg, source, say: given(pipe, cfg, examples_per_sec)
        )
        yield

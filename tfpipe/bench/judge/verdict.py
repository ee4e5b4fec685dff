"""The verdict's arithmetic on measured rates: the bottleneck stage, the cores and tf.data
service workers needed. No TensorFlow, no clocks, no advice (that is `advice.py`).

Everything here takes numbers and returns numbers or small frozen dataclasses, so the rules
are tested with integers alone. The input wait and its bands are `wait.py`'s.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence

from tfpipe.bench.results import Storage
from tfpipe.errors import ConfigError, field_error


@dataclasses.dataclass(frozen=True, slots=True)
class Bottleneck:
    """The stage prefix that adds the most cost per example.

    Attributes:
      stage: the prefix's name (a stage group such as "decode"), or "" when unknown or when the
        measurement is too noisy to name one (`basis` "noisy").
      examples_per_sec: the prefix's measured throughput.
      ms_per_example: the cost this prefix adds per example, in milliseconds: time per example
        when `basis` is "throughput", CPU time per example when "cpu".
      share: that cost as a share of the full pipeline's (0..1).
      drop: throughput lost at this prefix, as a share of the previous prefix's (0..1).
      basis: how it was ranked: "throughput" (time per example, where the CPU cost agrees or
        was not measured), "cpu" (CPU per example, where throughput disagrees), "noisy"
        (throughput and CPU disagree and the CPU costs are too close to name one).
      harness: prefixes that ran slower than a longer prefix: their throughput carries a cost
        of timing them alone (the loop taking elements, no prefetch after them) that training
        does not pay, so it names no bottleneck.
    """

    stage: str
    examples_per_sec: float
    ms_per_example: float
    share: float
    drop: float
    basis: str = "throughput"
    harness: tuple[str, ...] = ()


# A prefix is slower than a longer one (a harness cost) when its rate is below the longer
# prefix's by more than this share; the window-to-window spread of one rate under load is ~10%.
SLOWER_BY = 0.10
# Ranked by CPU, the costliest stage is named when its added CPU is at least this multiple of
# the next one's; closer, load can swap them (CPU per example moves ~5-10% between runs).
CLEAR_BY = 1.5


def bottleneck(stages: Sequence[tuple[str, float]], cpu_ms: Sequence[float] | None = None) -> Bottleneck:
    """Finds the prefix that adds the most cost per example.

    A pipeline's time per example is roughly the sum of its stages' costs, so the stage that
    costs most is the one that adds the most `1/rate` over the prefix before it. That is the
    largest fall in throughput measured in time, not in examples/s: going from 50,000/s to
    20,000/s costs 0.03 ms, going from 20,000/s to 300/s costs 3.3 ms.

    Throughput moves with load, and a prefix timed alone can run slower than a longer one
    (its figure then carries the harness's own cost). Where that happens, or where the CPU
    cost per example (which load barely moves) names another stage, the stages are ranked by
    the CPU each adds; when the two costliest are within CLEAR_BY of each other, no stage is
    named (`basis` "noisy").

    Args:
      stages: (name, examples_per_sec) for each prefix in pipeline order; the first prefix's
        cost is measured from nothing.
      cpu_ms: each prefix's CPU milliseconds per example (cumulative), in the same order; None
        ranks by throughput alone.

    Returns:
      The prefix with the largest added cost; ties go to the earlier prefix.
    """
    if not stages:
        return Bottleneck("", 0.0, 0.0, 0.0, 0.0)
    costs = _added_costs(stages)
    i = _costliest(costs)
    harness = slower_than_longer(stages)
    if cpu_ms is None:
        return _at(stages, costs, i, harness=harness)
    cpu = _added_cpu(stages, cpu_ms)
    j = _costliest(cpu)
    if not harness and i == j:
        return _at(stages, costs, i)
    ranked = sorted(cpu, reverse=True)
    if len(ranked) > 1 and ranked[0] < CLEAR_BY * ranked[1]:
        return Bottleneck("", 0.0, 0.0, 0.0, 0.0, basis="noisy", harness=harness)
    total = max(max(cpu_ms), 1e-30)
    prev_eps = stages[j - 1][1] if j > 0 else math.inf
    drop = 0.0 if prev_eps == math.inf else max(0.0, 1.0 - stages[j][1] / prev_eps)
    return Bottleneck(stages[j][0], stages[j][1], cpu[j], min(1.0, cpu[j] / total), drop, "cpu", harness)


def slower_than_longer(stages: Sequence[tuple[str, float]]) -> tuple[str, ...]:
    """Prefixes whose throughput is below a longer prefix's by more than SLOWER_BY."""
    return tuple(
        name
        for k, (name, eps) in enumerate(stages)
        if any(eps < later * (1 - SLOWER_BY) for _, later in stages[k + 1 :])
    )


def _costliest(costs: Sequence[float]) -> int:
    return max(range(len(costs)), key=lambda k: (costs[k], -k))


def _added_cpu(stages: Sequence[tuple[str, float]], cpu_ms: Sequence[float]) -> list[float]:
    """CPU milliseconds per example each prefix adds to the costliest prefix before it."""
    if len(cpu_ms) != len(stages):
        raise ConfigError(f"Expected a CPU cost for each of {len(stages)} prefixes. Received: {list(cpu_ms)}")
    out: list[float] = []
    previous = 0.0
    for (name, _), ms in zip(stages, cpu_ms, strict=True):
        if ms < 0 or not math.isfinite(ms):
            raise ConfigError(f"Stage {name!r}: expected a CPU cost >= 0 ms per example. Received: {ms!r}")
        out.append(max(0.0, ms - previous))
        previous = max(previous, ms)
    return out


def stage_cost(stages: Sequence[tuple[str, float]], name: str) -> Bottleneck:
    """The prefix called `name`, described as `bottleneck` describes the costliest one."""
    names = [n for n, _ in stages]
    if name not in names:
        raise ConfigError(f"Expected a stage prefix named one of {names}. Received: {name!r}")
    return _at(stages, _added_costs(stages), names.index(name))


def _added_costs(stages: Sequence[tuple[str, float]]) -> list[float]:
    """Seconds per example each prefix adds to the one before it."""
    for name, eps in stages:
        if not eps > 0 or not math.isfinite(eps):
            raise ConfigError(f"Stage {name!r}: expected a positive throughput. Received: {eps!r}")
    costs: list[float] = []
    previous = 0.0
    for _, eps in stages:
        per_example = 1.0 / eps
        # A later prefix measured slightly faster than an earlier one is noise, not negative cost.
        costs.append(max(0.0, per_example - previous))
        previous = max(previous, per_example)
    return costs


def _at(
    stages: Sequence[tuple[str, float]], costs: list[float], i: int, *, harness: tuple[str, ...] = ()
) -> Bottleneck:
    total = max(max(1.0 / eps for _, eps in stages), 1e-30)
    prev_eps = stages[i - 1][1] if i > 0 else math.inf
    drop = 0.0 if prev_eps == math.inf else max(0.0, 1.0 - stages[i][1] / prev_eps)
    share = min(1.0, costs[i] / total)
    return Bottleneck(stages[i][0], stages[i][1], costs[i] * 1000.0, share, drop, "throughput", harness)


def storage_bound(storage: Storage | None, consumer_eps: float) -> bool:
    """True when reading from storage, as every epoch does without a cache, cannot feed the
    consumer: no CPU added to the later stages helps."""
    return storage is not None and not storage.cached and storage.examples_per_sec < consumer_eps


@dataclasses.dataclass(frozen=True, slots=True)
class CoresEstimate:
    """How many CPU cores one host needs to feed its consumer.

    Attributes:
      cores: cores needed so the producer keeps up (0 if the consumer rate is 0); None when the
        consumer needs more than the curve reached and the curve does not rise with cores:
        it cannot be extrapolated.
      available: the most cores measured on this host.
      per_core_eps: examples/s one core produces.
      efficiency: measured rate at `available` cores over `available` x the one-core rate.
      extrapolated: True when `cores` lies beyond the measured range.
      rises: False when the rate at the most cores is not above the rate at fewer by
        RISES_BY: adding cores did not help here (a falling curve on a busy host, or a serial
        stage), and nothing beyond it is extrapolated.
    """

    cores: int | None
    available: int
    per_core_eps: float
    efficiency: float
    extrapolated: bool
    rises: bool = True

    @property
    def enough(self) -> bool:
        return self.cores is not None and self.cores <= self.available


# The curve rises when the rate at its most cores beats every rate at fewer by this share; the
# window-to-window spread of one rate under load is ~10% (see SLOWER_BY).
RISES_BY = 0.10


def curve_rises(scaling: Sequence[tuple[int, float]]) -> bool:
    """True when the rate at the most cores is above the best rate at fewer cores by more than
    RISES_BY (a single point rises: linear from it is all there is)."""
    points = _curve(scaling)
    return len(points) < 2 or points[-1][1] > max(r for _, r in points[:-1]) * (1 + RISES_BY)


def _curve(scaling: Sequence[tuple[int, float]]) -> list[tuple[int, float]]:
    points = sorted((int(c), float(r)) for c, r in scaling)
    if not points:
        raise ConfigError("Expected at least one (cores, examples_per_sec) scaling point. Received: []")
    for c, r in points:
        if c < 1 or not r > 0 or not math.isfinite(r):
            raise ConfigError(f"Scaling point: expected cores >= 1 and a positive rate. Received: ({c}, {r})")
    return points


def per_core_rate(scaling: Sequence[tuple[int, float]]) -> float:
    """Examples/s from one core: the one-core point when measured, else the lowest point's
    average per core."""
    c, r = _curve(scaling)[0]
    return r / c


def rate_at(cores: float, scaling: Sequence[tuple[int, float]]) -> float:
    """Throughput at `cores`: interpolated between measured points, and beyond the last point
    extrapolated at the measured parallel efficiency (the per-core rate at the most cores
    measured is assumed to hold as cores are added)."""
    points = _curve(scaling)
    if cores <= points[0][0]:
        return points[0][1] * cores / points[0][0]
    for (c0, r0), (c1, r1) in itertools.pairwise(points):
        if cores <= c1:
            return r0 + (r1 - r0) * (cores - c0) / (c1 - c0)
    c_n, r_n = points[-1]
    return r_n / c_n * cores


def cores_needed(consumer_eps: float, scaling: Sequence[tuple[int, float]]) -> CoresEstimate:
    """The cores one host needs so its producer matches `consumer_eps`, from the scaling curve.

    Within the measured range the curve is interpolated; beyond it, each added core is assumed
    to add the average per-core rate measured at the most cores (that is, the measured
    efficiency holds), but only for a curve that rises: a curve that falls or stays flat (972/s
    on 1 core, 565/s on 2, issue 41) says nothing about more cores, and `cores` is then None.
    Rates are per host.
    """
    points = _curve(scaling)
    one = per_core_rate(points)
    c_n, r_n = points[-1]
    efficiency = min(1.0, r_n / (c_n * one)) if one > 0 else 0.0
    rises = curve_rises(points)
    if consumer_eps <= 0:
        return CoresEstimate(0, c_n, one, efficiency, False, rises)
    if consumer_eps <= max(r for _, r in points):
        # Smallest whole core count whose interpolated rate reaches the consumer.
        lo = 1
        while rate_at(lo, points) < consumer_eps * (1 - 1e-9):
            lo += 1
        return CoresEstimate(lo, c_n, one, efficiency, False, rises)
    if not rises:
        return CoresEstimate(None, c_n, one, efficiency, False, rises)
    cores = math.ceil(consumer_eps / (r_n / c_n) - 1e-9)
    return CoresEstimate(cores, c_n, one, efficiency, True, rises)


# The two cores-needed estimates are said to disagree when the larger exceeds the smaller by
# more than this share: the run-to-run spread of either on a shared 2-core host is ~10%.
DISAGREE_ABOVE = 0.25


@dataclasses.dataclass(frozen=True, slots=True)
class CpuCoresEstimate:
    """Cores one host needs to feed its consumer, from the CPU cost per example.

    Attributes:
      cores: the consumer's examples/s x CPU seconds per example: cores kept fully busy.
      cpu_ms_per_example: the full pipeline's CPU milliseconds per example.
      cores_busy: cores the full pipeline kept busy at the most cores of the scaling curve.
      at_cores: that many cores (tf.data threadpool threads).
      disagreement: why this and the scaling curve's estimate differ by more than
        DISAGREE_ABOVE; empty when they agree.
    """

    cores: float
    cpu_ms_per_example: float
    cores_busy: float
    at_cores: int
    disagreement: str


def cores_from_cpu(
    consumer_eps: float, cpu_ms_per_example: float, *, curve: CoresEstimate, cores_busy: float
) -> CpuCoresEstimate:
    """Cores needed from CPU cost: examples/s the consumer takes x CPU seconds per example.

    Args:
      consumer_eps: examples/s one host's consumer takes.
      cpu_ms_per_example: the full pipeline's CPU cost per example, in milliseconds.
      curve: the estimate from the scaling curve, to compare with.
      cores_busy: cores kept busy at the curve's most cores (`curve.available`).
    """
    if cpu_ms_per_example < 0 or not math.isfinite(cpu_ms_per_example):
        raise field_error(ConfigError, "cpu_ms_per_example", "a finite number >= 0", cpu_ms_per_example)
    cores = max(0.0, consumer_eps) * cpu_ms_per_example / 1000.0
    why = cores_disagreement(curve.cores, cores, cores_busy=cores_busy, at_cores=curve.available)
    return CpuCoresEstimate(cores, cpu_ms_per_example, cores_busy, curve.available, why)


def cores_disagreement(curve_cores: int | None, cpu_cores: float, *, cores_busy: float, at_cores: int) -> str:
    """Says why the scaling curve's and the CPU cost's estimates differ, or "" when they agree.

    Both are compared in whole cores. Extrapolated from the curve's last point, the curve's
    estimate over the CPU one is `at_cores / cores_busy` there, so which is larger says whether
    cores sat idle or the process used more cores than the threadpool had.
    """
    if curve_cores is None:  # the curve gave no figure to disagree with
        return ""
    cpu_whole = math.ceil(cpu_cores - 1e-9)
    low, high = sorted((curve_cores, cpu_whole))
    if low <= 0 or high <= low * (1 + DISAGREE_ABOVE):
        return ""
    head = (
        f"The scaling curve says ~{curve_cores} cores, the CPU cost per example ~{cpu_cores:.1f}, "
        f"{high / low - 1:.0%} apart. "
    )
    if curve_cores > cpu_whole:
        return head + (
            f"Cores sit idle: with {at_cores} threads the pipeline kept {cores_busy:.1f} cores busy. "
            "Other processes on this host took cores, or parallelism limits (a serial stage, too "
            "little interleave or map parallelism, waits on storage) leave them idle, or adding "
            "cores does not scale linearly. The CPU figure is what the work needs on cores of its "
            "own; on a quiet host, raise parallelism before adding cores."
        )
    return head + (
        f"With {at_cores} threads the process kept {cores_busy:.1f} cores busy: work outside "
        "tf.data's threadpool (the loop taking elements, TensorFlow's runtime threads) uses cores "
        "the curve does not count, or scaling is not linear. Plan for the CPU figure."
    )


@dataclasses.dataclass(frozen=True, slots=True)
class ServiceEstimate:
    """tf.data service workers needed to feed every host.

    Attributes:
      workers: workers of `worker_cores` cores each.
      worker_cores: cores per worker.
      worker_eps: examples/s one worker is expected to produce.
      demand_eps: examples/s all hosts together consume.
    """

    workers: int
    worker_cores: int
    worker_eps: float
    demand_eps: float


def service_workers(
    consumer_eps_per_host: float, hosts: int, worker_cores: int, scaling: Sequence[tuple[int, float]]
) -> ServiceEstimate:
    """tf.data service workers of `worker_cores` cores needed for `hosts` consumers."""
    if worker_cores < 1:
        raise field_error(ConfigError, "worker_cores", "an integer >= 1", worker_cores)
    if hosts < 1:
        raise field_error(ConfigError, "hosts", "an integer >= 1", hosts)
    worker_eps = rate_at(worker_cores, scaling)
    demand = consumer_eps_per_host * hosts
    workers = math.ceil(demand / worker_eps - 1e-9) if demand > 0 else 0
    return ServiceEstimate(workers, worker_cores, worker_eps, demand)

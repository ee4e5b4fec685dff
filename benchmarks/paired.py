"""Paired, alternating measurement rounds that resolve ~5% differences on a shared machine.

Throughput moves when a neighbour takes a core; CPU time per example barely does. So every
window records both, from the process's own rusage (all of TensorFlow's threads count):

- examples/s over the window;
- CPU ms per example: (user + system CPU seconds in the window) / examples;
- cores busy: CPU seconds / wall seconds of the window.

Contenders are timed back to back in each round, and the order alternates between rounds
(A B C, then C B A, ...) so slow drift hurts every contender alike. A ratio is computed per
round from two windows taken seconds apart, and summarised as the geometric mean over rounds
with a 95% Student-t interval on the log ratio: a claim holds when the whole interval clears
the target.

Used by benchmarks/test_pipeline_speed.py and benchmarks/measure_defaults.py, which print
their results as one table (`Row`, `table`): target, ratio, 95% interval, cores busy, CPU ms
per example, command.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Mapping
from typing import Any

from tfpipe.bench.measure.producer import measure

# Two-sided 95% Student-t quantiles by degrees of freedom (scipy is not a dependency).
_T95 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    12: 2.179,
    15: 2.131,
    20: 2.086,
    30: 2.042,
}


def t95(df: int) -> float:
    """The two-sided 95% t quantile for `df` degrees of freedom (conservative between rows)."""
    if df < 1:
        return math.inf
    return _T95[max(k for k in _T95 if k <= df)] if df <= 30 else 1.96


@dataclasses.dataclass(frozen=True, slots=True)
class Window:
    """One timed window of one contender."""

    examples_per_sec: float
    cpu_ms_per_example: float
    cores_busy: float


@dataclasses.dataclass(frozen=True, slots=True)
class Interval:
    """A ratio's geometric mean over rounds and its 95% interval."""

    mean: float
    low: float
    high: float
    rounds: int

    def __str__(self) -> str:
        return f"{self.mean:.3f}x [{self.low:.3f}, {self.high:.3f}] (n={self.rounds})"

    def to_json(self) -> dict[str, float]:
        return {
            "mean": round(self.mean, 4),
            "ci95_low": round(self.low, 4),
            "ci95_high": round(self.high, 4),
            "rounds": self.rounds,
        }


def timed_window(
    make: Callable[[], Any], *, examples_per_element: int, seconds: float, warmup: float
) -> Window:
    """Measures one steady-state window of `make()`'s dataset, with its CPU cost (which
    `tfpipe.bench.measure.producer.measure` takes from the process's CPU time over the window)."""
    rate = measure(make, examples_per_element=examples_per_element, seconds=seconds, warmup=warmup)
    return Window(rate.examples_per_sec, rate.cpu_ms_per_example, rate.cores_busy)


def rounds(
    makers: Mapping[str, Callable[[], Any]],
    *,
    examples_per_element: int,
    n_rounds: int,
    seconds: float,
    warmup: float,
    on_window: Callable[[int, str, Window], None] | None = None,
) -> dict[str, list[Window]]:
    """Times every contender once per round, alternating the order between rounds."""
    names = list(makers)
    out: dict[str, list[Window]] = {name: [] for name in names}
    for r in range(n_rounds):
        for name in names if r % 2 == 0 else reversed(names):
            window = timed_window(
                makers[name], examples_per_element=examples_per_element, seconds=seconds, warmup=warmup
            )
            out[name].append(window)
            if on_window:
                on_window(r, name, window)
    return out


def ratio(values_a: list[float], values_b: list[float]) -> Interval:
    """a/b per round (same-round pairs), as a geometric mean with a 95% t interval."""
    logs = [math.log(a / b) for a, b in zip(values_a, values_b, strict=True)]
    mean = statistics.fmean(logs)
    half = t95(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs)) if len(logs) > 1 else math.inf
    return Interval(math.exp(mean), math.exp(mean - half), math.exp(mean + half), len(logs))


def speed_ratio(results: Mapping[str, list[Window]], name: str, baseline: str) -> Interval:
    """Throughput of `name` over `baseline`, paired by round."""
    return ratio([w.examples_per_sec for w in results[name]], [w.examples_per_sec for w in results[baseline]])


def cpu_ratio(results: Mapping[str, list[Window]], name: str, baseline: str) -> Interval:
    """CPU per example of `name` over `baseline` (below 1: `name` does less work per example)."""
    return ratio(
        [w.cpu_ms_per_example for w in results[name]], [w.cpu_ms_per_example for w in results[baseline]]
    )


def summary(results: Mapping[str, list[Window]]) -> dict[str, dict[str, float]]:
    """Median examples/s, CPU ms per example and cores busy of each contender."""
    return {
        name: {
            "examples_per_sec": round(statistics.median(w.examples_per_sec for w in ws), 1),
            "cpu_ms_per_example": round(statistics.median(w.cpu_ms_per_example for w in ws), 3),
            "cores_busy": round(statistics.median(w.cores_busy for w in ws), 2),
        }
        for name, ws in results.items()
    }


@dataclasses.dataclass(frozen=True, slots=True)
class Row:
    """One line of a results table: a contender against its baseline, paired by round.

    Attributes:
      target: what is claimed, e.g. "uint8, identical records, vs the baseline >= 1.3x".
      goal: the ratio the mean must reach (None: reported only).
      speed: throughput ratio contender / baseline.
      cpu: CPU-per-example ratio contender / baseline (below 1: less work per example).
      cores, cores_baseline: median cores busy of each.
      cpu_ms, cpu_ms_baseline: median CPU ms per example of each.
      command: the command that produced it.
    """

    target: str
    goal: float | None
    speed: Interval
    cpu: Interval
    cores: float
    cores_baseline: float
    cpu_ms: float
    cpu_ms_baseline: float
    command: str

    @property
    def verdict(self) -> str:
        if self.goal is None:
            return "-"
        if self.speed.low >= self.goal:
            return "met"
        return "met (mean)" if self.speed.mean >= self.goal else "MISSED"

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "goal": self.goal,
            "verdict": self.verdict,
            "speed_ratio": self.speed.to_json(),
            "cpu_ratio": self.cpu.to_json(),
            "cores_busy": self.cores,
            "cores_busy_baseline": self.cores_baseline,
            "cpu_ms_per_example": self.cpu_ms,
            "cpu_ms_per_example_baseline": self.cpu_ms_baseline,
            "command": self.command,
        }


def row(
    results: Mapping[str, list[Window]],
    name: str,
    baseline: str,
    *,
    target: str,
    goal: float | None,
    command: str,
) -> Row:
    """The table row of `name` against `baseline` (medians and paired ratios over rounds)."""
    med = summary({k: results[k] for k in (name, baseline)})
    return Row(
        target,
        goal,
        speed_ratio(results, name, baseline),
        cpu_ratio(results, name, baseline),
        med[name]["cores_busy"],
        med[baseline]["cores_busy"],
        med[name]["cpu_ms_per_example"],
        med[baseline]["cpu_ms_per_example"],
        command,
    )


def table(rows: list[Row]) -> str:
    """A Markdown table of rows (ratios with their 95% interval; "met" means the whole
    interval clears the goal, "met (mean)" only the geometric mean)."""
    lines = [
        "| target | ratio | 95% interval | verdict | cores busy (baseline) "
        "| CPU ms/example (baseline) | CPU ratio | command |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.target} | {r.speed.mean:.2f}x | [{r.speed.low:.2f}, {r.speed.high:.2f}] "
            f"(n={r.speed.rounds}) | {r.verdict} | {r.cores:.2f} ({r.cores_baseline:.2f}) "
            f"| {r.cpu_ms:.3f} ({r.cpu_ms_baseline:.3f}) "
            f"| {r.cpu.mean:.2f}x [{r.cpu.low:.2f}, {r.cpu.high:.2f}] | `{r.command}` |"
        )
    return "\n".join(lines)


def print_window(r: int, name: str, w: Window) -> None:
    """A progress line per timed window (pass as `rounds(..., on_window=print_window)`)."""
    print(
        f"  round {r}: {name:<28} {w.examples_per_sec:>10,.0f}/s  {w.cpu_ms_per_example:7.3f} CPU ms/ex"
        f"  {w.cores_busy:4.2f} cores",
        flush=True,
    )

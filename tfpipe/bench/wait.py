"""The input wait: the share of each step spent waiting for input, predicted from two rates,
and the TF Profiler's bands for it.

Pure arithmetic, and below everything else in bench: the producer's and consumer's rates give
the prediction (the conclusion, --simulate), and the bands classify it as they classify the
Profiler's own figure of a profiled run (--from-profile).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from typing import Literal

from tfpipe.errors import ConfigError, field_error

Band = Literal["not_input_bound", "moderately_input_bound", "highly_input_bound"]

# The TF Profiler input-pipeline analyzer's bands: below 5% of step time waiting for input is
# not input-bound, 5% to under 20% moderately, 20% or more highly.
MODERATE_AT = 0.05
HIGH_AT = 0.20


def predicted_wait(producer_eps: float, consumer_eps: float) -> float:
    """Share of each step spent waiting for input when the producer runs at `producer_eps`
    examples/s and the consumer could take `consumer_eps`: `max(0, 1 - producer/consumer)`."""
    if consumer_eps <= 0 or not math.isfinite(consumer_eps):
        raise field_error(ConfigError, "consumer examples_per_sec", "a positive finite number", consumer_eps)
    if producer_eps < 0 or not math.isfinite(producer_eps):
        raise field_error(ConfigError, "producer examples_per_sec", "a finite number >= 0", producer_eps)
    return max(0.0, 1.0 - producer_eps / consumer_eps)


def band(wait: float) -> Band:
    """The verdict for a share of step time spent waiting for input (0..1)."""
    # Rounding first keeps exact edges exact: 1 - 80/100 is 0.19999999999999996 in floats.
    w = round(wait, 9)
    if w < MODERATE_AT:
        return "not_input_bound"
    if w < HIGH_AT:
        return "moderately_input_bound"
    return "highly_input_bound"


# The rate's spread is taken from at least this many pieces of its window.
MIN_PIECES = 3
# The interval reaches this many standard deviations of the rate either side.
SPREAD_SDS = 1.0
_EDGES = {
    ("not_input_bound", "moderately_input_bound"): MODERATE_AT,
    ("moderately_input_bound", "highly_input_bound"): HIGH_AT,
}
_WORDS = {"not_input_bound": "not", "moderately_input_bound": "moderately", "highly_input_bound": "highly"}


def rate_spread(pieces: Sequence[tuple[float, float]]) -> float | None:
    """The relative standard deviation of a rate between pieces of its window, each (count,
    seconds); None with fewer than MIN_PIECES pieces."""
    rates = [n / sec for n, sec in pieces if sec > 0]
    if len(rates) < MIN_PIECES:
        return None
    mean = statistics.fmean(rates)
    return statistics.stdev(rates) / mean if mean > 0 else None


@dataclasses.dataclass(frozen=True, slots=True)
class WaitInterval:
    """The predicted input wait's interval from the producer rate's own spread.

    Attributes:
      low: the wait at the producer's rate SPREAD_SDS standard deviations above its mean.
      high: the wait at the rate as far below.
      spread: the producer rate's relative standard deviation it comes from.
      bands: the bands the interval touches, in order: one when the run can tell its band.
    """

    low: float
    high: float
    spread: float
    bands: tuple[Band, ...]

    @property
    def certain(self) -> bool:
        return len(self.bands) == 1


def wait_interval(producer_eps: float, consumer_eps: float, spread: float) -> WaitInterval:
    """The interval of `predicted_wait` when the producer's rate is `producer_eps` x (1 +- SPREAD_SDS x
    `spread`)."""
    if spread < 0 or not math.isfinite(spread):
        raise field_error(ConfigError, "spread", "a finite number >= 0", spread)
    low = predicted_wait(producer_eps * (1 + SPREAD_SDS * spread), consumer_eps)
    high = predicted_wait(max(0.0, producer_eps * (1 - SPREAD_SDS * spread)), consumer_eps)
    order: list[Band] = ["not_input_bound", "moderately_input_bound", "highly_input_bound"]
    touched = tuple(order[order.index(band(low)) : order.index(band(high)) + 1])
    return WaitInterval(low, high, spread, touched)


def verdict_words(wait: float, interval: WaitInterval | None) -> str:
    """The verdict in words with its interval: "highly input-bound: 31% [24, 38] of step time
    waiting for input", or, when the interval spans bands, "cannot tell moderately from highly
    input-bound: 19% [12, 26] spans the 20% edge"."""
    if interval is None:
        return f"{_WORDS[band(wait)]} input-bound: {wait:.1%} of step time waiting for input"
    figures = f"{wait:.0%} [{100 * interval.low:.0f}, {100 * interval.high:.0f}]"
    if interval.certain:
        return f"{_WORDS[interval.bands[0]]} input-bound: {figures} of step time waiting for input"
    first, last = interval.bands[0], interval.bands[-1]
    edges = [f"{_EDGES[pair]:.0%}" for pair in zip(interval.bands, interval.bands[1:], strict=False)]
    return (
        f"cannot tell {_WORDS[first]} from {_WORDS[last]} input-bound: {figures} spans the "
        f"{' and '.join(edges)} edge{'s' if len(edges) > 1 else ''} at this run's spread "
        f"(the producer's rate moved {interval.spread:.0%} between half-second pieces of its window)"
    )

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
    return spread_of([n / sec for n, sec in pieces if sec > 0])


def spread_of(rates: Sequence[float]) -> float | None:
    """The relative standard deviation of the rates of a window's pieces; None with fewer than
    MIN_PIECES of them."""
    if len(rates) < MIN_PIECES:
        return None
    mean = statistics.fmean(rates)
    return statistics.stdev(rates) / mean if mean > 0 else None


@dataclasses.dataclass(frozen=True, slots=True)
class WaitInterval:
    """The predicted input wait's interval: where the wait lies as far as this run can tell.

    Attributes:
      low: the wait at the fastest rate the producer's windows allow (the fastest window,
        SPREAD_SDS standard deviations of its pieces faster).
      high: the wait at the slowest rate they allow.
      spread: the relative standard deviation of the producer's rate between the half-second
        pieces of its windows, which the interval reaches either side.
      bands: the bands the interval touches, in order.
      moved: how far apart the producer's windows were: the fastest window's rate over the
        slowest's, less 1 (0 with one window).
      busy: why the host makes the figures unreliable ("" when it does not): other processes or
        the hypervisor took a share of the cores while the producer was timed.
    """

    low: float
    high: float
    spread: float
    bands: tuple[Band, ...]
    moved: float = 0.0
    busy: str = ""

    @property
    def certain(self) -> bool:
        """True when the run can name one band: the interval lies in it and the host was not
        busy."""
        return len(self.bands) == 1 and not self.busy


def wait_interval(
    producer_eps: float | Sequence[float], consumer_eps: float, spread: float, *, busy: str = ""
) -> WaitInterval:
    """The interval of `predicted_wait` when the producer's rate is anywhere from its slowest
    window's x (1 - SPREAD_SDS x `spread`) to its fastest window's x (1 + SPREAD_SDS x
    `spread`): `producer_eps` is one window's rate or each window's.

    A rate measured in one window and met by a consumer in other seconds differs by more than
    the window's own spread says (issue 41: the producer's windows tens of seconds apart in one
    process); two windows far apart in time show how far it moves, and the interval spans
    them."""
    if spread < 0 or not math.isfinite(spread):
        raise field_error(ConfigError, "spread", "a finite number >= 0", spread)
    rates = [producer_eps] if isinstance(producer_eps, (int, float)) else list(producer_eps)
    if not rates:
        raise field_error(ConfigError, "producer_eps", "at least one window's rate", rates)
    slow, fast = min(rates), max(rates)
    low = predicted_wait(fast * (1 + SPREAD_SDS * spread), consumer_eps)
    high = predicted_wait(max(0.0, slow * (1 - SPREAD_SDS * spread)), consumer_eps)
    order: list[Band] = ["not_input_bound", "moderately_input_bound", "highly_input_bound"]
    touched = tuple(order[order.index(band(low)) : order.index(band(high)) + 1])
    moved = fast / slow - 1 if slow > 0 else 0.0
    return WaitInterval(low, high, spread, touched, moved, busy)


def verdict_title(wait: float, interval: WaitInterval | None) -> str:
    """The verdict as a headline, carrying the interval's doubt: "Highly input-bound", "Cannot
    tell moderately from highly input-bound", or "Highly input-bound on this busy host (cannot
    tell)"."""
    if interval is None or interval.certain:
        return f"{_WORDS[band(wait)].capitalize()} input-bound"
    first, last = interval.bands[0], interval.bands[-1]
    if first != last:
        return f"Cannot tell {_WORDS[first]} from {_WORDS[last]} input-bound"
    return f"{_WORDS[first].capitalize()} input-bound on this busy host (cannot tell)"


def verdict_words(wait: float, interval: WaitInterval | None) -> str:
    """The verdict in words, its title (`verdict_title`) then its figures (`verdict_detail`):
    "highly input-bound: 31% [24, 38] of step time waiting for input", or "cannot tell
    moderately from highly input-bound: 19% [12, 26] of step time waiting for input: the
    interval spans the 20% edge ..."."""
    title = verdict_title(wait, interval)
    return f"{title[0].lower()}{title[1:]}: {verdict_detail(wait, interval)}"


def verdict_detail(wait: float, interval: WaitInterval | None) -> str:
    """The predicted wait with its interval, and why the run cannot tell when it cannot:
    "19% [12, 26] of step time waiting for input: the interval spans the 20% edge at this
    run's spread (...)"."""
    if interval is None:
        return f"{wait:.1%} of step time waiting for input"
    said = f"{wait:.0%} [{100 * interval.low:.0f}, {100 * interval.high:.0f}] of step time waiting for input"
    why = []
    if len(interval.bands) > 1:
        edges = [f"{_EDGES[pair]:.0%}" for pair in zip(interval.bands, interval.bands[1:], strict=False)]
        why.append(
            f"the interval spans the {' and '.join(edges)} edge{'s' if len(edges) > 1 else ''} at "
            f"this run's spread ({_moved(interval)})"
        )
    if interval.busy:
        why.append(interval.busy)
    return f"{said}: {'; and '.join(why)}" if why else said


def _moved(interval: WaitInterval) -> str:
    """How the producer's rate moved, in words."""
    pieces = f"the producer's rate moved {interval.spread:.0%} between half-second pieces"
    if interval.moved <= 0:
        return pieces + " of its window"
    return pieces + f" of its windows, and {interval.moved:.0%} between the two windows"

"""The input wait: the share of each step spent waiting for input, predicted from two rates,
and the TF Profiler's bands for it.

Pure arithmetic, and below everything else in bench: the producer's and consumer's rates give
the prediction (the conclusion, --simulate), and the bands classify it as they classify the
Profiler's own figure of a profiled run (--from-profile).
"""

from __future__ import annotations

import math
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

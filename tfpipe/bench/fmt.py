"""How bench and CLI output write numbers: the one home of these formats (the verdict's words
are `wait.verdict_title` and `wait.verdict_detail`, which carry its doubt).

The report's recommendations, the terminal tables and the plot all use them, so a rate reads
the same wherever it appears.
"""

from __future__ import annotations

import math


def rate(x: float) -> str:
    """A rate in full: `12,345` at 100 and above, else one decimal (`37.5`)."""
    return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}"


def figure(x: float) -> str:
    """A measured figure with the digits that say something: `1,234`, `12.3`, `1.2`, and two
    significant digits below 1 (`0.52`, `0.02`, `0.0031`); `0` only for zero."""
    a = abs(x)
    if a >= 100 or not math.isfinite(x):
        return f"{x:,.0f}"
    if a >= 1:
        return f"{x:,.1f}"
    if a == 0:
        return "0"
    return f"{x:.{1 - math.floor(math.log10(a))}f}".rstrip("0").rstrip(".")


def cores(x: float) -> str:
    """A count of cores, approximate: `~2.4`, and `< 0.1` where one decimal would say 0.0."""
    return "< 0.1" if x < 0.05 else f"~{x:,.1f}"


def rate_short(x: float) -> str:
    """A rate for a plot label: `1.23M`, `45k`, `1,234`, `37.5`."""
    if x >= 1e6:
        return f"{x / 1e6:.2f}M"
    if x >= 1e4:
        return f"{x / 1e3:.0f}k"
    return rate(x)


def human_bytes(n: float) -> str:
    """Bytes in decimal units: `512 B`, `1.5 KB`, ..., up to TB."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def percent(share: float) -> str:
    """A share (0..1) as a percentage with the digits that matter: `81%`, `4.2%`, `0.02%`, `0%`."""
    p = 100.0 * share
    if p >= 10 or round(p, 2) == 0:
        return f"{p:.0f}%"
    return f"{p:.1f}%" if p >= 1 else f"{p:.2f}%"


def percent1(share: float) -> str:
    """A share (0..1) as a percentage with one decimal, for fills and padding, where 99.6% and
    100% differ: `99.6%`, `0.4%`, `86.4%` (two decimals under 1%: `0.39%`)."""
    p = 100.0 * share
    return f"{p:.2f}%" if 0 < p < 1 else f"{p:.1f}%"

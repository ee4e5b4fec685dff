"""Field checks for tfpipe's frozen config dataclasses: one home for each rule.

Every check raises `ConfigError` through `field_error`, so messages read alike everywhere:
"<field> must be <expected>. Received: <field>=<value>". Booleans are never ints here, and
strings are never choices by accident (`flip='no'` is refused, not taken as true).
"""

from __future__ import annotations

import math
import numbers
from typing import Any, get_args

from tfpipe.errors import ConfigError, field_error


def check_bool(name: str, value: Any, optional: bool = False) -> None:
    """Refuses anything but True/False (or None): "no" and 1 are not booleans."""
    if not (isinstance(value, bool) or (optional and value is None)):
        raise field_error(ConfigError, name, "True or False" + (" or None" if optional else ""), value)


def check_int(
    name: str,
    value: Any,
    low: int | None,
    high: int | None = None,
    *,
    optional: bool = False,
    what: str | None = None,
) -> None:
    """Refuses non-ints (bools included) and values outside [low, high]."""
    if optional and value is None:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or (low is not None and value < low)
        or (high is not None and value > high)
    ):
        if what is None:
            what = (
                "an int"
                if low is None
                else f"an int >= {low}"
                if high is None
                else f"an int in [{low}, {high}]"
            ) + (" or None" if optional else "")
        raise field_error(ConfigError, name, what, value)


def _finite(value: Any) -> bool:
    """A finite real number: not a bool, a string, NaN or infinity (numpy scalars are fine)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def check_number(name: str, value: Any, what: str, ok: Any = None) -> float:
    """A finite real number for which `ok(value)` holds; returns it as float."""
    if not _finite(value):
        raise field_error(ConfigError, name, what, value)
    if ok is not None and not ok(float(value)):
        raise field_error(ConfigError, name, what, value)
    return float(value)


def check_numbers(name: str, value: Any, n: int, what: str, ok: Any = None) -> tuple[float, ...]:
    """A sequence of `n` finite real numbers for which `ok(values)` holds; returns them as floats."""
    if (
        isinstance(value, (str, bytes))
        or not hasattr(value, "__len__")
        or len(value) != n
        or not all(_finite(v) for v in value)
    ):
        raise field_error(ConfigError, name, what, value)
    floats = tuple(float(v) for v in value)
    if ok is not None and not ok(floats):
        raise field_error(ConfigError, name, what, value)
    return floats


def check_str(name: str, value: Any, *, optional: bool = False) -> None:
    """A non-empty string (or None)."""
    if not ((isinstance(value, str) and value) or (optional and value is None)):
        raise field_error(ConfigError, name, "a non-empty string" + (" or None" if optional else ""), value)


def check_choice(name: str, value: Any, choices: Any) -> None:
    """One of `choices`: a tuple of strings or a `Literal[...]` type; compared as a string only."""
    choices = get_args(choices) or tuple(choices)
    if not isinstance(value, str) or value not in choices:
        raise field_error(ConfigError, name, f"one of {choices}", value)


def check_seconds(name: str, value: Any, expected: str = "seconds > 0") -> None:
    """A positive finite number of seconds."""
    if not _finite(value) or not value > 0:
        raise field_error(ConfigError, name, expected, value)

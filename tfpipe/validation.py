"""Field checks for tfpipe's frozen config dataclasses: one home for each rule.

Every check raises `ConfigError` through `field_error`, so messages read alike everywhere:
"<field> must be <expected>. Received: <field>=<value>". Booleans are never ints here, and
strings are never choices by accident (`flip='no'` is refused, not taken as true). An int is
any integral type (`operator.index`: numpy's `np.int64(4)` too), stored as a Python int.

Each check returns the value to store, so a config can list its fields with their checks in a
table and run them with `check_fields`.
"""

from __future__ import annotations

import math
import numbers
import operator
import os
from collections.abc import Callable, Collection, Mapping
from typing import Literal, SupportsIndex, cast, get_args, overload

from tfpipe.errors import ConfigError, field_error

# A field's check: (field name, value) -> the value to store, or raises ConfigError.
Check = Callable[[str, object], object]


def check_fields(config: object, checks: Mapping[str, Check]) -> None:
    """Runs each field's check on the frozen dataclass `config`, in order, and stores what it
    returns (a Python int for `np.int64(4)`, a path's string for a `pathlib.Path`)."""
    for name, check in checks.items():
        object.__setattr__(config, name, check(name, getattr(config, name)))


def as_int(value: object) -> int | None:
    """`value` as a Python int when it is an integer of any integral type (int, numpy's
    integers, anything with `__index__`), else None. A bool is not an integer here."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        return None
    try:
        return operator.index(cast(SupportsIndex, value))
    except TypeError:
        return None


def check_bool(name: str, value: object, optional: bool = False) -> bool | None:
    """Refuses anything but True/False (or None): "no" and 1 are not booleans."""
    if isinstance(value, bool) or (optional and value is None):
        return value
    raise field_error(ConfigError, name, "True or False" + (" or None" if optional else ""), value)


@overload
def check_int(
    name: str,
    value: object,
    low: int | None,
    high: int | None = None,
    *,
    optional: Literal[False] = False,
    what: str | None = None,
) -> int: ...
@overload
def check_int(
    name: str,
    value: object,
    low: int | None,
    high: int | None = None,
    *,
    optional: bool,
    what: str | None = None,
) -> int | None: ...
def check_int(
    name: str,
    value: object,
    low: int | None,
    high: int | None = None,
    *,
    optional: bool = False,
    what: str | None = None,
) -> int | None:
    """Refuses non-integers (bools and floats included) and values outside [low, high];
    returns the value as a Python int (None for an optional None)."""
    if optional and value is None:
        return None
    number = as_int(value)
    if number is None or (low is not None and number < low) or (high is not None and number > high):
        if what is None:
            what = (
                "an int"
                if low is None
                else f"an int >= {low}"
                if high is None
                else f"an int in [{low}, {high}]"
            ) + (" or None" if optional else "")
        raise field_error(ConfigError, name, what, value)
    return number


def finite_real(value: object) -> bool:
    """A finite real number: not a bool, a string, NaN or infinity (numpy scalars are fine)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def check_number(name: str, value: object, what: str, ok: Callable[[float], bool] | None = None) -> float:
    """A finite real number for which `ok(value)` holds; returns it as float."""
    if not isinstance(value, numbers.Real) or not finite_real(value):
        raise field_error(ConfigError, name, what, value)
    if ok is not None and not ok(float(value)):
        raise field_error(ConfigError, name, what, value)
    return float(value)


def check_numbers(
    name: str, value: object, n: int, what: str, ok: Callable[[tuple[float, ...]], bool] | None = None
) -> tuple[float, ...]:
    """A sequence of `n` finite real numbers for which `ok(values)` holds; returns them as floats."""
    if (
        isinstance(value, (str, bytes))
        or not isinstance(value, Collection)
        or len(value) != n
        or not all(isinstance(v, numbers.Real) and finite_real(v) for v in value)
    ):
        raise field_error(ConfigError, name, what, value)
    floats = tuple(float(v) for v in value)
    if ok is not None and not ok(floats):
        raise field_error(ConfigError, name, what, value)
    return floats


def check_str(name: str, value: object, *, optional: bool = False, what: str | None = None) -> str | None:
    """A non-empty string (or None)."""
    if isinstance(value, str) and value:
        return value
    if optional and value is None:
        return None
    expected = what or "a non-empty string" + (" or None" if optional else "")
    raise field_error(ConfigError, name, expected, value)


def check_path(name: str, value: object, *, optional: bool = False, what: str | None = None) -> str | None:
    """A non-empty path, local or gs://, as a string or an `os.PathLike` (or None); returns the
    string."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    return check_str(name, value, optional=optional, what=what or "a path" + (" or None" if optional else ""))


def check_choice(name: str, value: object, choices: object) -> str:
    """One of `choices`: a tuple of strings or a `Literal[...]` type; compared as a string only."""
    allowed = get_args(choices) or tuple(cast("tuple[str, ...]", choices))
    if not isinstance(value, str) or value not in allowed:
        raise field_error(ConfigError, name, f"one of {allowed}", value)
    return value


def check_seconds(
    name: str, value: object, expected: str = "seconds > 0", *, optional: bool = False
) -> float | None:
    """A positive finite number of seconds (or None), as it was given."""
    if optional and value is None:
        return None
    if isinstance(value, numbers.Real) and finite_real(value) and float(value) > 0:
        return value  # type: ignore[return-value]  # a real number: an int or float to its users
    raise field_error(ConfigError, name, expected, value)


@overload
def check_batch_size(name: str, value: object, *, optional: Literal[False] = False) -> int: ...
@overload
def check_batch_size(name: str, value: object, *, optional: bool) -> int | None: ...
def check_batch_size(name: str, value: object, *, optional: bool = False) -> int | None:
    """The global batch: a positive int (of any integral type). The one batch-size rule of
    build(), steps_per_epoch() and bench."""
    what = "a positive int (the global batch)" + (" or None" if optional else "")
    return check_int(name, value, 1, optional=optional, what=what)

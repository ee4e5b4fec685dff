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
from collections.abc import Callable, Mapping
from typing import Any, Literal, get_args, overload

from tfpipe.errors import ConfigError, field_error

# A field's check: (field name, value) -> the value to store, or raises ConfigError.
Check = Callable[[str, Any], Any]


def check_fields(config: Any, checks: Mapping[str, Check]) -> None:
    """Runs each field's check on the frozen dataclass `config`, in order, and stores what it
    returns (a Python int for `np.int64(4)`, a path's string for a `pathlib.Path`)."""
    for name, check in checks.items():
        object.__setattr__(config, name, check(name, getattr(config, name)))


def as_int(value: Any) -> int | None:
    """`value` as a Python int when it is an integer of any integral type (int, numpy's
    integers, anything with `__index__`), else None. A bool is not an integer here."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def check_bool(name: str, value: Any, optional: bool = False) -> Any:
    """Refuses anything but True/False (or None): "no" and 1 are not booleans."""
    if not (isinstance(value, bool) or (optional and value is None)):
        raise field_error(ConfigError, name, "True or False" + (" or None" if optional else ""), value)
    return value


@overload
def check_int(
    name: str,
    value: Any,
    low: int | None,
    high: int | None = None,
    *,
    optional: Literal[False] = False,
    what: str | None = None,
) -> int: ...
@overload
def check_int(
    name: str,
    value: Any,
    low: int | None,
    high: int | None = None,
    *,
    optional: bool,
    what: str | None = None,
) -> int | None: ...
def check_int(
    name: str,
    value: Any,
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


def finite_real(value: Any) -> bool:
    """A finite real number: not a bool, a string, NaN or infinity (numpy scalars are fine)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def check_number(name: str, value: Any, what: str, ok: Any = None) -> float:
    """A finite real number for which `ok(value)` holds; returns it as float."""
    if not finite_real(value):
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
        or not all(finite_real(v) for v in value)
    ):
        raise field_error(ConfigError, name, what, value)
    floats = tuple(float(v) for v in value)
    if ok is not None and not ok(floats):
        raise field_error(ConfigError, name, what, value)
    return floats


def check_str(name: str, value: Any, *, optional: bool = False, what: str | None = None) -> Any:
    """A non-empty string (or None)."""
    if not ((isinstance(value, str) and value) or (optional and value is None)):
        expected = what or "a non-empty string" + (" or None" if optional else "")
        raise field_error(ConfigError, name, expected, value)
    return value


def check_path(name: str, value: Any, *, optional: bool = False, what: str | None = None) -> str | None:
    """A non-empty path, local or gs://, as a string or an `os.PathLike` (or None); returns the
    string."""
    if hasattr(value, "__fspath__"):
        value = os.fspath(value)
    return check_str(name, value, optional=optional, what=what or "a path" + (" or None" if optional else ""))


def check_choice(name: str, value: Any, choices: Any) -> Any:
    """One of `choices`: a tuple of strings or a `Literal[...]` type; compared as a string only."""
    choices = get_args(choices) or tuple(choices)
    if not isinstance(value, str) or value not in choices:
        raise field_error(ConfigError, name, f"one of {choices}", value)
    return value


def check_seconds(name: str, value: Any, expected: str = "seconds > 0", *, optional: bool = False) -> Any:
    """A positive finite number of seconds (or None)."""
    if not ((optional and value is None) or (finite_real(value) and value > 0)):
        raise field_error(ConfigError, name, expected, value)
    return value


@overload
def check_batch_size(name: str, value: Any, *, optional: Literal[False] = False) -> int: ...
@overload
def check_batch_size(name: str, value: Any, *, optional: bool) -> int | None: ...
def check_batch_size(name: str, value: Any, *, optional: bool = False) -> int | None:
    """The global batch: a positive int (of any integral type). The one batch-size rule of
    build(), steps_per_epoch() and bench."""
    what = "a positive int (the global batch)" + (" or None" if optional else "")
    return check_int(name, value, 1, optional=optional, what=what)

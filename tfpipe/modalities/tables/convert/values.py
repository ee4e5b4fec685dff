"""Pure checks on one chunk of a column's non-null values: what text is, and does each value
fit the Example type?

Text (CSV fields, Hive partition folder names) is a number only as a program writes one, so
that reading it as a number loses nothing but formatting: `12`, `-3`, `0.5`, `1.50`, `.5`,
`1e-05`, `1e300`, `1.5E+3`, `1.0E5`, `inf`. Text with a leading zero (`01234`, `007`) is a code,
and so is a capital E between digits with neither a decimal point nor an exponent sign (`1E5`,
`2E10`: part numbers and grid references; programs that print a capital E write `1.0E5` or
`1E+05`); both stay text. `True`/`False` (any of pandas' spellings) are
booleans. `nan` (any case, as numpy and R write a float NaN) is a float NaN: a value, kept as
NaN, never a null (only an empty field is missing) and never 0.0.

The other checks return the first offender as (row, value), the row taken from the series'
index (the row number within its file), or None. float32 is the only float type a
`tf.train.Example` holds, so these decide when writing float32 would change a value beyond
float32's precision: a finite value float32 turns into inf, or a whole number (up to 2**53,
where float64 still holds every integer) that float32 rounds, such as an ID 123456789 that
would become 123456792.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # both imported where used: a chunk of text needs neither until it is checked
    import numpy as np
    import pandas as pd

from tfpipe.convert.formats.parquetfile import float_series

_SPACE = r"[ \t]*"
INT_TEXT = rf"{_SPACE}[+-]?(?:0|[1-9][0-9]*){_SPACE}"
"""An integer as a program writes one: no leading zero."""
FLOAT_TEXT = (
    rf"{_SPACE}[+-]?(?:"
    r"(?:(?:0|[1-9][0-9]*)\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"  # 0.5, 1.50, .5, 1.5e3, 1.0E5
    r"|(?:0|[1-9][0-9]*)(?:e[+-]?[0-9]+|E[+-][0-9]+)?"  # 12, 1e5, 1e-05, 1E+05 (a bare 1E5 is a code)
    r"|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?"  # inf, Infinity
    r"|[nN][aA][nN]"  # nan, NaN: a float NaN, as numpy and R write it
    rf"){_SPACE}"
)
"""A float (or an integer) as a program writes one."""
BOOL_TEXT = ("True", "False", "TRUE", "FALSE", "true", "false")
"""The booleans pandas reads (its `true_values` and `false_values` defaults)."""
DECLARED_INT_TEXT = rf"{_SPACE}[+-]?[0-9]+{_SPACE}"
"""An integer in a column declared int (`column_types`): leading zeros allowed, and dropped."""
PANDAS_NA_TEXT = (
    "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
    "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null",
)  # fmt: skip
"""What pandas' `read_csv` takes for missing by default (its `na_values`, besides the empty
field). tfpipe keeps them as written, and says so where a column holds them."""


def text_kind(nonnull: pd.Series) -> str:
    """ "int", "float", "bool" or "string": the kind of a chunk of non-null text values."""
    if not len(nonnull):
        return "null"
    if nonnull.str.fullmatch(INT_TEXT).all():
        return "int"
    if nonnull.str.fullmatch(FLOAT_TEXT).all():
        return "float"
    if nonnull.isin(BOOL_TEXT).all():
        return "bool"
    return "string"


def fits_text(nonnull: pd.Series, kind: str, declared: bool = False) -> np.ndarray:
    """A boolean mask: which text values read as `kind` (as declared, or as inferred)."""
    import pandas as pd

    if kind == "int":
        return nonnull.str.fullmatch(DECLARED_INT_TEXT if declared else INT_TEXT).to_numpy(dtype=bool)
    if kind == "float":
        if not declared:
            return nonnull.str.fullmatch(FLOAT_TEXT).to_numpy(dtype=bool)
        nan = nonnull.str.fullmatch(rf"{_SPACE}[+-]?[nN][aA][nN]{_SPACE}").to_numpy(dtype=bool)
        return pd.to_numeric(nonnull, errors="coerce").notna().to_numpy(dtype=bool) | nan
    if kind == "bool":
        return nonnull.isin(BOOL_TEXT).to_numpy(dtype=bool)
    return pd.Series(True, index=nonnull.index).to_numpy(dtype=bool)


def typed(text: pd.Series, kind: str) -> pd.Series:
    """Text values (nulls allowed) as the pandas dtype of `kind`, as the second pass reads them.

    Raises:
      ValueError: a value does not read as `kind` (callers check with `fits_text` first).
    """
    import pandas as pd

    if kind in ("float", "null"):
        return floats(text)
    if kind == "int":
        try:
            return text.astype("Int64")  # Arrow's cast: ~7x faster than to_numeric
        except (ValueError, TypeError, ArithmeticError):  # pyarrow's ArrowInvalid is a ValueError
            return pd.to_numeric(text.str.strip(), errors="raise").astype("Int64")  # "+6", " 5"
    if kind == "bool":
        return text.map(_BOOLS).astype("boolean")
    return text.astype("string")


def floats(text: pd.Series) -> pd.Series:
    """Float text (nulls allowed) as a nullable Float64 series in which a NaN is a value and
    only a null is missing: pandas' own casts would make `nan` a null.

    Raises:
      ValueError: a value that does not read as a float.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = pa.array(text, type=pa.large_string(), from_pandas=True)
    try:
        number = pc.cast(arr, pa.float64())  # Arrow reads nan, inf, 1e5; not spaces around
    except pa.ArrowInvalid:
        number = pc.cast(pc.utf8_trim(arr, " \t"), pa.float64())
    null = number.is_null().to_numpy(zero_copy_only=False)
    return float_series(number.fill_null(0.0).to_numpy(zero_copy_only=False), null, text.index, text.name)


_BOOLS = {"True": True, "TRUE": True, "true": True, "False": False, "FALSE": False, "false": False}
LOOSE_NUMBER = (
    rf"{_SPACE}[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?{_SPACE}"
    rf"|{_SPACE}[+-]?(?i:inf(?:inity)?){_SPACE}"
)
"""What pandas reads as a number, codes with leading zeros and bare exponents included."""


def beyond_int64_text(nonnull: pd.Series) -> tuple[int, int] | None:
    """The first integer text outside int64's range (`-2**63-1`, `2**64`), which no Example holds."""
    import numpy as np

    text = nonnull.str.strip()
    digits = text.str.lstrip("+-").str.lstrip("0").to_numpy(dtype=object)
    length = np.fromiter(map(len, digits), dtype=np.int64, count=len(digits))
    beyond = length > 19
    at_limit = np.flatnonzero(length == 19)
    if len(at_limit):  # 19 digits may still fit: equal-length digit strings compare as numbers
        negative = text.str.startswith("-").to_numpy(dtype=bool)[at_limit]
        limit = np.where(negative, str(2**63), str(INT64_MAX)).astype(object)
        beyond[at_limit] = digits[at_limit] > limit
    hits = np.flatnonzero(beyond)
    if not len(hits):
        return None
    return int(nonnull.index[hits[0]]), int(text.iloc[int(hits[0])])


INT64_MAX = 2**63 - 1
FLOAT32_MAX = 3.4028234663852886e38
FLOAT32_TINY = 1.1754943508222875e-38
"""float32's smallest normal number: below it float32 keeps fewer significant digits (1e-40
becomes 9.99995e-41) or none (1e-50 becomes 0.0)."""
_EXACT_IN_FLOAT64 = 2**53


def _first(series: pd.Series, mask: np.ndarray | Sequence[bool]) -> tuple[int, object] | None:
    import numpy as np

    hits = np.flatnonzero(mask)
    if not len(hits):
        return None
    value = series.iloc[int(hits[0])]
    return int(series.index[hits[0]]), value.item() if hasattr(value, "item") else value


def _floats(series: pd.Series) -> np.ndarray:
    return series.to_numpy(dtype="float64")


def _as_float32(x: np.ndarray) -> np.ndarray:
    import numpy as np

    with np.errstate(over="ignore"):
        return x.astype(np.float32).astype(np.float64)


def first_float32_overflow(series: pd.Series) -> tuple[int, object] | None:
    """A finite value beyond float32's range, which float32 would store as inf."""
    import numpy as np

    x = _floats(series)
    return _first(series, np.isfinite(x) & np.isinf(_as_float32(x)))


def float32_underflow(series: pd.Series) -> tuple[int, int, float] | None:
    """(count, first row, first value) of the values float32 would store as 0.0 or with fewer
    digits than its usual 24 bits: non-zero and below its smallest normal number, and not
    already a float32 value (a float32 source column is stored as it is)."""
    import numpy as np

    x = _floats(series)
    with np.errstate(under="ignore"):
        mask = (x != 0) & (np.abs(x) < FLOAT32_TINY) & (_as_float32(x) != x)
    count = int(np.count_nonzero(mask))
    if not count:
        return None
    row, value = _first(series, mask)  # type: ignore[misc]
    return count, row, float(value)  # type: ignore[arg-type]  # a float column's value


def first_inexact_whole_float(series: pd.Series) -> tuple[int, float] | None:
    """A whole number up to 2**53 that float32 cannot hold exactly."""
    import numpy as np

    x = _floats(series)
    with np.errstate(invalid="ignore"):
        hit = _first(series, (x == np.floor(x)) & (np.abs(x) <= _EXACT_IN_FLOAT64) & (_as_float32(x) != x))
    return None if hit is None else (hit[0], float(hit[1]))  # type: ignore[arg-type]  # a float column's value


def first_fraction(series: pd.Series) -> tuple[int, object] | None:
    """A finite value that is not a whole number."""
    import numpy as np

    x = _floats(series)
    return _first(series, np.isfinite(x) & (x != np.floor(x)))


def first_beyond_int64(series: pd.Series) -> tuple[int, object] | None:
    """An unsigned value above int64's maximum."""
    from pandas.api import types as pdt

    if not pdt.is_unsigned_integer_dtype(series.dtype):
        return None
    return _first(series, series.to_numpy(dtype="uint64") > INT64_MAX)


def first_inexact_int(series: pd.Series) -> tuple[int, int] | None:
    """An integer that float32 cannot hold exactly (so the column must not become float)."""
    import numpy as np

    a = series.to_numpy(dtype="int64")
    x = a.astype(np.float64)
    f = _as_float32(x)
    hits = np.flatnonzero((np.abs(x) <= _EXACT_IN_FLOAT64) & (f != x))
    first = int(hits[0]) if len(hits) else None
    for i in np.flatnonzero(np.abs(x) > _EXACT_IN_FLOAT64):  # float64 rounds these: compare as ints
        if first is not None and i > first:
            break
        if int(f[i]) != int(a[i]):
            first = int(i)
            break
    return None if first is None else (int(series.index[first]), int(a[first]))


def first_misfit(series: pd.Series, kind: str, declared: bool = False) -> tuple[int, object]:
    """The first value of `series` that does not read as `kind` ("int", "float" or "bool"):
    text by the rules above (`declared`: as a column declared `kind` reads it)."""
    from pandas.api import types as pdt

    nonnull = series.dropna()
    mask = None
    if pdt.is_string_dtype(nonnull.dtype) or pdt.is_object_dtype(nonnull.dtype):
        mask = ~fits_text(nonnull.astype("string"), kind, declared)
    return _first(nonnull, mask if mask is not None and mask.any() else [True])  # type: ignore[return-value]


def as_float32(value: float) -> str:
    """`value` as float32 stores it, written as a whole number where it is one."""
    import numpy as np

    with np.errstate(over="ignore"):
        f = float(np.float32(value))
    return str(int(f)) if f.is_integer() else repr(f)

"""Column types: what the first pass learns of each column of a table, chunk by chunk.

A column's kind ("int", "float", "bool", "string", "category") comes from its first chunk of
values; a later value that does not fit is refused by column, row and value, except that ints
widen to floats. Parquet columns carry their type. Text (every CSV field, and the values of
Hive partition folders) is typed by the rules of `values`: a number only as a program writes
one, so `01234` and `1E5` stay text, and the summary says why (`Column.notes`). A type declared
with `column_types` replaces the inference. Values float32 or int64 would change are refused
(`Column.float_problem`, `Column.add`).

The first pass goes on after a problem and reports them all at once (`Problems`), so a table
with three problems takes one run to learn of them, not three.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd  # imported where a frame is read

from tfpipe.errors import DataError
from tfpipe.format.schema import kind_for_pandas
from tfpipe.modalities.tables.convert import values

KIND_NAMES = {
    "int": "integers",
    "float": "numbers",
    "bool": "booleans",
    "string": "text",
    "category": "text",
}
DECLARABLE = ("int", "float", "bool", "string")
"""The types `column_types` (`--column-type COLUMN=TYPE`) declares."""


def kind_of(column: str, series: pd.Series, path: str) -> str:
    """The kind of a chunk of typed values (a Parquet column, or text once typed)."""
    import pandas as pd
    from pandas.api import types as pdt

    if series.isna().all():
        return "null"
    dtype = series.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        return "category"
    if pdt.is_bool_dtype(dtype):
        return "bool"
    if pdt.is_object_dtype(dtype):
        nonnull = series.dropna()
        if all(isinstance(v, str) for v in nonnull):
            return "string"
        if all(isinstance(v, bool) for v in nonnull):
            return "bool"
        bad = next(v for v in nonnull if not isinstance(v, str))
        raise DataError(
            f"{path}: column {column!r}: expected int, float, bool, string or categorical values. "
            f"Received: a value of type {type(bad).__name__} ({str(bad)[:60]!r}). Objects and "
            "nested lists are not supported; flatten or drop the column."
        )
    try:
        return kind_for_pandas(column, dtype)  # refuses unsupported dtypes by name
    except DataError as e:
        raise DataError(f"{path}: {e}") from None


@dataclasses.dataclass(slots=True)
class Column:
    """What the first pass knows of one column so far (mutable: it is filled chunk by chunk).

    Its fields are plain values, so a Beam worker's scan of one file travels as JSON
    (`filescan`, a file at a time on an engine's workers).
    """

    name: str
    kind: str = "null"
    sample: str = ""  # where the kind was taken from
    source_dtype: str = ""
    first_null: tuple[str, int] | None = None
    whole: tuple[str, int, float] | None = None  # a whole number float32 would change
    fraction: tuple[str, int, object] | None = None  # the first value that is not a whole number
    text: bool = False  # read as text (CSV fields, Hive partition values), typed by `values`
    declared: str = ""  # the type `column_types` gives it, or "" (inferred)
    failed: bool = False  # a problem was reported: the column's later values are not checked
    texts: int = 0  # non-null text values read
    numeric_like: int = 0  # of them, values pandas would read as numbers
    na_like: int = 0  # of them, values pandas would read as missing (kept as written)
    first_code: tuple[str, int, str] | None = None  # a number pandas reads that stays text here
    first_na: tuple[str, int, str] | None = None  # the first value pandas reads as missing
    first_nan: tuple[str, int] | None = None  # the first NaN (a value, not a null)
    underflow: tuple[str, int, float] | None = None  # the first value float32 would store as 0 or subnormal
    underflows: int = 0  # how many such values

    def add_text(self, text: pd.Series, path: str, csv_first_file: bool) -> None:
        """Takes in one chunk of this column's text (nulls where the field was empty or one of
        `null_values`), typed by the rules of `values` or as declared.

        Raises:
          DataError: a value that does not read as the declared type, an integer beyond
            int64, or what `add` refuses.
        """
        nonnull = text.dropna()
        if self.declared:
            fits = values.fits_text(nonnull, self.declared, declared=True)
            if not fits.all():
                row, value = values.first_misfit(text, self.declared, declared=True)
                raise DataError(
                    f"{path}: column {self.name!r}, row {row} holds {value!r}, but the column is "
                    f"declared {self.declared} (--column-type {self.name}={self.declared}, "
                    "column_types=). Fix the value, or declare another type (string keeps any text)."
                )
            kind = self.declared if len(nonnull) else "null"
        else:
            kind = values.text_kind(nonnull)
        self._count_text(nonnull, kind, path)
        if kind == "int":
            beyond = values.beyond_int64_text(nonnull)
            if beyond is not None:
                raise DataError(
                    f"{path}: column {self.name!r}, row {beyond[0]} holds {beyond[1]}. Expected "
                    f"values that fit int64 ({-(2**63)} to {values.INT64_MAX}), the integer type "
                    "of tf.train.Example. Drop, scale or clip the column, or store it as text "
                    f"(--column-type {self.name}=string)."
                )
        self.add(values.typed(text, kind), path, csv_first_file, text=text)

    def _count_text(self, nonnull: pd.Series, kind: str, path: str) -> None:
        """Counts what the notes need: values pandas would read as numbers or as missing."""
        self.texts += len(nonnull)
        if kind in ("int", "float"):
            self.numeric_like += len(nonnull)
        if kind != "string":
            return
        na = nonnull.isin(values.PANDAS_NA_TEXT).to_numpy(dtype=bool)
        number = nonnull.str.fullmatch(values.LOOSE_NUMBER).to_numpy(dtype=bool)
        self.na_like += int(na.sum())
        self.numeric_like += int(number.sum())
        if self.first_na is None and na.any():
            i = int(na.argmax())
            self.first_na = (path, int(nonnull.index[i]), str(nonnull.iloc[i]))
        code = number & ~values.fits_text(nonnull, "float")
        if self.first_code is None and code.any():
            i = int(code.argmax())
            self.first_code = (path, int(nonnull.index[i]), str(nonnull.iloc[i]))

    def add(self, series: pd.Series, path: str, csv_first_file: bool, text: pd.Series | None = None) -> None:
        """Takes in one chunk's typed values of this column (`text`: the text they were read
        from, for messages).

        Raises:
          DataError: a value that does not fit the column's type, or that float32 would change.
        """
        kind = kind_of(self.name, series, path)
        self.source_dtype = self.source_dtype or (self._dtype_name(series) if kind != "null" else "")
        if kind == "null" or kind == self.kind:
            pass
        elif self.kind == "null":
            self.kind = kind
            self.sample = f"as read from {path} row {int(series.first_valid_index())} on"
        elif {self.kind, kind} == {"int", "float"}:
            self.kind = "float"
        elif self.kind in ("string", "category"):
            self.kind = "string"
        else:
            raise DataError(self._type_change(series if text is None else text, path, csv_first_file))
        if kind in ("int", "float") and self.kind in ("int", "float"):
            self._check_numbers(kind, series, path)
        if self.first_null is None:
            null = series.isna().to_numpy()
            if null.any():
                self.first_null = (path, int(series.index[null.argmax()]))

    def _dtype_name(self, series: pd.Series) -> str:
        """The source dtype, for the manifest. Parquet floats are read as nullable Float32/64
        only to keep NaN apart from null; their source dtype is the numpy one they are stored
        as (float32, float64), as manifests have always named it."""
        from pandas.api import types as pdt

        name = str(series.dtype)
        return name.lower() if not self.text and pdt.is_float_dtype(series.dtype) else name

    def _type_change(self, series: pd.Series, path: str, csv_first_file: bool) -> str:
        row, value = values.first_misfit(series, self.kind)
        hint = (
            f" To keep the column as text, declare it: --column-type {self.name}=string "
            "(column_types=); or pass --chunk-rows (chunk_rows=) larger than "
            f"{row} so that the first chunk holds this value."
            if csv_first_file or self.text
            else ""
        )
        return (
            f"{path}: column {self.name!r}, row {row} holds {value!r}, but the column holds "
            f"{KIND_NAMES[self.kind]} ({self.sample}). Expected one type per column: tfpipe takes a "
            "column's type from its first chunk of values and refuses a later value that does not "
            f"fit, rather than re-typing the column in silence. Fix or remove the value.{hint}"
        )

    def _check_numbers(self, kind: str, series: pd.Series, path: str) -> None:
        """Refuses a value beyond the Example type's range; notes the first whole number that
        float32 would change and the first fraction, in case the column ends up float."""
        nonnull = series.dropna()
        inexact: Callable[[pd.Series], tuple[int, float] | None]
        if kind == "int":
            beyond, inexact = values.first_beyond_int64(nonnull), values.first_inexact_int
            limit = f"that fit int64 (at most {values.INT64_MAX}), the integer type of tf.train.Example"
        else:
            beyond, inexact = values.first_float32_overflow(nonnull), values.first_inexact_whole_float
            limit = (
                f"within float32's range (±{values.FLOAT32_MAX:.4g}; beyond it they would be "
                "written as inf), the only float type of tf.train.Example"
            )
        if beyond is not None:
            raise DataError(
                f"{path}: column {self.name!r}, row {beyond[0]} holds {beyond[1]!r}. Expected values "
                f"{limit}. Drop, scale or clip the column, or store it as text."
            )
        if self.whole is None:
            found = inexact(nonnull)
            self.whole = None if found is None else (path, *found)
        if kind == "float" and self.fraction is None:
            fraction = values.first_fraction(nonnull)
            self.fraction = None if fraction is None else (path, *fraction)
        if kind == "float":
            self._check_small(nonnull, path)

    def _check_small(self, nonnull: pd.Series, path: str) -> None:
        """Counts the values float32 would store as 0.0 or a subnormal, and finds the first NaN."""
        import numpy as np

        under = values.float32_underflow(nonnull)
        if under is not None:
            self.underflows += under[0]
            self.underflow = self.underflow or (path, under[1], under[2])
        if self.first_nan is None:
            nan = np.isnan(nonnull.to_numpy(dtype="float64"))
            if nan.any():
                self.first_nan = (path, int(nonnull.index[nan.argmax()]))

    def float_problem(self) -> str | None:
        """Why this column cannot be written as float32 without changing values, if it cannot."""
        if self.kind != "float" or self.whole is None or self.failed:
            return None
        path, row, value = self.whole
        if self.fraction:
            fpath, frow, fvalue = self.fraction
            fix = f"It is float because {fpath} row {frow} holds {fvalue!r}; if the column is integers, fix that value."
        else:
            fix = (
                "It is float in the source; if it holds integers, store it as an integer type "
                "(nullable ones such as pandas 'Int64' or Arrow int64 keep their nulls)."
            )
        return (
            f"{path}: column {self.name!r}, row {row} holds the whole number {int(value)}, which float32 "
            "(the only float type of tf.train.Example) cannot hold exactly: it would be written as "
            f"{values.as_float32(value)}. Expected integers to stay exact. {fix}"
        )

    def underflow_problem(self) -> str | None:
        """Why float32 would change this column's smallest values, if it would."""
        if self.kind != "float" or self.underflow is None or self.failed:
            return None
        import numpy as np

        path, row, value = self.underflow
        count = f"{self.underflows} value{'s' if self.underflows > 1 else ''}"
        with np.errstate(under="ignore"):
            stored = repr(float(np.float32(value)))
        fix = (
            f"Store the column as text (--column-type {self.name}=string, column_types=), or scale it"
            if self.text
            else "Scale the column"
        )
        return (
            f"{path}: column {self.name!r} holds {count} below float32's smallest normal number "
            f"({values.FLOAT32_TINY:.4g}), first row {row}: {value!r}, which float32 (the only float "
            f"type of tf.train.Example) would store as {stored}. Expected values float32 holds to "
            f"its usual 7 digits: a value that becomes 0.0, or loses its digits, is changed data. {fix} "
            "(multiply it, or store its log) so its values are normal float32 numbers."
        )

    def note(self) -> str | None:
        """What the summary says of a text column pandas would have read otherwise, if anything."""
        if not self.text or self.declared or self.failed or self.kind != "string":
            return None
        na = fix_na = None
        if self.first_na is not None:
            path, row, token = self.first_na
            count = f"{self.na_like} value{'s' if self.na_like > 1 else ''}"
            na = f"{count} such as {token!r} ({path} row {row}), which pandas reads as missing"
            fix_na = f"if {token!r} means missing, pass --null-values {shlex.quote(token)} (null_values=[{token!r}])"
        if not (self.numeric_like and self.numeric_like + self.na_like == self.texts):
            return f"column {self.name!r} holds {na}, kept as written; {fix_na}." if na else None
        why, fixes = [], []
        if self.first_code is not None:
            path, row, code = self.first_code
            zero = code.strip().lstrip("+-")[:1] == "0"
            what = (
                "has a leading zero, which a number would drop"
                if zero
                else "is a code, not a number as programs write one"
            )
            why.append(f"{code!r} ({path} row {row}) {what}")
            fixes.append(
                f"to store numbers anyway, pass --column-type {self.name}=int or =float (column_types=)"
            )
        if na is not None:
            why.append(f"{na}, is kept as written")
            fixes.append(f"{fix_na} to store numbers with nulls")
        return f"column {self.name!r} is stored as text: it holds numbers, but {' and '.join(why)}; {'; '.join(fixes)}."


def null_value_error(where: str, row: int, column: str) -> DataError:
    """A null in a column that may not hold one (missing="error"), named by file, column and row."""
    return DataError(
        f"{where}: column {column!r}, row {row} (0-based, header excluded) is null. Expected a "
        "value: nulls are never written as plausible values. Pass --missing fill "
        f"(missing='fill') to write a default plus a '{column}/missing' mask."
    )

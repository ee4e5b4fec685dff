"""Mixed-type tables with a learnable label: every source type the converter maps, with
nulls where asked. Deterministic per seed; pandas is imported when a table is made.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import numpy as np

from tfpipe.errors import ConfigError, field_error

if TYPE_CHECKING:
    import pandas as pd  # imported lazily: image-only users don't pay for it

# One of each source type the converter maps (int64, int32, float64, float32, bool, str,
# category); wider tables repeat the mix below, mostly floats as in Higgs- or Criteo-like data.
_BASE_KINDS = ("int64", "int32", "float64", "float32", "bool", "str", "cat")
_EXTRA_KINDS = ("float32", "float32", "float64", "int64", "float32", "cat", "int32", "bool", "str")
# Non-ASCII, a comma and a quote make CSV round trips prove something. No "": CSV reads it as NaN.
_WORDS = np.array(
    ["alpha", "beta", "gamma", "naïve", "東京", "x" * 40, "delta, with comma", 'quote "q"'], object
)
_CATEGORIES = ["red", "green", "blue", "cyan", "magenta"]
_NULLABLE = {"int64": "Int64", "int32": "Int32", "bool": "boolean"}  # pandas' NA-capable dtypes


def make_table(
    n_rows: int,
    *,
    seed: int = 0,
    columns: int | None = None,
    with_nulls: bool = False,
    label_classes: int = 2,
) -> pd.DataFrame:
    """Returns a mixed-type table with a learnable int64 `label` column, deterministic per seed.

    Args:
      n_rows: rows.
      seed: the same seed gives the same table.
      columns: feature columns; None (or 7) gives one each of int64, int32, float64, float32,
        bool, str and category. More repeat a float-heavy mix: `columns=40` is the tabular
        benchmark's table. Names are `<kind>_<k>`, e.g. `float32_0`.
      with_nulls: about 5% nulls in every feature column, at least one each: NaN in floats,
        pandas NA in ints (nullable `Int64`/`Int32`) and bools (`boolean`), missing strings
        and categories. The label never has nulls.
      label_classes: the label takes values 0..label_classes-1.

    Example:
      >>> make_table(37, seed=1).dtypes["int32_0"]
      dtype('int32')
    """
    import pandas as pd

    if n_rows < 1:
        raise field_error(ConfigError, "n_rows", "an int >= 1", n_rows)
    n_cols = len(_BASE_KINDS) if columns is None else columns
    if n_cols < 1:
        raise field_error(ConfigError, "columns", "None or an int >= 1", columns)
    if label_classes < 2:
        raise field_error(ConfigError, "label_classes", "an int >= 2", label_classes)
    kinds = (_BASE_KINDS + _EXTRA_KINDS * (n_cols // len(_EXTRA_KINDS) + 1))[:n_cols]
    rng = np.random.default_rng([seed, 3])
    data: dict[str, object] = {}
    score = rng.normal(0, 0.5, n_rows)  # label noise
    seen: dict[str, int] = {}
    for kind in kinds:
        k = seen[kind] = seen.get(kind, -1) + 1
        values = _column(rng, kind, k, n_rows)
        score += _standardized(values) * rng.normal()
        if with_nulls:
            null = rng.random(n_rows) < 0.05
            null[(len(data) * 7) % n_rows] = True
            values = _with_nulls(values, null, kind)
        data[f"{kind}_{k}"] = values
    cuts = np.quantile(score, np.linspace(0, 1, label_classes + 1)[1:-1])
    data["label"] = np.searchsorted(cuts, score).astype(np.int64)
    return pd.DataFrame(data)


def write_table(df: pd.DataFrame, path: str | os.PathLike[str]) -> str:
    """Writes `df` without its index, as CSV (`.csv`, `.csv.gz`) or Parquet (`.parquet`, `.pq`)."""
    path = os.fspath(path)
    if path.endswith((".csv", ".csv.gz")):
        df.to_csv(path, index=False)
    elif path.endswith((".parquet", ".pq")):
        df.to_parquet(path, index=False)
    else:
        raise field_error(ConfigError, "path", "a .csv, .csv.gz, .parquet or .pq name", path)
    return path


def _column(rng: np.random.Generator, kind: str, k: int, n: int) -> object:
    import pandas as pd

    if kind == "int64":
        # The first int64 column spans 2**62, so a float round trip would show.
        high = 2**62 if k == 0 else 10_000
        return rng.integers(-high, high, n, dtype=np.int64)
    if kind == "int32":
        return rng.integers(-(2**31), 2**31, n, dtype=np.int32)
    if kind == "float64":
        return rng.normal(0, 1e3, n)
    if kind == "float32":
        return rng.standard_normal(n, dtype=np.float32)
    if kind == "bool":
        return rng.random(n) < 0.3
    if kind == "str":
        return _WORDS[rng.integers(0, len(_WORDS), n)]
    return pd.Categorical.from_codes(rng.integers(0, len(_CATEGORIES), n), _CATEGORIES)


def _standardized(values: object) -> np.ndarray:
    import pandas as pd

    if isinstance(values, pd.Categorical):
        x = values.codes.astype(np.float64)
    elif values.dtype == object:
        x = np.fromiter((len(v) for v in values), np.float64, len(values))
    else:
        x = np.asarray(values, np.float64)
    return (x - x.mean()) / (x.std() + 1e-9)


def _with_nulls(values: object, null: np.ndarray, kind: str) -> object:
    import pandas as pd

    if kind in _NULLABLE:
        out = pd.array(values, dtype=_NULLABLE[kind])
        out[null] = pd.NA
        return out
    if kind == "cat":
        return pd.Categorical.from_codes(np.where(null, -1, values.codes), values.categories)
    out = values.copy()
    out[null] = None if kind == "str" else np.nan
    return out

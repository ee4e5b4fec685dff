"""JSON Lines files as the table reader sees them: one flat JSON object a line, as
`DataFrame.to_json(orient="records", lines=True)` writes a table. Lines are read through the one
text decoder, as a text corpus's are (compressed by content, UTF-16/32, universal newlines), and
a key given twice in a line is refused.

A field is a column, typed by JSON itself, never by guessing from text: strings stay strings
(`"007"` too), numbers are int64 or float, `true`/`false` booleans, `null` (or a field a line
leaves out) is null, and a NaN literal stays NaN, apart from null. A field whose lines hold two
JSON types (a number and a string) is refused by line, as is a nested object or list, an
integer beyond int64, and a field the first chunk of lines did not have (its earlier rows would
have no value for it).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from tfpipe.errors import DataError
from tfpipe.format.jsonobject import JsonObject
from tfpipe.modalities.text.convert import listing as text_listing
from tfpipe.modalities.text.convert import reader as text_reader

if TYPE_CHECKING:
    import pandas as pd  # imported where a file is read


SUFFIXES = (".jsonl", ".ndjson")
_INT64 = 1 << 63
_KIND = {str: "string", bool: "bool", int: "int", float: "float"}
_WORDS = {"string": "strings", "bool": "booleans", "int": "integers", "float": "numbers"}


looks_like = text_listing.looks_like_json_lines


def named(path: str) -> bool:
    """Whether the name is a JSON Lines file's (`t.jsonl`, `t.ndjson`, also compressed:
    `t.jsonl.gz`)."""
    return text_listing.kind_of(path) == "jsonl"


def first_object(path: str) -> JsonObject | None:
    """The first record of a JSON Lines file, or None when its first line is not one."""
    try:
        for _, obj in text_reader.json_objects(path):
            return obj
    except DataError:
        return None
    return None


def frames(path: str, chunk_rows: int, kinds: dict[str, str] | None = None) -> Iterator[Any]:
    """The file's records as DataFrames of `chunk_rows` rows, typed as JSON types them (see the
    module doc), or as `kinds` says (the second pass: its columns, its types).

    Raises:
      DataError: a line that does not parse or breaks the rules above, named by line.
    """
    names = list(kinds) if kinds is not None else None
    rows: list[JsonObject] = []
    lines: list[int] = []
    for number, obj in text_reader.json_objects(path):
        rows.append(obj)
        lines.append(number)
        if len(rows) == chunk_rows:
            frame = _frame(path, rows, lines, names, kinds)
            names = list(frame.columns)
            yield frame
            rows, lines = [], []
    if rows:
        yield _frame(path, rows, lines, names, kinds)


def _frame(
    path: str,
    rows: list[JsonObject],
    lines: list[int],
    names: list[str] | None,
    kinds: dict[str, str] | None,
) -> pd.DataFrame:
    import pandas as pd

    if names is None:  # the first chunk: every field, in the order lines first name them
        names = list(dict.fromkeys(k for row in rows for k in row))
    else:
        known = set(names)
        for row, number in zip(rows, lines, strict=True):
            extra = [k for k in row if k not in known]
            if extra:
                raise DataError(
                    f"{path}: line {number}: field(s) {extra[:5]} are not among the fields of the "
                    f"records before it {names[:10]}. Expected the fields of the first records "
                    "(their rows would have no value for a new one): add it to every record, as a null "
                    "where there is none."
                )
    columns = {
        name: _column(path, name, [row.get(name) for row in rows], lines, (kinds or {}).get(name))
        for name in names
    }
    return pd.DataFrame(columns, index=pd.RangeIndex(len(rows)))


def _column(
    path: str, name: str, values: list[Any], lines: list[int], kind: str | None
) -> pd.api.extensions.ExtensionArray:
    """One field's values as a nullable pandas array of its JSON type (or of `kind`)."""
    import numpy as np
    import pandas as pd

    seen = ""
    for value, number in zip(values, lines, strict=True):
        if value is None:
            continue
        now = _KIND.get(type(value))
        if now is None:
            raise DataError(
                f"{path}: line {number}: field {name!r} holds {type(value).__name__} "
                f"{str(value)[:60]}. Expected a string, number, boolean or null: a nested value has "
                "no column type. Flatten it (pandas.json_normalize) or drop the field."
            )
        if now == "int" and not -_INT64 <= value < _INT64:
            raise DataError(
                f"{path}: line {number}: field {name!r} holds {value}. Expected integers that fit "
                "int64, the integer type of tf.train.Example. Store it as a string, or scale it."
            )
        seen = _joined(path, name, seen or kind or now, now, number, value)
    kind = kind or seen or "null"
    if kind in ("float", "null"):
        mask = np.array([v is None for v in values], dtype=bool)
        data = np.array([0.0 if v is None else float(v) for v in values], dtype=np.float64)
        return pd.arrays.FloatingArray(data, mask)  # a NaN stays a value, apart from null
    return pd.array(values, dtype={"int": "Int64", "bool": "boolean", "string": "string"}[kind])


def _joined(path: str, name: str, have: str, now: str, number: int, value: Any) -> str:
    """The field's type once `value` (of JSON type `now`) joins values of type `have`: ints
    widen to numbers; any other mix is refused by line."""
    if have == now or (have == "float" and now == "int"):
        return have
    if have == "int" and now == "float":
        return "float"
    raise DataError(
        f"{path}: line {number}: field {name!r} holds {value!r}, but the lines before it hold "
        f"{_WORDS[have]}. Expected one JSON type per field: a column has one type, and tfpipe does "
        "not re-type a column in silence. Fix the value, or store every value of the field as a string."
    )

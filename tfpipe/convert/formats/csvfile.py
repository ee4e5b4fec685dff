"""CSV files as text: opening (compression, encoding), what is missing, and the shape check of
the first pass.

pandas reads the values, but it cannot be trusted with a file's shape: a row with more fields
than the header turns the leading fields into an index (scikit-learn's `wine_data.csv` kept 5
of 14 columns), and a row with fewer is padded with nulls. So the first pass reads every row
with the `csv` module and refuses, by line number, any row whose field count differs from the
header's, as tf.data's CsvDataset does. A `.csv` header of one field holding tabs or
semicolons is another separator, refused by name; an empty header field (R's `write.csv` and
pandas' `to_csv` write one above the row names) keeps pandas' name `Unnamed: <i>`, said in a
note.

Only an empty field is missing: pandas' own list (`NA`, `None`, `null`, `nan`, ...) is not
applied, since `NA` is Namibia and `None` an answer; `null_values` names more (`na_values`).
"""

from __future__ import annotations

import csv
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, BinaryIO

from tfpipe.convert.formats import jsonlfile, textfile
from tfpipe.errors import DataError

if TYPE_CHECKING:
    from tfpipe.convert.problems import Problems

COMPRESSED = (".gz", ".bz2", ".xz", ".zip")
"""Suffixes of compressed CSV files (`t.csv.gz`), so a folder lists them as CSV. The bytes are
decompressed by their content whatever the name (`textfile.open_decompressed`)."""
WHAT = "CSV text"
# A text field may be long (a review, a document); the csv module's default cap is 128 KiB and
# pandas has none. Raising a limit changes nothing for other users of the csv module.
csv.field_size_limit(max(csv.field_size_limit(), 1 << 30))


def separator(path: str) -> str:
    """Tab for `.tsv` (also `.tsv.gz`), else comma."""
    stem, suffix = os.path.splitext(path.lower())
    if suffix in COMPRESSED:
        suffix = os.path.splitext(stem)[1]
    return "\t" if suffix == ".tsv" else ","


def na_values(names: list[str], null_values: Mapping[str, tuple[str, ...]]) -> dict[int, list[str]]:
    """pandas' `na_values` by column position: the empty field, plus what `null_values` names
    for every column (key "*") and for the column itself."""
    every = null_values.get("*", ())
    return {i: ["", *every, *null_values.get(name, ())] for i, name in enumerate(names)}


def column_names(header: list[str]) -> list[str]:
    """The header's names as pandas gives them: an empty one is `Unnamed: <position>`."""
    return [name or f"Unnamed: {i}" for i, name in enumerate(header)]


def open_binary(path: str, encoding: str) -> tuple[BinaryIO, str]:
    """The file's bytes, decompressed by content, and the codec that reads them: the one a
    byte-order mark says, or `encoding` (`textfile.codec`).

    Raises:
      DataError: the bytes are not text (naming their format, such as Parquet or an Excel
        workbook), or contradict `encoding` (a byte-order mark, NUL bytes of UTF-16).
    """
    return textfile.open_bytes(path, encoding, WHAT)


def _blank(row: list[str]) -> bool:
    """A line pandas skips: empty, or only spaces and tabs (a lone `""` is a one-field row)."""
    return not row or (len(row) == 1 and row[0] != "" and not row[0].strip(" \t"))


def check_shape(
    path: str, encoding: str, problems: Problems | None = None
) -> tuple[list[str] | None, list[str]]:
    """Reads every row; returns the column names (as pandas names them) and notes on the header.

    With `problems`, a row whose field count differs from the header's is added to it (every
    one, up to its limit) and the names come back as None: the rows' values would be shifted.

    Raises:
      DataError: an empty file, a header naming a column twice or holding another separator,
        a row whose field count differs from the header's (naming the 1-based line, as an
        editor shows it) without `problems`, or text that is not in `encoding` (naming the
        encoding the bytes look like).
    """
    ragged = 0
    if jsonlfile.looks_like(textfile.read_head(path)):  # never JSON parsed as CSV
        raise DataError(
            f"{path}: expected {WHAT}. Received: JSON Lines (its first line is a JSON object). Pass "
            "--format jsonl (format='jsonl') to read its records as a table."
        )
    with textfile.open_text(path, encoding, WHAT, newline="") as text:
        reader = csv.reader(text, delimiter=separator(path))
        try:
            header = next((row for row in reader if not _blank(row)), None)
            if header is None:
                raise DataError(f"{path}: expected a CSV header line and rows. Received: an empty file")
            _check_header(path, header, reader.line_num)
            width, end = len(header), reader.line_num
            header_line = end
            for row in reader:
                if len(row) != width and not _blank(row):
                    message = _ragged(path, end + 1, width, len(row), reader.line_num - end, header_line)
                    if problems is None:
                        raise DataError(message)
                    problems.add(message)
                    ragged += 1
                    if ragged >= problems.limit:
                        break
                end = reader.line_num
        except UnicodeError:  # a decode error, or a codec's own (a stream it cannot start)
            raise DataError(textfile.undecodable(path, encoding)) from None
        except csv.Error as e:
            raise DataError(f"{path}, line {reader.line_num}: expected CSV text. Received: {e}") from None
    unnamed = [i for i, name in enumerate(header) if not name]
    notes = [
        f"{path}: column {i} has no name in the header (as R's write.csv and pandas' to_csv "
        f"write one above the row names); it is kept as {f'Unnamed: {i}'!r}, pandas' name for it."
        for i in unnamed
    ]
    return (None if ragged else column_names(header)), notes


def _check_header(path: str, header: list[str], line: int) -> None:
    named = [n for n in header if n]
    dupes = sorted({n for n in named if named.count(n) > 1})
    if dupes:
        raise DataError(
            f"{path}, line {line}: expected unique column names in the header. "
            f"Received: {dupes} more than once in {header}"
        )
    if len(header) == 1 and separator(path) == ",":
        for char, name in (("\t", "tab"), (";", "semicolon")):
            if char in header[0]:
                rename = (
                    " Rename it to .tsv, which is read with tabs."
                    if char == "\t"
                    else (
                        " tfpipe reads comma-separated .csv and tab-separated .tsv files: convert it to one of them."
                    )
                )
                raise DataError(
                    f"{path}, line {line}: expected comma-separated values (the name ends in .csv). "
                    f"Received: a header of one field that holds {header[0].count(char)} {name}(s), "
                    f"{header[0][:80]!r}: the file is {name}-separated, and every row would be one "
                    f"column.{rename}"
                )


def _ragged(path: str, line: int, width: int, got: int, lines: int, header_line: int) -> str:
    spans = f" (a quoted field spans {lines} lines)" if lines > 1 else ""
    return (
        f"{path}, line {line}{spans}: expected {width} fields, as many as the header (line "
        f"{header_line}) names. "
        f"Received: {got} fields. A longer row would shift or lose columns and a shorter one would "
        f"read as nulls, so tfpipe converts neither. Fix the row; if line {header_line} is not a header (as in "
        f"scikit-learn's bundled CSVs), replace it with one naming all {max(got, width)} columns."
    )

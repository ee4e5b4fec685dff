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

import bz2
import codecs
import csv
import gzip
import io
import lzma
import os
import zipfile
from collections.abc import Mapping
from typing import TYPE_CHECKING, BinaryIO

from tfpipe import storage
from tfpipe.errors import DataError

if TYPE_CHECKING:
    from tfpipe.convert.infer import Problems

_DECOMPRESS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}
COMPRESSED = (*_DECOMPRESS, ".zip")
_BOMS = (  # UTF-32 first: its little-endian mark starts with UTF-16's
    (codecs.BOM_UTF32_LE, "UTF-32 (little-endian)", "utf-32"),
    (codecs.BOM_UTF32_BE, "UTF-32 (big-endian)", "utf-32"),
    (codecs.BOM_UTF16_LE, "UTF-16 (little-endian)", "utf-16"),
    (codecs.BOM_UTF16_BE, "UTF-16 (big-endian)", "utf-16"),
)
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


def open_binary(path: str) -> BinaryIO:
    """The file's bytes, decompressed by suffix (.gz, .bz2, .xz, or a .zip of one file)."""
    raw = storage.open_read(path)
    suffix = os.path.splitext(path.lower())[1]
    if suffix in _DECOMPRESS:
        return _DECOMPRESS[suffix](raw)  # type: ignore[operator]
    if suffix == ".zip":
        return _ZipMember(path, raw)
    return raw


class _ZipMember(io.BufferedReader):
    """The one file of a zip archive; closing it closes the archive and the file under it."""

    def __init__(self, path: str, raw: BinaryIO) -> None:
        self._closers = [raw.close]
        try:
            archive = zipfile.ZipFile(raw)
            self._closers.insert(0, archive.close)
            names = [n for n in archive.namelist() if not n.endswith("/")]
            if len(names) != 1:
                raise DataError(
                    f"{path}: expected a zip archive of one CSV file. "
                    f"Received: {len(names)} files {names[:5]}"
                )
            super().__init__(archive.open(names[0]))  # type: ignore[arg-type]
        except BaseException:
            for close in self._closers:
                close()
            raise

    def close(self) -> None:
        try:
            super().close()
        finally:
            for close in self._closers:
                close()


def _text(path: str, encoding: str) -> io.TextIOWrapper:
    # pandas drops a UTF-8 byte-order mark from the header; utf-8-sig makes the csv module agree.
    codec = "utf-8-sig" if codecs.lookup(encoding).name == "utf-8" else encoding
    return io.TextIOWrapper(open_binary(path), encoding=codec, newline="")


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
    with _text(path, encoding) as text:
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
        except UnicodeDecodeError:
            raise DataError(_encoding_problem(path, encoding)) from None
        except csv.Error as e:
            hint = (
                " (NUL bytes: the file may be UTF-16 or UTF-32; pass --encoding utf-16 (encoding='utf-16'))"
                if "NUL" in str(e)
                else ""
            )
            raise DataError(
                f"{path}, line {reader.line_num}: expected CSV text. Received: {e}{hint}"
            ) from None
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


def _encoding_problem(path: str, encoding: str) -> str:
    """What the bytes look like, for a file that does not decode as `encoding`."""
    with open_binary(path) as f:
        head = f.read(4096)
        found, suggest = "", "latin-1"
        for bom, name, codec in _BOMS:
            if head.startswith(bom):
                found, suggest = f"a {name} byte-order mark", codec
                break
        if not found and b"\x00" in head:
            found, suggest = "NUL bytes, as in UTF-16 or UTF-32 text", "utf-16"
        if not found:
            f.seek(0)
            for number, line in enumerate(f, 1):
                try:
                    line.decode(encoding)
                except UnicodeDecodeError as e:
                    bad = line[e.start : e.end]
                    # Both read any byte; cp1252 puts letters and quotes where latin-1 has controls.
                    windows = any(0x80 <= b < 0xA0 for b in line) and _decodes(line, "cp1252")
                    suggest = "cp1252" if windows else "latin-1"
                    found = (
                        f"bytes {bad!r} on line {number} that are not {encoding}; the line reads as "
                        f"{suggest}{'' if windows else ' (or cp1252)'}"
                    )
                    break
            else:
                found = f"bytes that are not {encoding}"
    return (
        f"{path}: expected {encoding} text (encoding={encoding!r}). Received: {found}. "
        f"Pass the file's encoding: --encoding {suggest} (encoding={suggest!r})."
    )


def _decodes(data: bytes, encoding: str) -> bool:
    try:
        data.decode(encoding)
    except UnicodeDecodeError:
        return False
    return True

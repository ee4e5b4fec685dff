"""Text corpus files: reading their documents, with where each one is (listing them is
`listing`'s).

The kinds of file:
- JSON Lines (`.jsonl`, `.ndjson`, and `.json` holding JSON Lines, by its content, as
  `datasets`' `Dataset.to_json` writes it): one JSON object a line, the document in the field
  `text_field`; blank lines are left out (and counted). A key given twice in a line is refused.
- plain text (`.txt`): the whole file is one document, or with `lines` each line is one.
- Parquet (`.parquet`, `.pq`) and Arrow IPC (`.arrow`): a string column named `text_field`, as
  Hugging Face `datasets` writes them (`textcolumns`; a `ClassLabel` label's names are read
  from the file's `huggingface` schema metadata).
- a folder `Dataset.save_to_disk` wrote (`hfsaved`): its Arrow files, in the order its
  `state.json` lists them, its `ClassLabel` names from `dataset_info.json`.

JSON Lines and text files are read through the one text decoder (`textfile`): compressed ones
(gzip, bzip2, xz, a zip of one file) by their content, named `c.jsonl.gz`, `c.txt.xz` or not;
UTF-16 or UTF-32 by a byte-order mark or their NUL bytes; a UTF-8 byte-order mark dropped.
Lines end as Python's universal newlines end them (\\n, \\r\\n, or a lone \\r).

Every document keeps its place (file and line, or row for Parquet), for messages. Text that is
not UTF-16/32 must be UTF-8: invalid bytes are refused by file, line and byte offset, as are a
JSON line that does not parse, a missing or non-string field, and a null. One file listed
under two names (a symbolic link beside its target) is refused: it would be read twice.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import json
import re
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO, NamedTuple

from tfpipe import storage
from tfpipe.convert.formats import textcolumns, textfile
from tfpipe.convert.formats.textfile import UNREADABLE, strip_bom
from tfpipe.errors import DataError
from tfpipe.format.jsonobject import JsonObject
from tfpipe.modalities.text.convert.listing import COLUMNS, kind_of, read_as


@dataclasses.dataclass(frozen=True, slots=True)
class Reading:
    """How documents are read: the JSON field or Parquet column of the text and of the label,
    and whether a `.txt` file holds one document per line."""

    text_field: str = "text"
    label: str | None = None
    lines: bool = False


class Doc(NamedTuple):
    """A document: its text, its label as written (None without `label`), and its place: the
    1-based line of a text or JSON Lines file, or the 0-based row of a Parquet file."""

    text: str
    label: Any
    line: int


def where(path: str, line: int) -> str:
    """A document's place for messages: "file: line 12" or "file: row 11" (Parquet, Arrow)."""
    return f"{path}: {'row' if kind_of(path) in COLUMNS else 'line'} {line}"


Problem = Callable[[str], None]
"""Where a reader reports a document it cannot take and reads on (the first pass, which lists
every problem at once); without one, the reader raises DataError at the first."""


class Raw(NamedTuple):
    """A document as stored, not yet decoded: a line's bytes (JSON Lines, text by line), a
    whole file's, or a Parquet cell's (None: null) with its label; its line (or row), and the
    byte offset where it starts in the file. `parse` makes it a Doc: conversion workers do."""

    data: bytes | None
    label: Any
    line: int
    offset: int


def read_documents(
    path: str, reading: Reading, start: int = 0, problem: Problem | None = None
) -> Iterator[Doc]:
    """The documents of one corpus file, from the `start`-th on (0-based, counting documents).

    Raises:
      DataError: a document that cannot be read (invalid UTF-8, a JSON line that does not
        parse, a missing, null or non-string field), named by file and line or row; with
        `problem`, only what stops the file (a damaged gzip or Parquet file).
    """
    for raw in read_raw(path, reading, start):
        try:
            yield parse(raw, path, reading)
        except DataError as e:
            if problem is None:
                raise
            problem(str(e))


class Span(NamedTuple):
    """Where to start reading a plain UTF-8 file (uncompressed, local) of lines: the byte
    `offset` of a line's start and that line's number; `end`: the byte offset to stop before
    (-1: the file's end). A worker reads its own documents from one (`ranges`)."""

    offset: int
    line: int
    end: int = -1


def read_raw(path: str, reading: Reading, start: int = 0, span: Span | None = None) -> Iterator[Raw]:
    """The documents of one corpus file as stored, from the `start`-th on (counted from
    `span`'s line when given: the file is then read from that byte on, as plain UTF-8).

    Raises:
      DataError: the file cannot be read on (a damaged gzip or Parquet file, a missing column).
    """
    kind = read_as(path)
    if kind in COLUMNS:
        return _column_cells(path, kind, reading, start)
    if kind == "txt" and not reading.lines:
        return _whole_file(path, start)
    return _lines(path, start, kind == "jsonl", span)


def parse(raw: Raw, path: str, reading: Reading) -> Doc:
    """A stored document decoded (and for JSON Lines, parsed).

    Raises:
      DataError: it is not UTF-8, not a JSON object, or lacks its text or label, by line or row.
    """
    kind = read_as(path)
    if kind in COLUMNS:
        return _column_document(raw, path, reading)
    if raw.data is None:  # unreachable for text files; keeps the type checker honest
        raise DataError(f"{where(path, raw.line)}: expected text. Received: none")
    if kind == "txt" and not reading.lines:
        return Doc(_decode_whole(raw.data, path, raw.offset), None, 1)
    text = _decode(raw.data, path, raw.line, raw.offset)
    return (
        _json_document(text, reading, path, raw.line) if kind == "jsonl" else Doc(_line(text), None, raw.line)
    )


def _open(path: str) -> tuple[BinaryIO, str | None]:
    """The file's bytes, decompressed by content whatever its name, and the codec of text that
    is not UTF-8 (UTF-16 or UTF-32, by its byte-order mark or its NUL bytes), else None.

    Raises:
      DataError: the bytes are not text (Parquet, an image...), named by `textfile.codec`.
    """
    handle, codec = textfile.open_bytes(path, None, "a text corpus file (JSON Lines or plain text)")
    return handle, None if codec == "utf-8-sig" else codec


@functools.lru_cache(maxsize=256)
def _compressed(path: str) -> str | None:
    """The compression of a file by its first bytes ("gzip", ...), or None; for messages."""
    with storage.open_read(path) as f:
        return textfile.compression(f.read(16))


def _decode(data: bytes, path: str, line: int, offset: int) -> str:
    """`data` (line `line`, at byte `offset` of the file) as UTF-8, or a DataError naming the
    line and the byte offset of the bad bytes."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _utf8_error(path, line, offset + e.start, data[e.start : e.start + 4], e.reason) from None


def _utf8_error(path: str, line: int, offset: int, bad: bytes, reason: str) -> DataError:
    packed = _compressed(path)
    return DataError(
        f"{path}: line {line}, byte offset {offset}{' of the decompressed text' if packed else ''}: "
        f"expected UTF-8 text. Received: bytes {bad.hex(' ')} ({reason}). Re-encode the file as UTF-8."
    )


def _whole_file(path: str, start: int) -> Iterator[Raw]:
    if start > 0:
        return
    handle, codec = _open(path)
    with handle as f:
        raw = _read_all(f, path)
    if codec is not None:  # UTF-16 or UTF-32: passed on as UTF-8, as every document is
        try:
            yield Raw(raw.decode(codec).encode("utf-8"), None, 1, 0)
        except UnicodeDecodeError as e:
            line = raw[: e.start].decode(codec, "replace").count("\n") + 1
            raise _not_codec(path, line, codec, e) from None
        return
    data = strip_bom(raw)
    yield Raw(data, None, 1, len(raw) - len(data))


def _not_codec(path: str, line: int, codec: str, e: UnicodeDecodeError) -> DataError:
    return DataError(
        f"{path}: line {line}: expected {codec.upper()} text (its byte-order mark or NUL bytes say "
        f"so). Received: bytes that are not ({e.reason}). Re-encode the file as UTF-8."
    )


def _decode_whole(data: bytes, path: str, offset: int) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise _utf8_error(path, line, e.start + offset, data[e.start : e.start + 4], e.reason) from None


def _read_all(f: BinaryIO, path: str) -> bytes:
    try:
        return f.read()
    except UNREADABLE as e:
        raise DataError(f"{path}: expected a readable file. Received: {e}") from None


_LONE_CR = re.compile(rb"(?<=\r)(?!\n)")


def _split_lines(f: BinaryIO) -> Iterator[bytes]:
    """The lines of UTF-8 bytes, each with its end, split as Python's universal newlines split
    text: at \\n, \\r\\n and a lone \\r (old Mac files, or one stray in a mixed file)."""
    for raw in f:
        if b"\r" in raw and _LONE_CR.search(raw):
            yield from (part for part in _LONE_CR.split(raw) if part)
        else:
            yield raw


def _encoded_lines(f: BinaryIO, path: str, codec: str) -> Iterator[bytes]:
    """The lines of UTF-16 or UTF-32 text (universal newlines), as UTF-8 bytes ending in \\n."""
    number = 0
    text = io.TextIOWrapper(f, encoding=codec, newline=None)  # type: ignore[arg-type]
    try:
        for number, line in enumerate(text, 1):  # noqa: B007 (named in the error below)
            yield line.encode("utf-8")
    except UnicodeDecodeError as e:
        raise _not_codec(path, number + 1, codec, e) from None


def _lines(path: str, start: int, jsonl: bool, span: Span | None = None) -> Iterator[Raw]:
    """The lines of a JSON Lines file (blank lines left out) or a text file read by line; with
    `span`, those from its byte on, up to its end."""
    index, offset, number, end = 0, 0, 0, -1
    if span is None:
        handle, codec = _open(path)
    else:  # plain UTF-8, as the first pass found it (`ranges.plain_utf8`)
        handle, codec, (offset, number, end) = (
            storage.open_read(path),
            None,
            (span.offset, span.line - 1, span.end),
        )
        handle.seek(offset)
    with handle as f:
        lines = _split_lines(f) if codec is None else _encoded_lines(f, path, codec)
        while end < 0 or offset < end:
            try:
                raw = next(lines)
            except StopIteration:
                return
            except UNREADABLE as e:
                raise DataError(
                    f"{path}: line {number + 1}: expected a readable file. Received: {e}"
                ) from None
            number += 1
            if number == 1:
                offset += len(raw) - len(raw := strip_bom(raw))
            here, offset = offset, offset + len(raw)
            if jsonl and not raw.strip():
                continue  # a blank line holds no document (the first pass counts them)
            index += 1
            if index > start:
                yield Raw(raw, None, number, here)


def _line(text: str) -> str:
    """A line without its end (\\n, \\r\\n or a lone \\r)."""
    return text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith(("\n", "\r")) else text


class _Duplicated(dict):  # type: ignore[type-arg]
    """A JSON object that names a key more than once: `json` keeps the last value in silence."""

    keys_twice: list[str]


def _object(pairs: list[tuple[str, Any]]) -> JsonObject:
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    twice = _Duplicated(obj)
    names = [k for k, _ in pairs]
    twice.keys_twice = sorted({k for k in names if names.count(k) > 1})
    return twice


_DECODER = json.JSONDecoder(object_pairs_hook=_object)  # one, not one a line (json.loads' cost)


def json_object(text: str, path: str, number: int) -> JsonObject:
    """One line of a JSON Lines file as its JSON object.

    Raises:
      DataError: the line does not parse, is not an object, or names a key twice, by line.
    """
    try:
        obj = _DECODER.decode(text)
    except ValueError as e:
        raise DataError(
            f"{path}: line {number}: expected one JSON object. Received: {text.strip()[:80]!r}, which "
            f"does not parse ({e})"
        ) from None
    if not isinstance(obj, dict):
        raise DataError(f"{path}: line {number}: expected a JSON object. Received: {type(obj).__name__}")
    if isinstance(obj, _Duplicated):
        raise DataError(
            f"{path}: line {number}: expected each key once in a JSON object. Received: key(s) "
            f"{obj.keys_twice[:5]} more than once, where one value would be kept in silence (as a "
            "table refuses two columns of one name)"
        )
    return obj


def json_objects(path: str) -> Iterator[tuple[int, JsonObject]]:
    """(line number, object) of each line of a JSON Lines file, blank lines left out, read
    through the one text decoder as a corpus is (compression, UTF-16/32, universal newlines).

    Raises:
      DataError: as `json_object`, or bytes that are not UTF-8, by line and byte offset.
    """
    for raw in _lines(path, 0, True):
        yield raw.line, json_object(_decode(raw.data or b"", path, raw.line, raw.offset), path, raw.line)


def _json_document(text: str, reading: Reading, path: str, number: int) -> Doc:
    obj = json_object(text, path, number)
    doc = _field(obj, reading.text_field, path, number, "text")
    if not isinstance(doc, str):
        raise DataError(
            f"{path}: line {number}: expected text (a JSON string) in field {reading.text_field!r}. "
            f"Received: {_kind(doc)} {json.dumps(doc, ensure_ascii=False)[:60]}"
        )
    try:
        doc.encode("utf-8")
    except UnicodeEncodeError as e:
        raise DataError(
            f"{path}: line {number}: field {reading.text_field!r} holds a lone surrogate "
            f"(\\u{ord(doc[e.start]):04x}, from a JSON escape), which is not Unicode text"
        ) from None
    label = None if reading.label is None else _field(obj, reading.label, path, number, "label")
    return Doc(doc, label, number)


def _field(obj: JsonObject, name: str, path: str, number: int, what: str) -> Any:
    if name not in obj:
        flag = "--text-field" if what == "text" else "--label"
        raise DataError(
            f"{path}: line {number}: expected the {what} in field {name!r} ({flag}). Received: an object "
            f"with fields {sorted(obj)[:10]}"
        )
    if obj[name] is None:
        raise DataError(f"{path}: line {number}: field {name!r} is null. Expected a {what} on every line.")
    return obj[name]


def _kind(value: Any) -> str:
    return {bool: "a boolean", int: "a number", float: "a number", list: "a list", dict: "an object"}.get(
        type(value), type(value).__name__
    )


# ---- Parquet and Arrow ----


def declared_labels(path: str, column: str) -> tuple[str, ...] | None:
    """The class names a Parquet or Arrow file declares for `column` (a `datasets` `ClassLabel`),
    or None; None for other files."""
    kind = read_as(path)
    return textcolumns.declared_labels(path, kind, column) if kind in COLUMNS else None


def _column_cells(path: str, kind: str, reading: Reading, start: int) -> Iterator[Raw]:
    for data, label, row in textcolumns.cells(path, kind, reading.text_field, reading.label, start):
        yield Raw(data, label, row, 0)


def _column_document(raw: Raw, path: str, reading: Reading) -> Doc:
    row = raw.line
    if raw.data is None:
        raise DataError(
            f"{path}: row {row}: column {reading.text_field!r} is null. Expected text on every row."
        )
    if reading.label and raw.label is None:
        raise DataError(
            f"{path}: row {row}: column {reading.label!r} is null. Expected a label on every row."
        )
    try:
        return Doc(raw.data.decode("utf-8"), raw.label, row)
    except UnicodeDecodeError as e:
        raise DataError(
            f"{path}: row {row}, byte offset {e.start} of column {reading.text_field!r}: expected UTF-8 "
            f"text. Received: bytes {raw.data[e.start : e.start + 4].hex(' ')} ({e.reason})"
        ) from None

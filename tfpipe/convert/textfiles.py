"""Text corpus files: listing them, and reading their documents with where each one is.

A corpus is one file, a folder of files, or a glob, local or gs://:
- JSON Lines (`.jsonl`, `.jsonl.gz`): one JSON object a line, the document in the field
  `text_field`; blank lines are left out (and counted).
- plain text (`.txt`): the whole file is one document, or with `lines` each line is one.
- Parquet (`.parquet`, `.pq`): a string column named `text_field`, as Hugging Face `datasets`
  writes it (a `ClassLabel` label's names are read from its `huggingface` schema metadata).

Every document keeps its place (file and line, or row for Parquet), for messages. Text must be
UTF-8: invalid bytes are refused by file, line and byte offset, as are a JSON line that does
not parse, a missing or non-string field, and a null. A UTF-8 byte-order mark at the start of
a file is dropped (`textfile.strip_bom`, the one home of byte-order marks).
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import json
import os
import zlib
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO, NamedTuple

from tfpipe import storage
from tfpipe.convert.textfile import strip_bom
from tfpipe.errors import DataError
from tfpipe.manifest import SkippedInput

SUFFIXES = {".jsonl": "jsonl", ".jsonl.gz": "jsonl", ".txt": "txt", ".parquet": "parquet", ".pq": "parquet"}
"""The corpus file suffixes and the kind each is read as."""


_LONGEST_FIRST = sorted(SUFFIXES.items(), key=lambda item: -len(item[0]))


@functools.lru_cache(maxsize=1024)
def kind_of(path: str) -> str | None:
    """The kind of a corpus file by its suffix ("jsonl", "txt" or "parquet"), or None."""
    name = path.lower()
    return next((kind for suffix, kind in _LONGEST_FIRST if name.endswith(suffix)), None)


def looks_like_corpus(src: str) -> bool:
    """Whether `src` names JSON Lines or .txt files (by name; a local folder by its files)."""
    if kind_of(src) in ("jsonl", "txt"):
        return True
    if storage.is_gcs(src) or not os.path.isdir(src):
        return False
    return any(kind_of(n) in ("jsonl", "txt") for n in os.listdir(src))


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
    """A document's place for messages: "file: line 12" or "file: row 11" (Parquet)."""
    return f"{path}: {'row' if kind_of(path) == 'parquet' else 'line'} {line}"


@dataclasses.dataclass(frozen=True, slots=True)
class Listing:
    """The corpus files of a source, sorted, and the files of a folder left out."""

    files: tuple[str, ...]
    skipped: tuple[SkippedInput, ...] = ()


def list_corpus(src: str) -> Listing:
    """The corpus files of `src`: the file itself, a glob's matches, or a folder's files.

    Raises:
      DataError: no corpus file, a file of another kind given by name, or a subfolder (whose
        files would be left out).
    """
    wanted = ", ".join(SUFFIXES)
    if storage.has_wildcards(src):
        matches = storage.glob(src)
        skipped = [SkippedInput(p, f"not a corpus file: its name ends in none of {wanted}") for p in matches]
        listing = Listing(
            tuple(p for p in matches if kind_of(p)), tuple(s for s in skipped if not kind_of(s.input))
        )
    elif storage.exists(src) if storage.is_gcs(src) else os.path.isfile(src):
        if not kind_of(src):
            raise DataError(
                f"{src}: expected a text corpus file ({wanted}). Received: a file named otherwise"
            )
        listing = Listing((src,))
    else:
        listing = _list_folder(src, wanted)
    if not listing.files:
        raise DataError(f"{src}: expected text corpus files ({wanted}). Received: none")
    return listing


def _list_folder(src: str, wanted: str) -> Listing:
    if storage.is_gcs(src):
        entries = [(n, d) for n, d, _, _ in storage.gcs_entries(src)]
    elif os.path.isdir(src):
        entries = [(n, os.path.isdir(os.path.join(src, n))) for n in storage.listdir(src)]
    else:
        raise DataError(
            f"Expected a text corpus file, folder or glob. Received: {src!r}, which does not exist"
        )
    entries = sorted(e for e in entries if not e[0].startswith((".", "_")))  # _SUCCESS, .DS_Store
    folders = [n for n, is_dir in entries if is_dir]
    if folders:
        raise DataError(
            f"{src}: expected a folder of text corpus files. Received: subfolder(s) {folders[:5]}, whose "
            f"files would be left out. Pass a glob that names them (e.g. '{storage.join(src, '*', '*.jsonl')}')."
        )
    files = [storage.join(src, n) for n, _ in entries if kind_of(n)]
    skipped = [
        SkippedInput(storage.join(src, n), f"not a corpus file: its name ends in none of {wanted}")
        for n, _ in entries
        if not kind_of(n)
    ]
    return Listing(tuple(files), tuple(skipped))


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


def read_raw(path: str, reading: Reading, start: int = 0) -> Iterator[Raw]:
    """The documents of one corpus file as stored, from the `start`-th on.

    Raises:
      DataError: the file cannot be read on (a damaged gzip or Parquet file, a missing column).
    """
    kind = kind_of(path)
    if kind == "parquet":
        return _parquet_cells(path, reading, start)
    if kind == "txt" and not reading.lines:
        return _whole_file(path, start)
    return _lines(path, start, kind == "jsonl")


def parse(raw: Raw, path: str, reading: Reading) -> Doc:
    """A stored document decoded (and for JSON Lines, parsed).

    Raises:
      DataError: it is not UTF-8, not a JSON object, or lacks its text or label, by line or row.
    """
    kind = kind_of(path)
    if kind == "parquet":
        return _parquet_document(raw, path, reading)
    if raw.data is None:  # unreachable for text files; keeps the type checker honest
        raise DataError(f"{where(path, raw.line)}: expected text. Received: none")
    if kind == "txt" and not reading.lines:
        return Doc(_decode_whole(raw.data, path, raw.offset), None, 1)
    text = _decode(raw.data, path, raw.line, raw.offset)
    return (
        _json_document(text, reading, path, raw.line) if kind == "jsonl" else Doc(_line(text), None, raw.line)
    )


def _open(path: str) -> BinaryIO:
    raw = storage.open_read(path)
    if path.lower().endswith(".gz"):
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw


def _decode(data: bytes, path: str, line: int, offset: int) -> str:
    """`data` (line `line`, at byte `offset` of the file) as UTF-8, or a DataError naming the
    line and the byte offset of the bad bytes."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _utf8_error(path, line, offset + e.start, data[e.start : e.start + 4], e.reason) from None


def _utf8_error(path: str, line: int, offset: int, bad: bytes, reason: str) -> DataError:
    gz = " of the decompressed text" if path.lower().endswith(".gz") else ""
    return DataError(
        f"{path}: line {line}, byte offset {offset}{gz}: expected UTF-8 text. Received: bytes "
        f"{bad.hex(' ')} ({reason}). Re-encode the file as UTF-8."
    )


def _whole_file(path: str, start: int) -> Iterator[Raw]:
    if start > 0:
        return
    with _open(path) as f:
        raw = _read_all(f, path)
    data = strip_bom(raw)
    yield Raw(data, None, 1, len(raw) - len(data))


def _decode_whole(data: bytes, path: str, offset: int) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise _utf8_error(path, line, e.start + offset, data[e.start : e.start + 4], e.reason) from None


def _read_all(f: BinaryIO, path: str) -> bytes:
    try:
        return f.read()
    except (OSError, EOFError, zlib.error) as e:
        raise DataError(f"{path}: expected a readable file. Received: {e}") from None


def _lines(path: str, start: int, jsonl: bool) -> Iterator[Raw]:
    """The lines of a JSON Lines file (blank lines left out) or a text file read by line."""
    index, offset, number = 0, 0, 0
    with _open(path) as f:
        lines = iter(f)
        while True:
            try:
                raw = next(lines)
            except StopIteration:
                return
            except (OSError, EOFError, zlib.error) as e:
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
    return text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith("\n") else text


def _json_document(text: str, reading: Reading, path: str, number: int) -> Doc:
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise DataError(
            f"{path}: line {number}: expected one JSON object. Received: {text.strip()[:80]!r}, which "
            f"does not parse ({e})"
        ) from None
    if not isinstance(obj, dict):
        raise DataError(f"{path}: line {number}: expected a JSON object. Received: {type(obj).__name__}")
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


def _field(obj: dict[str, Any], name: str, path: str, number: int, what: str) -> Any:
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


# ---- Parquet ----


def parquet_labels(path: str, column: str) -> tuple[str, ...] | None:
    """The class names a Hugging Face `datasets` Parquet file declares for `column` (a
    `ClassLabel` in its `huggingface` schema metadata), or None."""
    from tfpipe.convert.parquetfile import open_file

    metadata = open_file(path).schema_arrow.metadata or {}
    try:
        features = json.loads(metadata.get(b"huggingface", b"{}"))["info"]["features"]
        feature = features[column]
    except (ValueError, KeyError, TypeError):
        return None
    if isinstance(feature, dict) and feature.get("_type") == "ClassLabel" and "names" in feature:
        return tuple(str(n) for n in feature["names"])
    return None


def _parquet_cells(path: str, reading: Reading, start: int) -> Iterator[Raw]:
    import pyarrow as pa

    from tfpipe.convert.parquetfile import open_file

    pf = open_file(path)
    columns = [reading.text_field] + ([reading.label] if reading.label else [])
    schema = pf.schema_arrow
    for name, what in zip(columns, ("text", "label"), strict=False):
        if name not in schema.names:
            flag = "--text-field" if what == "text" else "--label"
            raise DataError(
                f"{path}: expected the {what} in column {name!r} ({flag}). Received: columns {schema.names[:10]}"
            )
    kind = schema.field(reading.text_field).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise DataError(
            f"{path}: expected text (a string column) in column {reading.text_field!r}. Received: {kind}"
        )
    row = 0
    try:
        for batch in pf.iter_batches(batch_size=1024, columns=columns):
            n = batch.num_rows
            if row + n > start:
                texts = batch.column(0).cast(pa.large_binary()).to_pylist()  # decoded by `parse`, by row
                labels = batch.column(1).to_pylist() if reading.label else [None] * n
                for i in range(max(0, start - row), n):
                    yield Raw(texts[i], labels[i], row + i, 0)
            row += n
    except (pa.ArrowException, OSError) as e:
        raise DataError(
            f"{path}: expected Parquet data whose pages pass their checksums. Received: {e}"
        ) from None


def _parquet_document(raw: Raw, path: str, reading: Reading) -> Doc:
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

"""Text files as tfpipe reads them (CSV, label files, class lists, JSON Lines, plain-text
corpora): what the bytes are before they are decoded. One home, so every text reader agrees.

- Compressed text is read by its content, whatever its name: gzip, bzip2, xz, and a zip
  archive of one file. A `.csv` that holds gzip bytes is a gzipped CSV.
- Bytes that are not text are named by their magic bytes (Parquet, Arrow/Feather, an Excel
  workbook, zstd, ...), never decoded into noise or diagnosed as some encoding.
- A byte-order mark says the encoding and is never part of the text: a UTF-8 mark (as
  Windows Notepad saves files) is dropped; a UTF-16 or UTF-32 mark picks that codec and is
  dropped. A mark that contradicts the encoding given (a UTF-8 mark read as latin-1) is
  refused, naming both.
- UTF-16 or UTF-32 without a byte-order mark (`encoding="utf-16"`) is read in the byte order
  its NUL bytes show; a byte order the bytes do not show is refused, not guessed.

Call `open_text` to read a text file, `strip_bom` for text decoded elsewhere.
"""

from __future__ import annotations

import bz2
import codecs
import dataclasses
import gzip
import io
import lzma
import zipfile
import zlib
from collections.abc import Callable
from typing import AnyStr, BinaryIO, TextIO

from tfpipe import storage
from tfpipe.errors import DataError

HEAD_BYTES = 4096
"""Bytes looked at to tell what a file is: enough for a BOM, magic bytes and NUL patterns."""

BOMS = (  # UTF-32 first: its little-endian mark starts with UTF-16's
    (codecs.BOM_UTF32_LE, "UTF-32 (little-endian)", "utf-32"),
    (codecs.BOM_UTF32_BE, "UTF-32 (big-endian)", "utf-32"),
    (codecs.BOM_UTF8, "UTF-8", "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "UTF-16 (little-endian)", "utf-16"),
    (codecs.BOM_UTF16_BE, "UTF-16 (big-endian)", "utf-16"),
)
"""(mark, what it is, the codec that reads the text after it, mark dropped)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Magic:
    """A file format told by its first bytes.

    Attributes:
      name: what the bytes are, for messages ("gzip-compressed data").
      table_format: the `tfpipe convert --format` that reads it, if any ("parquet", "arrow").
      advice: what to do with it where text was expected.
    """

    name: str
    table_format: str | None = None
    advice: str = ""


_SAVE_AS_CSV = (
    "Save it as CSV (in Excel: File > Save As > CSV UTF-8), or read it with pandas.read_excel "
    "and write Parquet"
)
_ARROW = "Name it .arrow or .feather, or pass --format arrow"
_MAGIC: tuple[tuple[bytes, int, Magic], ...] = (  # (bytes, offset, format)
    (
        b"PAR1",
        0,
        Magic("Parquet data (magic bytes PAR1)", "parquet", "Name it .parquet or pass --format parquet"),
    ),
    (b"ARROW1", 0, Magic("an Arrow IPC file (Feather v2; magic bytes ARROW1)", "arrow", _ARROW)),
    (b"FEA1", 0, Magic("a Feather v1 file (magic bytes FEA1)", "arrow", _ARROW)),
    (b"\xff\xff\xff\xff", 0, Magic("an Arrow IPC stream (continuation marker 0xFFFFFFFF)", "arrow", _ARROW)),
    (b"\x28\xb5\x2f\xfd", 0, Magic("zstd-compressed data", None, "Decompress it first (zstd -d FILE)")),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", 0, Magic("a legacy Office file (Excel .xls)", None, _SAVE_AS_CSV)),
    (b"SQLite format 3\x00", 0, Magic("an SQLite database", None, "Export the table as CSV or Parquet")),
    (b"%PDF-", 0, Magic("a PDF document", None, "")),
    (b"\x93NUMPY", 0, Magic("a NumPy .npy array", None, "")),
    (b"Obj\x01", 0, Magic("an Avro container file", None, "")),
    (b"\xff\xd8\xff", 0, Magic("a JPEG image", None, "")),
    (b"\x89PNG\r\n\x1a\n", 0, Magic("a PNG image", None, "")),
    (b"GIF87a", 0, Magic("a GIF image", None, "")),
    (b"GIF89a", 0, Magic("a GIF image", None, "")),
)
_XLSX = Magic("an Excel workbook (.xlsx, a zip archive)", None, _SAVE_AS_CSV)
_COMPRESSED: tuple[tuple[Callable[[bytes], bool], str, Callable[[BinaryIO], BinaryIO]], ...] = (
    (lambda h: h.startswith(b"\x1f\x8b"), "gzip", lambda raw: gzip.GzipFile(fileobj=raw, mode="rb")),
    # "BZh", the block size digit, then the first block's magic (a CSV header may start "BZh").
    (lambda h: h[:3] == b"BZh" and h[4:10] == b"1AY&SY", "bzip2", lambda raw: bz2.BZ2File(raw)),
    (lambda h: h.startswith(b"\xfd7zXZ\x00"), "xz", lambda raw: lzma.LZMAFile(raw)),  # noqa: SIM115
)  # each is closed with the file under it (`_Layered`)
_ZIP = b"PK\x03\x04"
UNREADABLE = (OSError, EOFError, zlib.error, lzma.LZMAError, zipfile.BadZipFile)
"""What reading a damaged compressed file raises (gzip, bzip2, xz, zip)."""


def sniff(head: bytes) -> Magic | None:
    """The non-text format `head` (a file's first bytes, decompressed) starts with, or None."""
    for magic, offset, fmt in _MAGIC:
        if head[offset : offset + len(magic)] == magic:
            return fmt
    return None


def compression(head: bytes) -> str | None:
    """ "gzip", "bzip2", "xz" or "zip" when `head` starts with that format's magic bytes."""
    if head.startswith(_ZIP):
        return "zip"
    return next((name for test, name, _ in _COMPRESSED if test(head)), None)


def open_decompressed(path: str) -> BinaryIO:
    """The file's bytes, decompressed by content whatever its name (gzip, bzip2, xz, or a zip
    archive of one file).

    Raises:
      DataError: a zip archive that holds other than one file, or an Excel workbook.
      FileNotFoundError, StorageError: the file cannot be read.
    """
    raw = storage.open_read(path)
    try:
        head = raw.read(16)
        raw.seek(0)
        for test, _, opener in _COMPRESSED:
            if test(head):
                return _Layered(opener(raw), [raw.close])
        if head.startswith(_ZIP):
            return _zip_member(path, raw)
    except BaseException:
        raw.close()
        raise
    return raw


class _Layered(io.BufferedReader):
    """A stream read through another (a decompressor, a zip member): closing it closes the
    layers under it too (a decompressor given a file object leaves that file open)."""

    def __init__(self, inner: BinaryIO, closers: list[Callable[[], None]]) -> None:
        super().__init__(inner)  # type: ignore[arg-type]
        self._closers = closers

    def close(self) -> None:
        try:
            super().close()
        finally:
            for close in self._closers:
                close()


def _zip_member(path: str, raw: BinaryIO) -> _Layered:
    """The one file of a zip archive.

    Raises:
      DataError: an Excel workbook, or an archive of more or fewer than one file.
    """
    archive = zipfile.ZipFile(raw)
    try:
        names = [n for n in archive.namelist() if not n.endswith("/")]
        if "xl/workbook.xml" in names or "[Content_Types].xml" in names:
            raise DataError(f"{path}: expected text. Received: {_XLSX.name}. {_XLSX.advice}.")
        if len(names) != 1:
            raise DataError(
                f"{path}: expected a zip archive of one text file. Received: {len(names)} files {names[:5]}"
            )
        return _Layered(archive.open(names[0]), [archive.close, raw.close])  # type: ignore[arg-type]
    except BaseException:
        archive.close()
        raise


def codec(path: str, head: bytes, encoding: str | None, what: str = "text") -> str:
    """The codec that reads a text file whose decompressed bytes start with `head`, given the
    `encoding` the user named: its byte-order mark decides (and is dropped), and UTF-16/32
    without a mark reads in the byte order its NUL bytes show.

    Args:
      encoding: the encoding named by the user; None where there is no option to name one:
        then a byte-order mark or the NUL bytes of UTF-16/32 decide, else UTF-8.
      what: what the file should be, for messages ("CSV text", "a labels file").

    Raises:
      DataError: the bytes are not text (naming their format), a byte-order mark contradicts
        `encoding`, NUL bytes show another encoding than `encoding`, or UTF-16/32 without a
        mark whose byte order the bytes do not show.
    """
    magic = sniff(head)
    if magic is not None:
        advice = f" {magic.advice}." if magic.advice else ""
        raise DataError(f"{path}: expected {what}. Received: {magic.name}.{advice}")
    if encoding is None:
        mark = next((reader for mark, _, reader in BOMS if head.startswith(mark)), None)
        return mark or nul_byte_order(head) or "utf-8-sig"
    given = codecs.lookup(encoding).name
    for mark, name, reader in BOMS:
        if head.startswith(mark):
            if _family(given) != _family(reader):
                fix = reader.removesuffix("-sig")
                raise DataError(
                    f"{path}: expected {encoding} text (encoding={encoding!r}). Received: a {name} "
                    f"byte-order mark. Pass the file's encoding: --encoding {fix} (encoding={fix!r})."
                )
            return reader
    order = nul_byte_order(head)
    if _family(given) in ("utf-16", "utf-32"):
        if given in ("utf-16", "utf-32") and order is not None and order.startswith(given):
            return order
        if given == order or (order is None and given not in ("utf-16", "utf-32")):
            return encoding  # the byte order given, and the bytes do not contradict it
        seen = f"the bytes look like {order.upper()}" if order else "the bytes do not show it"
        raise _order_error(path, encoding, given, seen)
    if order:
        raise DataError(
            f"{path}: expected {encoding} text (encoding={encoding!r}). Received: NUL bytes where "
            f"{order.upper()} text without a byte-order mark has them. Pass the file's encoding: "
            f"--encoding {order} (encoding={order!r})."
        )
    return "utf-8-sig" if given == "utf-8" else encoding


def _order_error(path: str, encoding: str, given: str, seen: str) -> DataError:
    family = _family(given)
    return DataError(
        f"{path}: expected {encoding} text (encoding={encoding!r}), without a byte-order "
        f"mark to say its byte order; {seen}. Pass the byte order the file has: --encoding "
        f"{family}-le or {family}-be (encoding='{family}-le')."
    )


def _family(name: str) -> str | None:
    """ "utf-8", "utf-16" or "utf-32" for a codec of that family, else None (any 8-bit codec)."""
    for family in ("utf-8", "utf-16", "utf-32"):
        if name.startswith(family):
            return family
    return None


def nul_byte_order(head: bytes) -> str | None:
    """ "utf-16-le", "utf-16-be", "utf-32-le" or "utf-32-be" when the NUL bytes of `head` fall
    where mostly-ASCII text in that encoding has them; None when they do not."""
    n = len(head) - len(head) % 4
    if n < 4 or head.count(0) < n // 4:
        return None
    zero = [b == 0 for b in head[:n]]
    share = [sum(zero[i::4]) / (n // 4) for i in range(4)]
    if min(share[1:]) > 0.9:
        return "utf-32-le"
    if min(share[:3]) > 0.9:
        return "utf-32-be"
    odd, even = (share[1] + share[3]) / 2, (share[0] + share[2]) / 2
    if odd > 0.5 and even < 0.1:
        return "utf-16-le"
    if even > 0.5 and odd < 0.1:
        return "utf-16-be"
    return None


def read_head(path: str) -> bytes:
    """The first `HEAD_BYTES` of the file, decompressed."""
    with open_decompressed(path) as f:
        return f.read(HEAD_BYTES)


def open_bytes(path: str, encoding: str | None = "utf-8", what: str = "text") -> tuple[BinaryIO, str]:
    """The file's decompressed bytes, from the start, and the codec that reads them (`codec`).

    Raises:
      DataError: as `codec` and `open_decompressed` say.
    """
    handle = open_decompressed(path)
    try:
        head = handle.read(HEAD_BYTES)
        handle.seek(0)  # every stream here seeks back (a decompressor by decompressing again)
        return handle, codec(path, head, encoding, what)
    except BaseException:
        handle.close()
        raise


def open_text(
    path: str, encoding: str | None = "utf-8", what: str = "text", newline: str | None = None
) -> TextIO:
    """A text file, decompressed by content and decoded as `codec` decides (no byte-order mark
    in the text).

    Raises:
      DataError: as `codec` and `open_decompressed` say.
    """
    handle, chosen = open_bytes(path, encoding, what)
    return io.TextIOWrapper(handle, encoding=chosen, newline=newline)


def strip_bom(text: AnyStr) -> AnyStr:
    """`text` without a leading byte-order mark: U+FEFF in decoded text, the UTF-8 mark in
    bytes (Windows editors write one), for text read elsewhere."""
    if isinstance(text, bytes):
        return text.removeprefix(codecs.BOM_UTF8)
    return text.removeprefix("\ufeff")


def undecodable(path: str, encoding: str) -> str:
    """What the bytes look like, for a file that does not decode as `encoding`, and the
    encoding to pass instead."""
    head = read_head(path)
    found, suggest = "", "latin-1"
    order = nul_byte_order(head)
    if order:
        found, suggest = f"NUL bytes where {order.upper()} text without a byte-order mark has them", order
    elif b"\x00" in head:
        found, suggest = "NUL bytes, as in UTF-16 or UTF-32 text", "utf-16-le"
    if not found:
        with open_decompressed(path) as f:
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

"""How `--format auto` finds a table (convert/detect.py weighs every modality's answers): one
file by its content (Parquet's or Arrow's magic bytes, JSON Lines, compressed CSV text) or its
name, and in a folder a saved `datasets` dataset, Hive partition folders of Parquet, or files of
one table format. JSON Lines whose records hold text in the text field are a corpus whose
tokenizer was forgotten, not a table (`check_auto`)."""

from __future__ import annotations

import os
import re

from tfpipe import storage
from tfpipe.convert.config import TOKENIZER_OPTIONS, ConvertConfig
from tfpipe.convert.formats import hfsaved, jsonlfile, textfile
from tfpipe.convert.kind import Folder, FormatChoice
from tfpipe.errors import ConfigError, DataError
from tfpipe.modalities.tables.convert.read import TABLE_SUFFIXES, list_table

_PARTITION_RE = re.compile(r"^[^=]+=[^=]*$")  # a Hive partition folder: key=value

EXPECTS = "CSV/Parquet files"


def detect_file(src: str) -> FormatChoice | None:
    """The table format of one file: a gs:// object by its name (None if it is no table's), a
    local file by its magic bytes (Parquet, Arrow IPC, compressed text), else by its name.

    Raises:
      DataError: the bytes are a format tfpipe does not convert (an Excel workbook, zstd...).
    """
    suffix = os.path.splitext(src)[1].lower()
    if storage.is_gcs(src):
        return (
            FormatChoice(TABLE_SUFFIXES[suffix], f"the file name ends in {suffix}")
            if suffix in TABLE_SUFFIXES
            else None
        )
    with open(src, "rb") as f:
        head = f.read(16)
    if head.startswith(b"PAR1"):
        return FormatChoice("parquet", "the file starts with Parquet's magic bytes PAR1")
    magic = textfile.sniff(head)
    if magic is not None and magic.table_format:
        return FormatChoice(magic.table_format, f"the file starts with the magic bytes of {magic.name}")
    if magic is not None:
        advice = f" {magic.advice}." if magic.advice else ""
        raise DataError(
            f"{src}: expected a table file (CSV, Parquet, Arrow IPC) or a folder. Received: {magic.name}.{advice}"
        )
    packed, named = textfile.compression(head), TABLE_SUFFIXES.get(suffix)
    if jsonlfile.named(src):  # `t.jsonl`, `t.jsonl.gz`: a table or a corpus (`check_auto` decides)
        return FormatChoice("jsonl", f"a JSON Lines file ({os.path.basename(src)})")
    if named is None and jsonlfile.looks_like(textfile.read_head(src)):
        return FormatChoice("jsonl", "its first line is a JSON object (JSON Lines)")
    if packed and named in (None, "csv"):
        textfile.read_head(src)  # refuses an Excel workbook, or a zip of several files, by name
        return FormatChoice("csv", f"{packed}-compressed data, read as CSV text by its content")
    return FormatChoice(named or "csv", f"a single file named {suffix or 'without a suffix'}")


def saved_dataset(folder: Folder) -> FormatChoice | None:
    if hfsaved.STATE in folder.files and hfsaved.saved_dataset(folder.path) is not None:
        return FormatChoice(
            "arrow", "a folder datasets' save_to_disk wrote (its state.json lists its Arrow files)"
        )
    return None


def partitions(folder: Folder) -> FormatChoice | None:
    dirs = folder.dirs
    if dirs and all(_PARTITION_RE.match(d) for d in dirs):
        return FormatChoice("parquet", f"Hive partition folders ({dirs[0]}/...) of a Parquet dataset")
    return None


def table_files(folder: Folder) -> FormatChoice | None:
    """A folder of files of one table format (`.jsonl.gz` too); None with none, or two."""
    if folder.dirs:
        return None
    tables = {
        TABLE_SUFFIXES[os.path.splitext(n)[1].lower()]
        for n in folder.files
        if os.path.splitext(n)[1].lower() in TABLE_SUFFIXES
    } | {"jsonl" for n in folder.files if jsonlfile.named(n)}
    if len(tables) != 1:
        return None
    fmt = tables.pop()
    return FormatChoice(fmt, f"a folder of {fmt} files")


def check_auto(choice: FormatChoice, src: str, cfg: ConvertConfig) -> None:
    """JSON Lines without a tokenizer option are read as a table, unless their first record
    holds text in the text field: that is a corpus whose tokenizer was forgotten.

    Raises:
      ConfigError: naming the field, the way to tokenize it, and the way to keep it a table.
    """
    if choice.format != "jsonl":
        return
    first = jsonlfile.first_object(list_table(src, "jsonl").files[0])
    if first is None or not isinstance(first.get(cfg.text_field), str):
        return
    raise ConfigError(
        f"{src} holds JSON Lines whose records have text in field {cfg.text_field!r}: a text corpus, "
        f"which needs a tokenizer. Pass {TOKENIZER_OPTIONS}. To convert the records as a table "
        "instead (the text a string feature), pass --format jsonl."
    )

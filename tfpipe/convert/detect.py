"""What a source is, before any kind reads it: its format given as `--format auto`, detected by
content, and a source of split folders (train/, val/) refused with the command for each split.

This is the one place in convert's core that names kinds: it decides which kind reads a
source before any kind is chosen, so it weighs the kinds' signs against each other (a
tokenizer option means text; a folder of class folders, images; JSON Lines records with text
in the text field, a corpus whose tokenizer was forgotten).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import stat

from tfpipe import storage
from tfpipe.convert.config import TOKENIZER_OPTIONS, ConvertConfig
from tfpipe.convert.formats import hfsaved, jsonlfile, textfile
from tfpipe.errors import ConfigError, DataError
from tfpipe.format.manifest import Manifest
from tfpipe.modalities.images.convert import folders
from tfpipe.modalities.images.convert.labels import SYNSET_RE
from tfpipe.modalities.tables.convert.read import TABLE_SUFFIXES, list_table
from tfpipe.modalities.text.convert import listing as text_listing

_PARTITION_RE = re.compile(r"^[^=]+=[^=]*$")  # a Hive partition folder: key=value


@dataclasses.dataclass(frozen=True, slots=True)
class FormatChoice:
    """The source format `--format auto` picked, and why (for the user to check)."""

    format: str
    reason: str


def choose_format(src: str, cfg: ConvertConfig, joins: Manifest | None) -> tuple[str, str]:
    """The source format, and why: given, or detected by content. A tokenizer option, or a
    text dataset to join, makes it text."""
    if cfg.format != "auto":
        return cfg.format, "given"
    if cfg.tokenizer or cfg.train_tokenizer:
        return "text", "auto: a tokenizer option (--tokenizer or --train-tokenizer) was given"
    if joins is not None and joins.layout == "text":  # detection: the kinds weighed, see the docstring
        return "text", f"auto: the dataset it joins (splits {sorted(joins.splits)}) is text"
    try:
        choice = explain_format(src, cfg.labels_file)
        if choice.format == "jsonl":
            _refuse_a_corpus_as_a_table(src, cfg)
    except DataError:
        if text_listing.looks_like_corpus(src):
            raise ConfigError(
                f"{src} holds text (JSON Lines or .txt files); a text corpus needs a tokenizer. Pass "
                f"{TOKENIZER_OPTIONS}."
            ) from None
        raise
    return choice.format, f"auto: {choice.reason}"


def _refuse_a_corpus_as_a_table(src: str, cfg: ConvertConfig) -> None:
    """JSON Lines without a tokenizer option are read as a table, unless their first record
    holds text in the text field: that is a corpus whose tokenizer was forgotten.

    Raises:
      ConfigError: naming the field, the way to tokenize it, and the way to keep it a table.
    """
    first = jsonlfile.first_object(list_table(src, "jsonl").files[0])
    if first is None or not isinstance(first.get(cfg.text_field), str):
        return
    raise ConfigError(
        f"{src} holds JSON Lines whose records have text in field {cfg.text_field!r}: a text corpus, "
        f"which needs a tokenizer. Pass {TOKENIZER_OPTIONS}. To convert the records as a table "
        "instead (the text a string feature), pass --format jsonl."
    )


# ---- the format ----


def detect_format(src: str, labels_file: str | None = None) -> str:
    """Picks imagenet, images, csv or parquet by looking at what `src` holds."""
    return explain_format(src, labels_file).format


def explain_format(src: str, labels_file: str | None = None) -> FormatChoice:
    """Picks the format of `src` by content, and says why.

    Raises:
      DataError: `src` does not exist, is neither a file nor a folder, mixes synset-named
        and other class folders, or holds nothing tfpipe can convert.
    """
    suffix = os.path.splitext(src)[1].lower()
    if storage.is_gcs(src) and suffix in TABLE_SUFFIXES:
        return FormatChoice(TABLE_SUFFIXES[suffix], f"the file name ends in {suffix}")
    if not storage.is_gcs(src):
        if not os.path.lexists(src):
            raise DataError(
                f"Expected a source folder or table file. Received: {src!r}, which does not exist"
            )
        if stat.S_ISREG(folders.checked_stat(src, "a source folder or table file").st_mode):
            return _file_format(src, suffix)
    entries = folders.list_entries(src)
    dirs = [e.name for e in entries if e.is_dir]
    files = [e.name for e in entries if not e.is_dir]
    if hfsaved.STATE in files and hfsaved.saved_dataset(src) is not None:
        return FormatChoice(
            "arrow", "a folder datasets' save_to_disk wrote (its state.json lists its Arrow files)"
        )
    if dirs and all(_PARTITION_RE.match(d) for d in dirs):
        return FormatChoice("parquet", f"Hive partition folders ({dirs[0]}/...) of a Parquet dataset")
    if dirs:
        return _class_folder_format(src, dirs)
    tables = {
        TABLE_SUFFIXES[os.path.splitext(n)[1].lower()]
        for n in files
        if os.path.splitext(n)[1].lower() in TABLE_SUFFIXES
    } | {"jsonl" for n in files if text_listing.kind_of(n) == "jsonl"}  # `.jsonl.gz` too
    if len(tables) == 1:
        fmt = tables.pop()
        return FormatChoice(fmt, f"a folder of {fmt} files")
    if labels_file and any(folders.is_image_name(n) for n in files):
        return FormatChoice("imagenet", "a flat folder of images with a labels file (ImageNet validation)")
    raise DataError(
        f"{src}: cannot tell its format. Expected class folders of images, a flat image folder "
        f"with --labels, or CSV/Parquet files. Received: {len(dirs)} folders, {len(files)} files "
        f"(e.g. {files[:3]}). Pass --format."
    )


def _file_format(src: str, suffix: str) -> FormatChoice:
    """The format of one local file: by its magic bytes (Parquet, Arrow IPC, compressed text),
    else by its name.

    Raises:
      DataError: the bytes are a format tfpipe does not convert (an Excel workbook, zstd...).
    """
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
    if text_listing.kind_of(src) == "jsonl":  # `t.jsonl`, `t.jsonl.gz`: a table or a corpus (run decides)
        return FormatChoice("jsonl", f"a JSON Lines file ({os.path.basename(src)})")
    if named is None and jsonlfile.looks_like(textfile.read_head(src)):
        return FormatChoice("jsonl", "its first line is a JSON object (JSON Lines)")
    if packed and named in (None, "csv"):
        textfile.read_head(src)  # refuses an Excel workbook, or a zip of several files, by name
        return FormatChoice("csv", f"{packed}-compressed data, read as CSV text by its content")
    return FormatChoice(named or "csv", f"a single file named {suffix or 'without a suffix'}")


def _class_folder_format(src: str, dirs: list[str]) -> FormatChoice:
    synsets = [d for d in dirs if SYNSET_RE.match(d)]
    if len(synsets) == len(dirs):
        return FormatChoice(
            "imagenet",
            f"all {len(dirs)} class folders are named like ImageNet synsets "
            "(n01440764), so labels count from 1 as in imagenet_to_gcs",
        )
    if not synsets:
        return FormatChoice(
            "images", f"{len(dirs)} class folders, not named like ImageNet synsets, so labels count from 0"
        )
    odd = [d for d in dirs if not SYNSET_RE.match(d)]
    raise DataError(
        f"{src}: {len(synsets)} class folders are named like ImageNet synsets (n01440764) but "
        f"{len(odd)} are not: {odd[:5]}. A mix would shift every label, so tfpipe will not guess. "
        "Move the odd folder(s) out of the source, or pass --format imagenet (format='imagenet', "
        "labels from 1) or --format images (format='images', labels from 0)."
    )


# ---- split folders ----

SPLIT_NAMES = {
    "train": "train",
    "training": "train",
    "val": "validation",
    "valid": "validation",
    "validation": "validation",
    "dev": "validation",
    "test": "test",
    "testing": "test",
}
"""Folder names that mean a split (case aside), and the split tfpipe names it: `build()` reads
"train" to train and "validation" (else "test") to evaluate."""


@dataclasses.dataclass(frozen=True, slots=True)
class SplitFolder:
    """A folder of a source that holds one split (`train/`), not one class.

    Attributes:
      path: the folder.
      split: the split name it converts to ("train", "validation", "test").
      flat: it holds images directly, not class folders, so it needs a labels file.
    """

    path: str
    split: str
    flat: bool


def split_folders(src: str) -> tuple[SplitFolder, ...]:
    """The split folders of `src`, when every folder directly under it is named like a split
    (`train/`, `val/`, `test/`, as tensorflow-datasets' ImageFolder lays them out); else ()."""
    if storage.is_gcs(src) and os.path.splitext(src)[1].lower() in TABLE_SUFFIXES:
        return ()
    if not storage.is_gcs(src) and not os.path.isdir(src):
        return ()
    dirs = [name for name, is_dir in _names(src) if is_dir]
    if not dirs or not all(d.lower() in SPLIT_NAMES for d in dirs):
        return ()
    order = list(dict.fromkeys(SPLIT_NAMES.values()))
    found: list[SplitFolder] = []
    for d in sorted(dirs, key=lambda d: (order.index(SPLIT_NAMES[d.lower()]), d)):
        inside = _names(storage.join(src, d))
        flat = not any(is_dir for _, is_dir in inside) and any(folders.is_image_name(n) for n, _ in inside)
        split = SPLIT_NAMES[d.lower()]
        split = d if split in {f.split for f in found} else split  # val/ and validation/: two splits
        found.append(SplitFolder(storage.join(src, d), split, flat))
    return tuple(found)


def _names(folder: str) -> list[tuple[str, bool]]:
    """(name, is_dir) of the visible entries of `folder`, without the checks of `folders.list_entries`
    (what cannot be listed or read is named by the scan that follows)."""
    try:
        if storage.is_gcs(folder):
            return [(n, d) for n, d, _, _ in storage.gcs_entries(folder) if not n.startswith(".")]
        with os.scandir(folder) as it:
            return sorted((e.name, e.is_dir()) for e in it if not e.name.startswith("."))
    except OSError:
        return []


def refuse_split_folders(src: str, dest: str, flags: list[str]) -> None:
    """Refuses a source of split folders (train/, val/), naming the command for each split.

    Converted as one tree, each split folder would be a class and every real class a file-name
    prefix. One command per split keeps what each needs (a flat validation folder needs its
    labels file; shard counts differ) and every guarantee of a conversion (one lock, one plan,
    --resume), and a later split keeps the first split's class list.

    Args:
      flags: the other options of the run, as `tfpipe convert` flags, repeated in each command.
    """
    splits = split_folders(src)
    if not splits:
        return
    lines = []
    for s in splits:
        labels = " --labels FILE" if s.flat else ""
        why = (
            f"  # {storage.basename(s.path)}/ holds images, not class folders: FILE labels each"
            if s.flat
            else ""
        )
        command = [
            "tfpipe convert",
            shlex.quote(s.path),
            shlex.quote(dest),
            f"--split {s.split}{labels}",
            *flags,
        ]
        lines.append("  " + " ".join(command) + why)
    names = [storage.basename(s.path) for s in splits]
    raise DataError(
        f"{src}: expected class folders (SRC/<class>/<image>) or table files. Received: split "
        f"folders {names}, which would convert as {len(names)} classes named "
        f"{', '.join(map(repr, names))}, with every real class a file-name prefix. Convert each "
        "split on its own into the same destination, in this order (a later split keeps the "
        "first one's class list; in Python, tfpipe.convert(folder, dest, split=...)):\n" + "\n".join(lines)
    )

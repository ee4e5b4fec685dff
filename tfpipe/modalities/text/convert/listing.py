"""Text corpus files: which files a corpus is, and the kind each is read as.

A corpus is one file, a folder of files, or a glob, local or gs://:
- JSON Lines (`.jsonl`, `.ndjson`, and `.json` holding JSON Lines, by its content, as
  `datasets`' `Dataset.to_json` writes it).
- plain text (`.txt`): the whole file is one document, or each line is one.
- Parquet (`.parquet`, `.pq`) and Arrow IPC (`.arrow`): a string column (`textcolumns`).
- a folder `Dataset.save_to_disk` wrote (`hfsaved`): its Arrow files, in the order its
  `state.json` lists them, and its features from `dataset_info.json`.

JSON Lines and text files may be compressed (gzip, bzip2, xz, a zip of one file): the name says
the kind (`c.jsonl.gz`), the content the compression. A folder's other files are listed as
skipped; a subfolder is refused (its files would be left out), with a glob that names them. One
file listed under two names (a symbolic link beside its target) is refused: it would be read
twice. Reading the documents is reader.py's.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from typing import Any

from tfpipe import storage
from tfpipe.convert.formats import hfsaved, textfile
from tfpipe.convert.formats.parquetfile import walk
from tfpipe.convert.formats.textfile import UNREADABLE
from tfpipe.errors import DataError
from tfpipe.format.manifest import SkippedInput

SUFFIXES = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".txt": "txt",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".arrow": "arrow",
}
"""The corpus file suffixes and the kind each is read as (`.json` is JSON Lines by content:
`read_as`)."""
COLUMNS = ("parquet", "arrow")
"""The kinds whose documents are rows of a column (`textcolumns`)."""
COMPRESSED = (".gz", ".bz2", ".xz", ".zip")
"""Suffixes a compressed JSON Lines or text file may add (`c.jsonl.gz`): the name says the
kind, the content the compression (`textfile.open_decompressed`, whatever the name)."""
FILE_NAMES = ".jsonl, .ndjson, .txt (each also compressed: .gz, .bz2, .xz, .zip), .parquet, .pq, .arrow"
"""The corpus file names, for messages."""
WANTED = f"{FILE_NAMES}, .json holding JSON Lines, or a folder datasets' save_to_disk wrote"
"""What a corpus may be, for messages."""


@functools.lru_cache(maxsize=1024)
def kind_of(path: str) -> str | None:
    """The kind of a corpus file by its suffix ("jsonl", "txt", "parquet" or "arrow"), or None. A
    compression suffix after a JSON Lines or text suffix (`.jsonl.xz`, `.txt.gz`) is left aside.
    A `.json` file is none by its name alone (a manifest, a config): see `read_as`."""
    stem, suffix = os.path.splitext(path.lower())
    if suffix in COMPRESSED:
        kind = SUFFIXES.get(os.path.splitext(stem)[1])
        return kind if kind in ("jsonl", "txt") else None
    return SUFFIXES.get(suffix)


def json_named(path: str) -> bool:
    """Whether the name ends in `.json`, or `.json` and a compression suffix."""
    stem, suffix = os.path.splitext(path.lower())
    return suffix == ".json" or (suffix in COMPRESSED and stem.endswith(".json"))


def read_as(path: str) -> str | None:
    """The kind a listed corpus file is read as: its `kind_of`, and JSON Lines for a `.json`
    file (listed only when its content is JSON Lines, `list_corpus`)."""
    return kind_of(path) or ("jsonl" if json_named(path) else None)


def looks_like_corpus(src: str) -> bool:
    """Whether `src` names JSON Lines or .txt files (by name; a local folder by its files)."""
    if kind_of(src) in ("jsonl", "txt"):
        return True
    if storage.is_gcs(src) or not os.path.isdir(src):
        return False
    return any(kind_of(n) in ("jsonl", "txt") for n in os.listdir(src))


@dataclasses.dataclass(frozen=True, slots=True)
class Listing:
    """The corpus files of a source, sorted (a saved dataset's in its order), the files of a
    folder left out, and a saved dataset's features (`hfsaved.SavedDataset.features`)."""

    files: tuple[str, ...]
    skipped: tuple[SkippedInput, ...] = ()
    features: dict[str, Any] = dataclasses.field(default_factory=dict)


def list_corpus(src: str) -> Listing:
    """The corpus files of `src`: the file itself, a glob's matches, a folder's files, or a
    saved dataset's Arrow files (`hfsaved`).

    Raises:
      DataError: no corpus file, a file of another kind given by name (a `.json` file that holds
        no JSON Lines), a subfolder (whose files would be left out), or a saved DatasetDict.
    """
    wanted = WANTED
    if storage.has_wildcards(src):
        matches = storage.glob(src)
        kept = [p for p in matches if _corpus_file(p)]
        listing = Listing(tuple(kept), tuple(_not_a_corpus_file(p) for p in matches if p not in kept))
    elif storage.exists(src) if storage.is_gcs(src) else os.path.isfile(src):
        if not _corpus_file(src):
            raise DataError(f"{src}: expected a text corpus file ({wanted}). Received: {_what_it_is(src)}")
        listing = Listing((src,))
    else:
        listing = _list_folder(src, wanted)
    if not listing.files:
        raise DataError(
            f"{src}: expected text corpus files ({wanted}). Received: none"
            + (
                f" among {len(listing.skipped)} file(s) such as {listing.skipped[0].input}"
                if listing.skipped
                else ""
            )
        )
    _refuse_twice_read(listing.files)
    return listing


def _corpus_file(path: str) -> bool:
    """Whether a file is read as a corpus file: by its name, or a `.json` by its content."""
    if kind_of(path):
        return True
    return json_named(path) and _json_lines(path)


@functools.lru_cache(maxsize=256)
def _json_lines(path: str) -> bool:
    """Whether a file's first line is a JSON object: JSON Lines, whatever its name."""
    try:
        return looks_like_json_lines(textfile.read_head(path))
    except (DataError, *UNREADABLE):
        return False


def looks_like_json_lines(head: bytes) -> bool:
    """Whether a file whose decompressed bytes start with `head` is JSON Lines: its first
    line is a JSON object (or, longer than `head`, starts like one). UTF-8 only: a BOM or NUL
    bytes of UTF-16 are not looked through (such a file is named .jsonl, or given --format)."""
    text = head.decode("utf-8", "replace").removeprefix("\ufeff").lstrip()
    line, ended = text.partition("\n")[0], "\n" in text
    if not line.startswith("{"):
        return False
    if not ended:
        return line.startswith('{"')
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def _what_it_is(path: str) -> str:
    """What a file given by name is, when it is not a corpus file, for messages."""
    if not json_named(path):
        return "a file named otherwise"
    try:
        head = textfile.read_head(path).decode("utf-8", "replace").lstrip("\ufeff \t\r\n")
    except (DataError, *UNREADABLE):
        head = ""
    if head.startswith("["):
        return (
            "a .json file that holds one JSON array, not JSON Lines (one object a line). Write JSON "
            "Lines: datasets' Dataset.to_json(path) does by default (lines=True), pandas' "
            "DataFrame.to_json(path, orient='records', lines=True)"
        )
    return "a .json file whose first line is not a JSON object, so not JSON Lines (one object a line)"


def _not_a_corpus_file(path: str) -> SkippedInput:
    reason = (
        "a .json file that is not JSON Lines"
        if json_named(path)
        else f"its name ends in none of {FILE_NAMES}"
    )
    return SkippedInput(path, f"not a corpus file: {reason}")


def _refuse_twice_read(files: tuple[str, ...]) -> None:
    """Refuses two listed names of one local file (a symbolic or hard link beside its
    target): its documents would be read, and trained on, twice; and a name that reaches no
    file (a symbolic link loop or a broken link).

    Raises:
      DataError: naming both names, or the links and where they point.
    """
    seen: dict[tuple[int, int], str] = {}
    for path in files:
        if storage.is_gcs(path):
            continue
        try:
            st = os.stat(path)
        except OSError as e:
            raise DataError(
                f"{path}: expected a corpus file. Received: {storage.broken_link(path) or e.strerror}. "
                "Point the link at a file or remove it (a --resume cannot get past it)."
            ) from None
        first = seen.setdefault((st.st_dev, st.st_ino), path)
        if first != path:
            link = " (a symbolic link to it)" if os.path.islink(path) or os.path.islink(first) else ""
            raise DataError(
                f"{path}: the same file as {first}{link}. Expected each corpus file once: its "
                "documents would be read twice. Remove one name, or pass a glob that matches one."
            )


def _list_folder(src: str, wanted: str) -> Listing:
    if storage.is_gcs(src):
        entries = [(n, d) for n, d, _, _ in storage.gcs_entries(src)]
    elif os.path.isdir(src):
        entries = [(n, os.path.isdir(os.path.join(src, n))) for n in storage.listdir(src)]
    else:
        raise DataError(
            f"Expected a text corpus file, folder or glob. Received: {src!r}, which does not exist"
        )
    names = {n for n, _ in entries}
    if hfsaved.STATE in names:
        saved = hfsaved.saved_dataset(src)
        if saved is not None:
            return Listing(saved.files, features=saved.features)
    if hfsaved.DICT in names:
        raise hfsaved.dataset_dict_error(src, hfsaved.dataset_dict_splits(src) or [])
    entries = sorted(e for e in entries if not e[0].startswith((".", "_")))  # _SUCCESS, .DS_Store
    folders = [n for n, is_dir in entries if is_dir]
    if folders:
        raise DataError(
            f"{src}: expected a folder of text corpus files. Received: subfolder(s) {folders[:5]}, whose "
            f"files would be left out. {_subfolder_way(src, folders)}"
        )
    paths = [storage.join(src, n) for n, _ in entries]
    files = [p for p in paths if _corpus_file(p)]
    return Listing(tuple(files), tuple(_not_a_corpus_file(p) for p in paths if p not in files))


def _subfolder_way(src: str, folders: list[str]) -> str:
    """What to pass instead of a folder with subfolders: a glob that matches every corpus file
    under it (checked), else each folder on its own. Hive partition values (`lang=en/`) are
    said not to be read: a text record holds tokens, and a label from a field or column."""
    files = [f for f in walk(src) if kind_of(f)]
    shapes = {(f.count("/"), os.path.splitext(f.lower())[1]) for f in files}
    hive = " The folder names' key=value pairs are not read into the records." * all(
        "=" in f for f in folders
    )
    if len(shapes) == 1:
        ((depth, suffix),) = shapes
        pattern = storage.join(src, *(["*"] * depth), "*" + suffix)
        if len(storage.glob(pattern)) == len(files):
            return f"Pass a glob that names their {len(files)} files: '{pattern}'.{hive}"
    return f"Convert each folder on its own, or pass a glob that names the files.{hive}"

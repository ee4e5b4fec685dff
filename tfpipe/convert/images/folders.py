"""Image folder sources: `SRC/<class>/<file>` trees and flat ImageNet validation folders.

Inputs are listed, labelled (by sorted class name, or by the class list of the dataset the
split joins) and shuffled with a fixed seed, so every shard mixes classes and the same source
always gives the same plan.

Nothing is left out in silence:
- A class folder's subfolders are searched too, as Keras' `image_dataset_from_directory`
  does: `scenes/2019/a.jpg` is an image of class `scenes`, recorded with the file name
  `2019/a.jpg`. Files are taken in sorted order of their path, so the plan is deterministic.
- A file without an image extension is listed as skipped, with the reason, in the manifest.
- A class folder without any image, a symlink loop, a broken symlink, a FIFO or device, an
  unreadable folder and a file name that is not UTF-8 are errors naming the path. So is a file
  reached twice (a symbolic or hard link to an image listed elsewhere): it would be converted
  twice, perhaps under two labels.
- Hidden names (starting with ".") are ignored, like `.DS_Store` and tfpipe's own files.
"""

from __future__ import annotations

import dataclasses
import os
import random
import re
import shlex
import stat
from collections.abc import Iterator
from typing import NamedTuple

from tfpipe import storage
from tfpipe.convert.encode import ImageItem
from tfpipe.convert.formats import hfsaved, jsonlfile, textfile
from tfpipe.convert.images.decode import IMAGE_EXTENSIONS
from tfpipe.convert.images.labels import SYNSET_RE, read_labels
from tfpipe.convert.tables.read import TABLE_SUFFIXES
from tfpipe.convert.text import listing as text_listing
from tfpipe.errors import DataError
from tfpipe.format.manifest import SkippedInput

_PARTITION_RE = re.compile(r"^[^=]+=[^=]*$")  # a Hive partition folder: key=value


@dataclasses.dataclass(frozen=True, slots=True)
class ImageScan:
    layout: str
    items: tuple[ImageItem, ...]
    class_names: tuple[str, ...]
    label_offset: int
    estimated_bytes: int
    skipped: tuple[SkippedInput, ...] = ()  # inputs left out when listing, with the reason
    identities: tuple[str, ...] = ()  # each item's `storage.identity`, in the order of `items`
    notes: tuple[str, ...] = ()  # what the summary says of how the source was read


class Entry(NamedTuple):
    """A visible file or folder, as listed."""

    name: str
    is_dir: bool
    size: int
    identity: str = ""  # `storage.identity` of a file, from the listing's stat
    node: tuple[int, int] | None = None  # (device, inode) of a local file: the same file twice


@dataclasses.dataclass(frozen=True, slots=True)
class FormatChoice:
    """The source format `--format auto` picked, and why (for the user to check)."""

    format: str
    reason: str


# ---- listing ----


def _entries(path: str) -> list[Entry]:
    """The visible entries directly under `path`, sorted.

    Raises:
      DataError: the folder cannot be listed, or holds something other than files and
        folders (a FIFO, a device, a broken symlink) or a name that is not UTF-8.
    """
    if storage.is_gcs(path):
        try:
            return [Entry(*e) for e in storage.gcs_entries(path) if not e[0].startswith(".")]
        except FileNotFoundError:
            raise DataError(f"{path}: the bucket does not exist") from None
    out = []
    try:
        with os.scandir(path) as it:
            for e in it:
                if not e.name.startswith("."):
                    _check_name(path, e.name)
                    st = _stat(e.path)
                    if stat.S_ISREG(st.st_mode):
                        identity = f"size={st.st_size} mtime_ns={st.st_mtime_ns}"  # as storage.identity
                        out.append(Entry(e.name, False, st.st_size, identity, (st.st_dev, st.st_ino)))
                    else:
                        out.append(Entry(e.name, True, 0))
    except OSError as e:
        raise DataError(f"{path}: cannot list the folder: {e.strerror or e}") from None
    return sorted(out)


def _check_name(folder: str, name: str) -> None:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise DataError(
            f"{folder}: a file name is not valid UTF-8: {os.fsencode(name)!r}. Expected UTF-8 "
            "names (they are stored in the records and the manifest); rename the file."
        ) from None


def _stat(path: str, expected: str = "files and folders") -> os.stat_result:
    """The stat of what `path` points to; refuses anything but a file or a folder."""
    try:
        st = os.stat(path)
    except OSError:
        problem = storage.broken_link(path)
        if problem:
            raise DataError(f"{path}: expected {expected}. Received: {problem}") from None
        raise
    if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
        raise DataError(f"{path}: expected {expected}. Received: {storage.file_kind(st.st_mode)}")
    return st


def _walk(
    folder: str, seen: dict[tuple[int, int], str], parents: tuple[tuple[int, int], ...] = ()
) -> Iterator[Entry]:
    """Every visible file under `folder`, named by its path relative to it, sorted by path.

    `seen` maps the folders walked so far (device, inode) to their path: a folder reached a
    second time through a symbolic link, a loop or not, is an error instead of a duplicate.
    """
    if storage.is_gcs(folder):
        for rel, _, size, identity in storage.gcs_entries(folder, recursive=True):
            if not any(part.startswith(".") for part in rel.split("/")):
                yield Entry(rel, False, size, identity)
        return
    node = _visit(folder, seen, parents)
    yield from _walk_local(folder, "", (*parents, node), seen)


def _inode(path: str) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def _visit(
    path: str, seen: dict[tuple[int, int], str], ancestors: tuple[tuple[int, int], ...]
) -> tuple[int, int]:
    node = _inode(path)
    if node in ancestors:
        raise DataError(f"{path}: a symlink loop (it leads back to {seen.get(node, 'a folder above it')})")
    if node in seen:
        raise DataError(
            f"{path}: the same folder as {seen[node]}, reached twice through a symbolic link; "
            "its images would be converted twice. Remove one of the two."
        )
    seen[node] = path
    return node


def _walk_local(
    folder: str, rel: str, ancestors: tuple[tuple[int, int], ...], seen: dict[tuple[int, int], str]
) -> Iterator[Entry]:
    here = os.path.join(folder, rel) if rel else folder
    for entry in _entries(here):
        child = f"{rel}/{entry.name}" if rel else entry.name
        if not entry.is_dir:
            yield entry._replace(name=child)
            continue
        node = _visit(os.path.join(folder, child), seen, ancestors)
        yield from _walk_local(folder, child, (*ancestors, node), seen)


def _is_image_name(name: str) -> bool:
    return os.path.splitext(name)[1].lower() in IMAGE_EXTENSIONS


def _not_an_image(path: str) -> SkippedInput:
    ext = os.path.splitext(path)[1] or "(none)"
    known = " ".join(sorted(IMAGE_EXTENSIONS))
    return SkippedInput(path, f"not an image file: extension {ext} is not one of {known}")


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
        if stat.S_ISREG(_stat(src, "a source folder or table file").st_mode):
            return _file_format(src, suffix)
    entries = _entries(src)
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
    if labels_file and any(_is_image_name(n) for n in files):
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
        flat = not any(is_dir for _, is_dir in inside) and any(_is_image_name(n) for n, _ in inside)
        split = SPLIT_NAMES[d.lower()]
        split = d if split in {f.split for f in found} else split  # val/ and validation/: two splits
        found.append(SplitFolder(storage.join(src, d), split, flat))
    return tuple(found)


def _names(folder: str) -> list[tuple[str, bool]]:
    """(name, is_dir) of the visible entries of `folder`, without the checks of `_entries`
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


# ---- scans ----


def scan_class_folders(
    src: str, layout: str, label_offset: int, seed: int, class_names: tuple[str, ...] = ()
) -> ImageScan:
    """Lists `src/<class>/**/<image>`; labels are label_offset + the class's index.

    Args:
      class_names: the class list of the dataset this split joins. Its numbering is kept,
        so a synset has the same label in every split; a class folder not in it is refused.
        Empty: the sorted names of the class folders.
    """
    entries = _entries(src)
    classes = [e.name for e in entries if e.is_dir]
    if not classes:
        raise DataError(f"{src}: expected class folders (SRC/<class>/<image>). Received: none")
    names = tuple(class_names) or tuple(classes)
    index = {c: i for i, c in enumerate(names)}
    unknown = [c for c in classes if c not in index]
    if unknown:
        raise DataError(
            f"{src}: class folder(s) {unknown[:5]} are not among the {len(names)} classes of the "
            f"dataset this split joins ({', '.join(names[:5])}{', ...' if len(names) > 5 else ''}). "
            "Labels must mean the same class in every split: convert into a new destination."
        )
    skipped = [
        SkippedInput(storage.join(src, e.name), "not inside a class folder") for e in entries if not e.is_dir
    ]
    listed: list[tuple[ImageItem, str]] = []
    files: dict[tuple[int, int], str] = {}  # (device, inode) -> the path it was first listed under
    total = 0
    top = () if storage.is_gcs(src) else (_inode(src),)
    seen = dict.fromkeys(top, src)
    for cls in classes:
        folder = storage.join(src, cls)
        found = 0
        for entry in _walk(folder, seen, top):
            path = storage.join(folder, *entry.name.split("/"))
            if not _is_image_name(entry.name):
                skipped.append(_not_an_image(path))
                continue
            _refuse_second_link(path, entry, files)
            listed.append((ImageItem(path, label_offset + index[cls], cls, entry.name), entry.identity))
            total += entry.size
            found += 1
        if not found:
            raise DataError(
                f"{folder}: class folder holds no image files ({', '.join(sorted(IMAGE_EXTENSIONS))}). "
                "A class without examples is almost always a mistake: add images or remove the folder."
            )
    random.Random(seed).shuffle(listed)
    items, identities = tuple(i for i, _ in listed), tuple(d for _, d in listed)
    return ImageScan(layout, items, names, label_offset, total, tuple(skipped), identities)


def _refuse_second_link(path: str, entry: Entry, files: dict[tuple[int, int], str]) -> None:
    """Refuses a file listed before under another path (a symbolic or hard link to it)."""
    if entry.node is None:
        return
    first = files.setdefault(entry.node, path)
    if first != path:
        raise DataError(
            f"{path}: the same file as {first} (a symbolic or hard link to it). Expected each "
            "image once: it would be converted twice, under the label of each folder. Remove "
            "one of the two."
        )


def scan_validation(
    src: str, labels_file: str, label_offset: int, class_names: tuple[str, ...] = ()
) -> ImageScan:
    """A flat folder plus a labels file, as ImageNet ships its validation split.

    The labels file (`labels.read_labels`) has one line per image: either just the label, in
    sorted file-name order (`imagenet_2012_validation_synset_labels.txt`), or `<file> <label>`,
    whitespace or comma separated, with or without a header. Labels number the classes as
    `class_names` does (the train split's, when it is already in the destination), else the
    sorted labels of the file.
    """
    entries = _entries(src)
    folders = [e.name for e in entries if e.is_dir]
    if folders:
        raise DataError(
            f"{src}: expected a flat folder of images with --labels (labels_file). "
            f"Received: subfolders {folders[:5]}. Drop --labels for a class-folder tree."
        )
    images = [e for e in entries if _is_image_name(e.name)]
    nodes: dict[tuple[int, int], str] = {}
    for e in images:
        _refuse_second_link(storage.join(src, e.name), e, nodes)
    skipped = tuple(_not_an_image(storage.join(src, e.name)) for e in entries if not _is_image_name(e.name))
    found = read_labels(labels_file, [e.name for e in images], src)
    names = class_names or found.classes
    index = {s: i for i, s in enumerate(names)}
    unknown = sorted(set(found.classes) - set(index))
    if unknown:
        raise DataError(
            f"{labels_file}: labels {unknown[:5]} are not among the {len(names)} classes of the dataset"
        )
    items = [
        ImageItem(storage.join(src, e.name), label_offset + index[s], s)
        for e, s in zip(images, found.labels, strict=True)
    ]
    total = sum(e.size for e in images)
    identities = tuple(e.identity for e in images)
    return ImageScan(
        "imagenet", tuple(items), tuple(names), label_offset, total, skipped, identities, found.notes
    )

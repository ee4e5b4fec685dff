"""What a source is, before any modality reads it: its format given as `--format auto`,
detected by content, and a source of split folders (train/, val/) refused with the command for
each split.

This is where the modalities' detection meets (`Kind.claims`, `detect_file`, `signs`,
`check_auto`, `explains`, `expects`): it decides which modality reads a source before any is
chosen, so it weighs their answers against each other, and names none of them.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import stat

from tfpipe import storage
from tfpipe.convert.config import ConvertConfig
from tfpipe.convert.entries import checked_stat, list_entries
from tfpipe.convert.kind import Folder, FormatChoice
from tfpipe.errors import DataError
from tfpipe.format.manifest import Manifest
from tfpipe.modalities import modalities, modality_of_format

__all__ = ["FormatChoice", "choose_format", "detect_format", "explain_format", "refuse_split_folders"]


def choose_format(src: str, cfg: ConvertConfig, joins: Manifest | None) -> tuple[str, str]:
    """The source format, and why: given, or detected by content. A modality that claims the
    source whatever it holds (a tokenizer option, a text dataset to join: text) reads it."""
    if cfg.format != "auto":
        return cfg.format, "given"
    for m in modalities():
        reason = m.convert.claims(src, cfg, joins)
        if reason is not None:
            return m.convert.formats[0], reason
    try:
        choice = explain_format(src, cfg.labels_file)
        modality_of_format(choice.format).convert.check_auto(choice, src, cfg)
    except DataError:
        for m in modalities():
            explained = m.convert.explains(src)
            if explained is not None:
                raise explained from None
        raise
    return choice.format, f"auto: {choice.reason}"


# ---- the format ----


def detect_format(src: str, labels_file: str | None = None) -> str:
    """Picks the format of what `src` holds (imagenet, images, csv, parquet, ...)."""
    return explain_format(src, labels_file).format


def explain_format(src: str, labels_file: str | None = None) -> FormatChoice:
    """Picks the format of `src` by content, and says why: one file by the modalities that read
    files (`Kind.detect_file`), a folder by every modality's signs in rank order (`Kind.signs`).

    Raises:
      DataError: `src` does not exist, is neither a file nor a folder, holds nothing a
        modality converts, or what a modality refuses (synset-named and other class folders).
    """
    if storage.is_gcs(src):
        named = _file_choice(src)  # a gs:// object by its name; else a folder
        if named is not None:
            return named
    else:
        if not os.path.lexists(src):
            raise DataError(
                f"Expected a source folder or table file. Received: {src!r}, which does not exist"
            )
        if stat.S_ISREG(checked_stat(src, "a source folder or table file").st_mode):
            choice = _file_choice(src)
            if choice is not None:
                return choice
    entries = list_entries(src)
    folder = Folder(
        src,
        tuple(e.name for e in entries if e.is_dir),
        tuple(e.name for e in entries if not e.is_dir),
        labels_file,
    )
    signs = sorted((rank, i, sign) for i, m in enumerate(modalities()) for rank, sign in m.convert.signs)
    for _, _, sign in signs:
        choice = sign(folder)
        if choice is not None:
            return choice
    expected = [m.convert.expects for m in modalities() if m.convert.expects]
    raise DataError(
        f"{src}: cannot tell its format. Expected {', or '.join(expected)}. Received: {len(folder.dirs)} "
        f"folders, {len(folder.files)} files (e.g. {list(folder.files[:3])}). Pass --format."
    )


def _file_choice(src: str) -> FormatChoice | None:
    """The first modality's answer for one file."""
    for m in modalities():
        choice = m.convert.detect_file(src)
        if choice is not None:
            return choice
    return None


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
      needs: what its command needs besides the split (images without class folders: a labels
        file, `Kind.split_folder`), and why; None: nothing.
    """

    path: str
    split: str
    needs: tuple[str, str] | None = None


def split_folders(src: str) -> tuple[SplitFolder, ...]:
    """The split folders of `src`, when every folder directly under it is named like a split
    (`train/`, `val/`, `test/`, as tensorflow-datasets' ImageFolder lays them out); else ()."""
    if storage.is_gcs(src) and _file_choice(src) is not None:  # a gs:// file, by its name
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
        needs = next((n for m in modalities() if (n := m.convert.split_folder(d, inside))), None)
        split = SPLIT_NAMES[d.lower()]
        split = d if split in {f.split for f in found} else split  # val/ and validation/: two splits
        found.append(SplitFolder(storage.join(src, d), split, needs))
    return tuple(found)


def _names(folder: str) -> list[tuple[str, bool]]:
    """(name, is_dir) of the visible entries of `folder`, without the checks of `list_entries`
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
        needed, why = (s.needs[0], f"  # {s.needs[1]}") if s.needs is not None else ("", "")
        command = [
            "tfpipe convert",
            shlex.quote(s.path),
            shlex.quote(dest),
            f"--split {s.split}{needed}",
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

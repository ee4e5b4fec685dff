"""A source folder's entries, listed with the checks every modality's source needs: hidden
names left out, names that are not UTF-8, broken symlinks, FIFOs and devices refused by path.
Detection (`detect`) and a modality's listing (images' class folders) read them alike."""

from __future__ import annotations

import os
import stat
from typing import NamedTuple

from tfpipe import storage
from tfpipe.errors import DataError


class Entry(NamedTuple):
    """A visible file or folder, as listed."""

    name: str
    is_dir: bool
    size: int
    identity: str = ""  # `storage.identity` of a file, from the listing's stat
    node: tuple[int, int] | None = None  # (device, inode) of a local file: the same file twice


def list_entries(path: str) -> list[Entry]:
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
                    st = checked_stat(e.path)
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


def checked_stat(path: str, expected: str = "files and folders") -> os.stat_result:
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

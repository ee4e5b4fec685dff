"""Files, local and gs://, behind one small set of functions: listing, globbing, reading, sizes,
versions (`identity`), removing, and the local checks (a regular file, a writable folder).

The gs:// side of each is in `gcs`; writes are in `commit` (atomic everywhere).
"""

from __future__ import annotations

import errno
import fnmatch
import glob as globlib
import os
import stat as stat_mod
import tempfile
from collections.abc import Iterator
from typing import BinaryIO

import google_crc32c

from tfpipe.errors import StorageError
from tfpipe.storage import gcs
from tfpipe.storage.paths import GCS_PREFIX, HIDDEN_PREFIX, is_gcs, split_gcs


def exists(path: str) -> bool:
    return gcs.exists(path) if is_gcs(path) else os.path.exists(path)


def listdir(path: str) -> list[str]:
    """Names (not paths) directly under `path`, hidden ones included, sorted."""
    if is_gcs(path):
        return sorted({name for name, _, _, _ in gcs.gcs_entries(path)})
    if not os.path.isdir(path):
        return []
    return sorted(os.listdir(path))


def identity(path: str, checksum: bool = False) -> str:
    """What identifies a version of an input, so `--resume` refuses one that changed.

    Locally: its size and modification time (`size=... mtime_ns=...`), plus with `checksum`
    the crc32c of its bytes (read whole for it). On gs://: its size, generation (a new one on
    every write) and the crc32c GCS keeps, all from the object's metadata.

    Raises:
      FileNotFoundError: no such file or object.
    """
    if is_gcs(path):
        return gcs.identity(path)
    st = os.stat(path)
    out = f"size={st.st_size} mtime_ns={st.st_mtime_ns}"
    if checksum:
        crc = google_crc32c.Checksum()
        with open_regular(path) as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                crc.update(chunk)
        out += f" crc32c={crc.digest().hex()}"
    return out


def same_version(a: str, b: str) -> bool:
    """Whether two `identity` strings name the same version: the same size and modification
    time (or generation). A content checksum is compared only where both have one."""
    fa, fb = dict(f.split("=", 1) for f in a.split()), dict(f.split("=", 1) for f in b.split())
    return all(fa[k] == fb[k] for k in fa.keys() & fb.keys())


def glob(pattern: str) -> list[str]:
    """Files matching a glob whose wildcards (`*`, `?`, `[...]`) may be in any path component
    (`data/d*/train-*`), sorted. `*` does not cross a `/`; hidden names match only a pattern
    that starts with a dot, as in a shell."""
    pattern = str(pattern).rstrip("/")
    if not is_gcs(pattern):
        return sorted(p for p in globlib.glob(pattern) if not os.path.isdir(p))
    bucket, name = split_gcs(pattern)
    first = min((name.find(c) for c in "*?[" if c in name), default=len(name))
    prefix = name[:first].rsplit("/", 1)[0] + "/" if "/" in name[:first] else ""
    parts = name.split("/")

    def matches(object_name: str) -> bool:
        names = object_name.split("/")
        return len(names) == len(parts) and all(
            fnmatch.fnmatchcase(n, p) and (not n.startswith(".") or p.startswith("."))
            for n, p in zip(names, parts, strict=True)
        )

    base = f"{GCS_PREFIX}{bucket}/{prefix}".rstrip("/")
    return sorted(
        f"{base}/{rel}" for rel, _, _, _ in gcs.gcs_entries(base, recursive=True) if matches(prefix + rel)
    )


def size(path: str) -> int:
    return gcs.size(path) if is_gcs(path) else os.path.getsize(path)


def read_bytes(path: str) -> bytes:
    if is_gcs(path):
        return gcs.read_bytes(path)
    with open_regular(path) as f:
        return f.read()


def open_regular(path: str) -> BinaryIO:
    """Opens a local file for reading, refusing anything but a regular file.

    The open is non-blocking, so a FIFO (which would wait forever for a writer) or a device
    is refused by name instead of hanging the caller.

    Raises:
      StorageError: `path` is a FIFO, socket, device or directory.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat_mod.S_ISREG(mode):
            raise StorageError(f"{path}: expected a regular file. Received: {file_kind(mode)}")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def broken_link(path: str) -> str | None:
    """What stops the local `path` from reaching a file through its symbolic links, in words:
    a loop (each link and what it points to, as `ls -l` shows them, until one repeats) or a link
    to nothing; None when it reaches something.

    The links are followed one at a time with `os.readlink`, so a message names the links to
    mend, not only the errno's "too many levels of symbolic links".
    """
    hops, seen, here = [path], {os.path.normpath(path)}, path
    while os.path.islink(here):
        target = os.readlink(here)
        hops.append(target)
        here = os.path.normpath(os.path.join(os.path.dirname(here), target))
        if here in seen:
            return f"a symbolic link loop: {' -> '.join(hops)}, which is where it started"
        seen.add(here)
    if len(hops) > 1 and not os.path.lexists(here):
        return f"a broken symbolic link: {' -> '.join(hops)}, which does not exist"
    try:
        os.stat(path)
    except OSError as e:
        if e.errno == errno.ELOOP:  # a loop through a folder of its path, not its own links
            return f"a symbolic link loop in its path: {e.strerror}"
    return None


def write_problem(folder: str) -> str | None:
    """Why no new file can be written in the local `folder` ("no such folder", "Permission
    denied", "Read-only file system"), or None when one can.

    The one writability check: it makes and removes an empty hidden file there, which proves
    what permission bits alone cannot (a read-only mount, ACLs, root bypassing the bits).
    """
    if not os.path.isdir(folder):
        return "no such folder"
    try:
        fd, probe = tempfile.mkstemp(prefix=f"{HIDDEN_PREFIX}tfpipe-write-check-", dir=folder)
    except OSError as e:
        return e.strerror or str(e)
    os.close(fd)
    os.remove(probe)
    return None


def file_kind(mode: int) -> str:
    """What a stat mode describes, for messages: "a FIFO (named pipe)", "a directory", ..."""
    for test, name in (
        (stat_mod.S_ISDIR, "a directory"),
        (stat_mod.S_ISFIFO, "a FIFO (named pipe)"),
        (stat_mod.S_ISSOCK, "a socket"),
        (stat_mod.S_ISCHR, "a character device"),
        (stat_mod.S_ISBLK, "a block device"),
        (stat_mod.S_ISREG, "a regular file"),
    ):
        if test(mode):
            return name
    return f"a special file (mode {mode:o})"


def open_read(path: str) -> BinaryIO:
    """A buffered binary stream; for gs://, a retried download into a spooled temp file."""
    if not is_gcs(path):
        return open_regular(path)
    spool = tempfile.SpooledTemporaryFile(max_size=64 << 20)  # noqa: SIM115 - returned open
    try:
        gcs.download(path, spool)
    except BaseException:
        spool.close()
        raise
    spool.seek(0)
    return spool  # type: ignore[return-value]


def iter_lines(path: str) -> Iterator[str]:
    with open_read(path) as f:
        for line in f:
            yield line.decode("utf-8")


def makedirs(path: str) -> None:
    if not is_gcs(path):
        os.makedirs(path, exist_ok=True)


def remove(path: str, missing_ok: bool = True) -> None:
    try:
        if is_gcs(path):
            gcs.delete(path)
        else:
            os.remove(path)
    except FileNotFoundError:
        if not missing_ok:
            raise

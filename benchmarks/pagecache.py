"""Cold reads for the convert benchmarks: evict files from the page cache, read them raw."""

from __future__ import annotations

import os


def evict(paths: list[str]) -> None:
    """Drops the files from the page cache, so the next read comes from the disk.

    Syncs first: the page cache keeps dirty pages (files just written) whatever the advice.
    """
    os.sync()
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def raw_read(paths: list[str]) -> None:
    """Reads each file whole: the floor any conversion of them is measured against."""
    for p in paths:
        with open(p, "rb") as f:
            f.read()

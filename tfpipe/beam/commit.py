"""Committing a finished shard exactly once, whoever else tries.

Under Beam a bundle may be retried after a failure or run twice at the same time, so the
same shard can be committed more than once. Each attempt writes a temporary file of its own
and commits it under the final name with a does-not-exist precondition (a hard link locally,
`if_generation_match=0` on GCS). The first commit wins. A later one that finds the same bytes
already there counts as success, because the plan makes every attempt write the same bytes; a
later one that finds different bytes is an error, never a silent overwrite.
"""

from __future__ import annotations

import contextlib
import filecmp
import os

from tfpipe import storage
from tfpipe.convert.writer import ShardWriter
from tfpipe.manifest import ShardInfo


def commit_once(local_path: str, dest: str) -> None:
    """Moves the finished local file `local_path` to `dest`, or finds the same bytes there.

    On GCS the upload itself compares checksums when the precondition fails (a lost reply or
    a duplicate attempt); locally the two files are compared byte by byte.

    Raises:
      storage.AlreadyExists: `dest` holds different bytes.
    """
    try:
        storage.commit_file(local_path, dest, overwrite=False)
        return
    except storage.AlreadyExists:
        if storage.is_gcs(dest):  # the upload found another checksum there
            _remove(local_path)
            raise storage.AlreadyExists(
                f"{dest}: expected it absent or holding the same bytes as this attempt. Received: an "
                "object with another crc32c checksum. Another run may be writing this destination."
            ) from None
    same = filecmp.cmp(local_path, dest, shallow=False)
    _remove(local_path)
    if not same:
        raise storage.AlreadyExists(
            f"{dest}: expected it absent or holding the same bytes as this attempt. Received: a file "
            f"of {os.path.getsize(dest)} bytes with other contents. Another run may be writing this "
            "destination."
        )


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)


def commit_shard(writer: ShardWriter) -> ShardInfo:
    """`writer.commit()`, where finding the same bytes already committed counts as success.

    Raises:
      storage.AlreadyExists: the shard exists with other bytes.
    """
    try:
        return writer.commit()
    except storage.AlreadyExists:
        if storage.is_gcs(writer.dest):
            raise  # the upload compared checksums already: other bytes are there
    commit_once(writer._tmp, writer.dest)
    return ShardInfo(writer.name, writer.examples, writer._hashing.bytes, str(writer._hashing.checksum))

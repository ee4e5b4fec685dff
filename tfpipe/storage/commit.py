"""Atomic commits, local and gs://, and reads and deletes tied to a gs:// object's generation.

Writes are atomic everywhere:
- locally, a hidden temporary file (`.<name>.tmp-<pid>-<rand>`) in the same directory, fsynced,
  then renamed into place;
- on GCS, the object is uploaded whole, with an `if_generation_match=0` (does-not-exist)
  precondition unless `overwrite=True`. A GCS object is invisible until its upload completes.

The google-api-core imports are inside functions (their cost: see `gcs`).
"""

from __future__ import annotations

import base64
import errno
import filecmp
import os
import random
import tempfile

import google_crc32c

from tfpipe.errors import AlreadyExists
from tfpipe.storage import gcs
from tfpipe.storage.paths import HIDDEN_PREFIX, basename, is_gcs


def temp_name(final_name: str) -> str:
    """The hidden in-progress name for `final_name`: no `train-*` glob matches it."""
    return f"{HIDDEN_PREFIX}{final_name}.tmp-{os.getpid()}-{random.randrange(1 << 32):08x}"


def commit_file(local_path: str, dest: str, overwrite: bool = False, durable: bool = True) -> None:
    """Moves a finished local file to `dest` atomically (rename, or a whole-object upload).

    Without `overwrite` the commit has a does-not-exist precondition (a hard link locally,
    `if_generation_match=0` on GCS). Finding the same bytes already at `dest` counts as
    success: a retried or duplicated commit (a lost reply, a Beam bundle run twice) changes
    nothing. Finding other bytes is an error, and the caller's file is left alone.

    Raises:
      AlreadyExists: `dest` holds other bytes and `overwrite` is False.
    """
    if is_gcs(dest):
        _upload(dest, overwrite, local_path=local_path)
        os.remove(local_path)
        return
    # `durable`: flush the file and its directory entry to the disk, so a power loss cannot
    # leave `dest` named but empty. False only for files whose loss or emptiness costs no
    # more than redoing work, such as a resume journal's done-records.
    if durable:
        with open(local_path, "rb+") as f:
            os.fsync(f.fileno())
    os.chmod(local_path, 0o666 & ~current_umask())  # mkstemp makes 0600; shards are data, not secrets
    if overwrite:
        os.replace(local_path, dest)
    else:
        try:
            os.link(local_path, dest)  # fails if dest exists: no check-then-rename race
        except FileExistsError:
            if not filecmp.cmp(local_path, dest, shallow=False):
                raise AlreadyExists(f"{dest} already exists, with other bytes") from None
        os.remove(local_path)
    if durable:
        _fsync_dir(os.path.dirname(dest) or ".")


def current_umask() -> int:
    """The process's umask, read when needed (it may change while the process runs).

    Linux reports it in /proc/self/status (since 4.7), which reads it without changing it.
    Elsewhere the only way is to set it and set it back; in that instant another thread's new
    file would get permissions from mask 0, which is why that is the fallback only.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o077)  # the strictest mask while it is briefly swapped out
    os.umask(mask)
    return mask


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _upload(dest: str, overwrite: bool, *, local_path: str | None = None, data: bytes | None = None) -> int:
    """Uploads a local file or `data` whole; returns the object's generation."""
    from google.api_core import exceptions as gexc

    crc = google_crc32c.Checksum()
    if local_path is not None:
        with open(local_path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                crc.update(chunk)
    else:
        crc.update(data or b"")
    want_crc = base64.b64encode(crc.digest()).decode()
    precondition = None if overwrite else 0

    def upload() -> int:
        blob = gcs.blob(dest)
        options = {"if_generation_match": precondition, "retry": gcs.NO_CLIENT_RETRY, "checksum": "crc32c"}
        try:
            if local_path is not None:
                blob.upload_from_filename(local_path, **options)
            else:
                blob.upload_from_string(data or b"", content_type="application/octet-stream", **options)
            return int(blob.generation or 0)
        except gexc.PreconditionFailed:
            # An earlier attempt may have landed and only its reply been lost: same bytes is success.
            existing = gcs.blob(dest)
            existing.reload(retry=gcs.NO_CLIENT_RETRY)
            if existing.crc32c != want_crc:
                raise AlreadyExists(f"{dest} already exists") from None
            return int(existing.generation or 0)

    return gcs.with_retries(upload, f"upload {dest}")


def write_atomic(dest: str, data: bytes, overwrite: bool = False, durable: bool = True) -> int:
    """Writes `data` to `dest` so that readers see all of it or nothing.

    `durable` as for `commit_file`.

    Returns:
      The GCS object generation (0 for a local file).

    Raises:
      AlreadyExists: `dest` holds other bytes and `overwrite` is False (see `commit_file`).
    """
    if is_gcs(dest):  # uploaded from memory: no temporary file is left behind by a kill
        return _upload(dest, overwrite, data=data)
    local_dir = os.path.dirname(dest) or "."
    os.makedirs(local_dir, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=temp_name(basename(dest)), dir=local_dir)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        commit_file(tmp, dest, overwrite=overwrite, durable=durable)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return 0


def read_generation(path: str) -> tuple[bytes, int]:
    """The bytes of a gs:// object and the generation they belong to.

    Raises:
      FileNotFoundError: no such object (it may have just been deleted).
    """
    from google.api_core import exceptions as gexc

    def read() -> tuple[bytes, int]:
        blob = gcs.blob(path)
        blob.reload(retry=gcs.NO_CLIENT_RETRY)
        generation = int(blob.generation)
        try:
            return blob.download_as_bytes(
                if_generation_match=generation, retry=gcs.NO_CLIENT_RETRY
            ), generation
        except gexc.PreconditionFailed:
            raise FileNotFoundError(errno.ENOENT, "replaced while being read", path) from None

    return gcs.call(read, f"read {path}", path)


def remove_generation(path: str, generation: int) -> bool:
    """Deletes a gs:// object only if it is still at `generation`. True if it was deleted."""
    from google.api_core import exceptions as gexc

    try:
        gcs.call(
            lambda: gcs.blob(path).delete(if_generation_match=generation, retry=gcs.NO_CLIENT_RETRY),
            f"delete {path}",
            path,
        )
    except (FileNotFoundError, gexc.PreconditionFailed):
        return False
    return True

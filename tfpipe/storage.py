"""Local paths and gs:// paths behind one small set of functions.

Writes are atomic everywhere:
- locally, a hidden temporary file (`.<name>.tmp-<pid>-<rand>`) in the same directory, fsynced,
  then renamed into place;
- on GCS, the object is uploaded whole, with an `if_generation_match=0` (does-not-exist)
  precondition unless `overwrite=True`. A GCS object is invisible until its upload completes.

GCS goes through the google-cloud-storage client (it has preconditions; TF's GFile has not).
Transient GCS errors (HTTP 429 and 5xx, connection resets) are retried with exponential backoff,
and counted (`retries()`).
`STORAGE_EMULATOR_HOST` points the client at an emulator (tfpipe.testing.gcs).
"""

from __future__ import annotations

import base64
import collections
import errno
import filecmp
import fnmatch
import os
import random
import stat as stat_mod
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import BinaryIO, TypeVar

from tfpipe.errors import AlreadyExists, CredentialsError, StorageError
from tfpipe.errors import InvalidPath as InvalidPath  # re-exported

# The gs:// path rules live in gcsnames.py; these are their names for the rest of tfpipe.
from tfpipe.gcsnames import GCS_PREFIX as GCS_PREFIX
from tfpipe.gcsnames import check_url as check_url
from tfpipe.gcsnames import is_gcs as is_gcs
from tfpipe.gcsnames import split_gcs as split_gcs

T = TypeVar("T")
HIDDEN_PREFIX = "."


_PROVIDE_CREDENTIALS = (
    "Provide them one of these ways: `gcloud auth application-default login` (your user "
    "account); GOOGLE_APPLICATION_CREDENTIALS=/path/to/key.json (a service account's key file); "
    "or run on a Google Cloud VM, TPU VM or GKE node whose service account can use the bucket."
)


def _credentials_error(path: str, error: BaseException, found: bool) -> CredentialsError:
    """One line: what is missing (or refused), and the ways to provide it."""
    reason = " ".join(str(error).split()).split(" To set up")[0].rstrip(". ") or type(error).__name__
    what = "the Google Cloud credentials found were refused" if found else "no Google Cloud credentials found"
    return CredentialsError(f"{path or 'gs://'}: {what} (google-auth: {reason}). {_PROVIDE_CREDENTIALS}")


def join(base: str, *parts: str) -> str:
    base = str(base)
    if is_gcs(base):
        return "/".join([base.rstrip("/"), *(p.strip("/") for p in parts)])
    return os.path.join(base, *parts)


def basename(path: str) -> str:
    return str(path).rstrip("/").rsplit("/", 1)[-1]


# ---- how TensorFlow reads gs:// ----

# TensorFlow's GCS filesystem reads a file in blocks of this many MiB, one request each
# (tensorflow/tsl/platform/cloud/gcs_file_system.cc, kDefaultBlockSize; the variable, read once
# when TensorFlow is imported, overrides it). It also fills a whole block for every file it
# opens: ~30 ms of CPU per file, however small (GCS_TESTING.md).
GCS_BLOCK_MB_VARIABLE = "GCS_READ_CACHE_BLOCK_SIZE_MB"
GCS_DEFAULT_BLOCK_MB = 64


def gcs_block_bytes() -> int:
    """TensorFlow's gs:// read block in bytes: the variable's MiB when set, else 64 MiB."""
    raw = os.environ.get(GCS_BLOCK_MB_VARIABLE, "")
    try:
        mb = int(raw) if raw else GCS_DEFAULT_BLOCK_MB
    except ValueError:
        mb = GCS_DEFAULT_BLOCK_MB
    return (mb if mb > 0 else GCS_DEFAULT_BLOCK_MB) << 20


def gcs_request_bytes() -> int:
    """The longest gs:// file TensorFlow is taken to read in one request: the block, never more
    than TensorFlow's default (a larger value set after TensorFlow read it has no effect yet)."""
    return min(gcs_block_bytes(), GCS_DEFAULT_BLOCK_MB << 20)


# ---- GCS client and retries ----


_CLIENTS: dict[int, object] = {}


def _client(path: str = ""):  # -> google.cloud.storage.Client
    """This process's GCS client.

    Keyed by PID: a client must not cross a fork(). Forked workers that reused the parent's
    client and its open connection read each other's responses (DataCorruption in 6 of 6 runs
    with two workers), so each process makes its own.

    Raises:
      CredentialsError: no Google Cloud credentials are found (naming `path`, and the ways).
    """
    pid = os.getpid()
    client = _CLIENTS.get(pid)
    if client is None:
        from google.auth import exceptions as auth_errors
        from google.cloud import storage

        if os.environ.get("STORAGE_EMULATOR_HOST"):
            from google.auth.credentials import AnonymousCredentials

            client = storage.Client(project="tfpipe-local", credentials=AnonymousCredentials())
        else:
            try:
                client = storage.Client()
            except auth_errors.DefaultCredentialsError as e:
                raise _credentials_error(path, e, found=False) from None
        _CLIENTS.clear()  # a parent's client, inherited by a fork: never used here
        _CLIENTS[pid] = client
    return client


def check_credentials(path: str) -> None:
    """For a gs:// path, makes sure Google Cloud credentials are found, without a request:
    for code that hands gs:// to TensorFlow, which waits through its retries (minutes) and
    says nothing when there are none.

    Raises:
      CredentialsError: none are found, naming `path` and the ways to provide them.
    """
    if is_gcs(path):
        _client(path)


def reset_client() -> None:
    """Forgets the cached GCS client (after the emulator host changes, e.g. in tests)."""
    _CLIENTS.clear()


def _blob(path: str):
    bucket, name = split_gcs(path)
    return _client(path).bucket(bucket).blob(name)


RETRY_ATTEMPTS = 8
RETRY_BASE_DELAY_S = 0.2


def _is_transient(exc: BaseException) -> bool:
    from google.api_core import exceptions as gexc

    if isinstance(exc, (gexc.TooManyRequests, gexc.ServerError)):
        return True
    import requests

    return isinstance(exc, (requests.ConnectionError, requests.Timeout, ConnectionError))


_retried: collections.Counter[str] = collections.Counter()
_retried_lock = threading.Lock()


def retries() -> dict[str, int]:
    """The transient errors this process has retried so far, by kind: "HTTP 429", "HTTP 503",
    "ConnectionError", ... (a copy; subtract an earlier one to count a span of work)."""
    with _retried_lock:
        return dict(_retried)


def _kind(exc: BaseException) -> str:
    code = getattr(exc, "code", None)
    return f"HTTP {code}" if isinstance(code, int) else type(exc).__name__


def with_retries(fn: Callable[[], T], what: str) -> T:
    """Calls `fn`, retrying transient GCS errors with jittered exponential backoff; each retry
    is counted in `retries()`."""
    from google.auth import exceptions as auth_errors

    for attempt in range(RETRY_ATTEMPTS):
        try:
            return fn()
        except auth_errors.RefreshError as e:  # credentials found, but refused (revoked, expired)
            raise _credentials_error(what.split(" ", 1)[-1], e, found=True) from None
        except Exception as e:  # any error: classified below
            if not _is_transient(e) or attempt == RETRY_ATTEMPTS - 1:
                if _is_transient(e):
                    raise StorageError(f"{what}: gave up after {RETRY_ATTEMPTS} attempts: {e}") from e
                raise
            with _retried_lock:
                _retried[_kind(e)] += 1
            time.sleep(RETRY_BASE_DELAY_S * (2**attempt) * (0.5 + random.random()))
    raise AssertionError("unreachable")


def _gcs(fn: Callable[[], T], what: str, path: str) -> T:
    """`with_retries`, and a missing object or bucket raised as FileNotFoundError, as locally."""
    from google.api_core import exceptions as gexc

    try:
        return with_retries(fn, what)
    except gexc.NotFound:
        raise FileNotFoundError(errno.ENOENT, f"{what}: no such object or bucket", path) from None


def _no_client_retry():
    # Our own loop retries; the client's would hide attempts from it and double the waiting.
    return None


# ---- the API ----


def exists(path: str) -> bool:
    if is_gcs(path):
        return with_retries(lambda: _blob(path).exists(retry=_no_client_retry()), f"stat {path}")
    return os.path.exists(path)


def listdir(path: str) -> list[str]:
    """Names (not paths) directly under `path`, hidden ones included, sorted."""
    if is_gcs(path):
        return sorted({name for name, _, _, _ in gcs_entries(path)})
    if not os.path.isdir(path):
        return []
    return sorted(os.listdir(path))


def gcs_entries(path: str, recursive: bool = False) -> list[tuple[str, bool, int, str]]:
    """(name, is_dir, size, identity) under a gs:// `path`, sorted.

    GCS has no directories: a common prefix counts as one (its identity is ""). With
    `recursive`, every object under `path` is listed by its name relative to `path`, and no
    prefix is. Folder placeholder objects (names ending in "/") are left out. An object's
    identity is as `identity` gives it, from the listing.

    Raises:
      FileNotFoundError: the bucket does not exist.
    """
    bucket, prefix = split_gcs(path.rstrip("/") + "/")

    def entries() -> list[tuple[str, bool, int, str]]:
        it = _client(path).list_blobs(
            bucket, prefix=prefix, delimiter=None if recursive else "/", retry=_no_client_retry()
        )
        out = [
            (b.name[len(prefix) :], False, int(b.size or 0), _blob_identity(b))
            for b in it
            if not b.name.endswith("/")
        ]
        out += [(p[len(prefix) :].rstrip("/"), True, 0, "") for p in it.prefixes]
        return sorted(e for e in out if e[0])

    return _gcs(entries, f"list {path}", path)


def _blob_identity(blob) -> str:  # blob: google.cloud.storage.Blob
    crc = base64.b64decode(blob.crc32c).hex() if blob.crc32c else "none"
    return f"size={int(blob.size or 0)} generation={blob.generation} crc32c={crc}"


def resolved(path: str) -> str:
    """A local path made absolute, symbolic links followed, so two spellings of one path
    compare equal; a gs:// path as it is."""
    return path if is_gcs(path) else os.path.realpath(path)


def identity(path: str, checksum: bool = False) -> str:
    """What identifies a version of an input, so `--resume` refuses one that changed.

    Locally: its size and modification time (`size=... mtime_ns=...`), plus with `checksum`
    the crc32c of its bytes (read whole for it). On gs://: its size, generation (a new one on
    every write) and the crc32c GCS keeps, all from the object's metadata.

    Raises:
      FileNotFoundError: no such file or object.
    """
    if is_gcs(path):

        def stat() -> str:
            blob = _blob(path)
            blob.reload(retry=_no_client_retry())
            return _blob_identity(blob)

        return _gcs(stat, f"stat {path}", path)
    st = os.stat(path)
    out = f"size={st.st_size} mtime_ns={st.st_mtime_ns}"
    if checksum:
        import google_crc32c

        crc = google_crc32c.Checksum()
        with _open_regular(path) as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                crc.update(chunk)
        out += f" crc32c={crc.digest().hex()}"
    return out


def has_wildcards(path: str) -> bool:
    return any(c in str(path) for c in "*?[")


def glob(pattern: str) -> list[str]:
    """Files matching a glob whose wildcards (`*`, `?`, `[...]`) may be in any path component
    (`data/d*/train-*`), sorted. `*` does not cross a `/`; hidden names match only a pattern
    that starts with a dot, as in a shell."""
    pattern = str(pattern).rstrip("/")
    if not is_gcs(pattern):
        import glob as globlib

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
        f"{base}/{rel}" for rel, _, _, _ in gcs_entries(base, recursive=True) if matches(prefix + rel)
    )


def size(path: str) -> int:
    if is_gcs(path):

        def stat() -> int:
            blob = _blob(path)
            blob.reload(retry=_no_client_retry())
            return int(blob.size)

        return _gcs(stat, f"stat {path}", path)
    return os.path.getsize(path)


def read_bytes(path: str) -> bytes:
    if is_gcs(path):
        return _gcs(lambda: _blob(path).download_as_bytes(retry=_no_client_retry()), f"read {path}", path)
    with _open_regular(path) as f:
        return f.read()


def _open_regular(path: str) -> BinaryIO:
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
    if is_gcs(path):
        spool = tempfile.SpooledTemporaryFile(max_size=64 << 20)  # noqa: SIM115 - returned open

        def download() -> None:
            spool.seek(0)
            spool.truncate()
            _blob(path).download_to_file(spool, retry=_no_client_retry())

        try:
            _gcs(download, f"read {path}", path)
        except BaseException:
            spool.close()
            raise
        spool.seek(0)
        return spool  # type: ignore[return-value]
    return _open_regular(path)


def makedirs(path: str) -> None:
    if not is_gcs(path):
        os.makedirs(path, exist_ok=True)


def remove(path: str, missing_ok: bool = True) -> None:
    if is_gcs(path):
        try:
            _gcs(lambda: _blob(path).delete(retry=_no_client_retry()), f"delete {path}", path)
        except FileNotFoundError:
            if not missing_ok:
                raise
        return
    try:
        os.remove(path)
    except FileNotFoundError:
        if not missing_ok:
            raise


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
    import google_crc32c
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
        blob = _blob(dest)
        options = {"if_generation_match": precondition, "retry": _no_client_retry(), "checksum": "crc32c"}
        try:
            if local_path is not None:
                blob.upload_from_filename(local_path, **options)
            else:
                blob.upload_from_string(data or b"", content_type="application/octet-stream", **options)
            return int(blob.generation or 0)
        except gexc.PreconditionFailed:
            # An earlier attempt may have landed and only its reply been lost: same bytes is success.
            existing = _blob(dest)
            existing.reload(retry=_no_client_retry())
            if existing.crc32c != want_crc:
                raise AlreadyExists(f"{dest} already exists") from None
            return int(existing.generation or 0)

    return with_retries(upload, f"upload {dest}")


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
        blob = _blob(path)
        blob.reload(retry=_no_client_retry())
        generation = int(blob.generation)
        try:
            return blob.download_as_bytes(
                if_generation_match=generation, retry=_no_client_retry()
            ), generation
        except gexc.PreconditionFailed:
            raise FileNotFoundError(errno.ENOENT, "replaced while being read", path) from None

    return _gcs(read, f"read {path}", path)


def remove_generation(path: str, generation: int) -> bool:
    """Deletes a gs:// object only if it is still at `generation`. True if it was deleted."""
    from google.api_core import exceptions as gexc

    try:
        _gcs(
            lambda: _blob(path).delete(if_generation_match=generation, retry=_no_client_retry()),
            f"delete {path}",
            path,
        )
    except (FileNotFoundError, gexc.PreconditionFailed):
        return False
    return True


def check_bucket(path: str) -> None:
    """Raises FileNotFoundError naming the bucket if a gs:// path's bucket does not exist."""
    bucket, _ = split_gcs(path)
    if not with_retries(
        lambda: _client(path).bucket(bucket).exists(retry=_no_client_retry()), f"stat gs://{bucket}"
    ):
        raise FileNotFoundError(errno.ENOENT, f"bucket {bucket!r} does not exist", path)


SPOOL_PREFIX = "tfpipe-spool-"


def spool_prefix(dest_dir: str) -> str:
    """The name prefix of the local spool folders of runs writing to gs:// `dest_dir`."""
    import hashlib

    return f"{SPOOL_PREFIX}{hashlib.sha256(dest_dir.rstrip('/').encode()).hexdigest()[:12]}-"


def local_spool_dir(dest_dir: str) -> str:
    """Where shards are written before commit: beside them locally, a temp dir for gs://.

    The temp dir's name carries a hash of `dest_dir`, so the next run on that destination
    finds and removes what a killed run left (`remove_dead_spools`).
    """
    if is_gcs(dest_dir):
        return tempfile.mkdtemp(prefix=spool_prefix(dest_dir))
    os.makedirs(dest_dir, exist_ok=True)
    return dest_dir


def remove_dead_spools(dest_dir: str) -> list[str]:
    """Removes the spool folders earlier runs on gs:// `dest_dir` left in the temp dir.

    Only call it while holding the destination's lock: then no live run owns any of them.
    """
    import shutil

    if not is_gcs(dest_dir):
        return []
    root, prefix = tempfile.gettempdir(), spool_prefix(dest_dir)
    removed = [os.path.join(root, n) for n in os.listdir(root) if n.startswith(prefix)]
    for path in removed:
        shutil.rmtree(path, ignore_errors=True)
    return removed


def iter_lines(path: str) -> Iterator[str]:
    with open_read(path) as f:
        for line in f:
            yield line.decode("utf-8")


def same_version(a: str, b: str) -> bool:
    """Whether two `identity` strings name the same version: the same size and modification
    time (or generation). A content checksum is compared only where both have one."""
    fa, fb = dict(f.split("=", 1) for f in a.split()), dict(f.split("=", 1) for f in b.split())
    return all(fa[k] == fb[k] for k in fa.keys() & fb.keys())

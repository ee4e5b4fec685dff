"""gs:// through the google-cloud-storage client: the client, its retries, the objects, and the
model of how TensorFlow reads gs:// (its read block).

GCS goes through the google-cloud-storage client (it has preconditions; TF's GFile has not).
Transient GCS errors (HTTP 429 and 5xx, connection resets) are retried with exponential backoff,
and counted (`retries()`). `STORAGE_EMULATOR_HOST` points the client at an emulator
(tfpipe.testing.gcs).

The google-cloud-storage imports are inside functions: they cost ~0.25 s (google.cloud.storage,
measured under load), and local-only runs (and `import tfpipe`) never need them.
"""

from __future__ import annotations

import base64
import collections
import errno
import os
import random
import threading
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, TypeVar

from tfpipe.errors import CredentialsError, StorageError
from tfpipe.storage.paths import is_gcs, split_gcs

if TYPE_CHECKING:
    from google.cloud.storage import Blob, Client  # ~0.25 s: imported where a client is made

T = TypeVar("T")

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


# ---- the client ----


_CLIENTS: dict[int, Client] = {}  # by PID


def client(path: str = "") -> Client:
    """This process's GCS client.

    Keyed by PID: a client must not cross a fork(). Forked workers that reused the parent's
    client and its open connection read each other's responses (DataCorruption in 6 of 6 runs
    with two workers), so each process makes its own.

    Raises:
      CredentialsError: no Google Cloud credentials are found (naming `path`, and the ways).
    """
    pid = os.getpid()
    out = _CLIENTS.get(pid)
    if out is None:
        from google.auth import exceptions as auth_errors
        from google.cloud import storage

        if os.environ.get("STORAGE_EMULATOR_HOST"):
            from google.auth.credentials import AnonymousCredentials

            out = storage.Client(project="tfpipe-local", credentials=AnonymousCredentials())
        else:
            try:
                out = storage.Client()
            except auth_errors.DefaultCredentialsError as e:
                raise _credentials_error(path, e, found=False) from None
        _CLIENTS.clear()  # a parent's client, inherited by a fork: never used here
        _CLIENTS[pid] = out
    return out


def check_credentials(path: str) -> None:
    """For a gs:// path, makes sure Google Cloud credentials are found, without a request:
    for code that hands gs:// to TensorFlow, which waits through its retries (minutes) and
    says nothing when there are none.

    Raises:
      CredentialsError: none are found, naming `path` and the ways to provide them.
    """
    if is_gcs(path):
        client(path)


def reset_client() -> None:
    """Forgets the cached GCS client (after the emulator host changes, e.g. in tests)."""
    _CLIENTS.clear()


def blob(path: str) -> Blob:
    bucket, name = split_gcs(path)
    return client(path).bucket(bucket).blob(name)


# ---- retries ----

RETRY_ATTEMPTS = 8
RETRY_BASE_DELAY_S = 0.2


def _is_transient(exc: BaseException) -> bool:
    import requests
    from google.api_core import exceptions as gexc

    if isinstance(exc, (gexc.TooManyRequests, gexc.ServerError)):
        return True
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


def call(fn: Callable[[], T], what: str, path: str) -> T:
    """`with_retries`, and a missing object or bucket raised as FileNotFoundError, as locally."""
    from google.api_core import exceptions as gexc

    try:
        return with_retries(fn, what)
    except gexc.NotFound:
        raise FileNotFoundError(errno.ENOENT, f"{what}: no such object or bucket", path) from None


# The client's `retry=`: none. Our own loop retries; the client's would hide attempts from it
# and double the waiting.
NO_CLIENT_RETRY = None


# ---- objects ----


def exists(path: str) -> bool:
    return with_retries(lambda: blob(path).exists(retry=NO_CLIENT_RETRY), f"stat {path}")


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
        it = client(path).list_blobs(
            bucket, prefix=prefix, delimiter=None if recursive else "/", retry=NO_CLIENT_RETRY
        )
        out = [
            (b.name[len(prefix) :], False, int(b.size or 0), _blob_identity(b))
            for b in it
            if not b.name.endswith("/")
        ]
        out += [(p[len(prefix) :].rstrip("/"), True, 0, "") for p in it.prefixes]
        return sorted(e for e in out if e[0])

    return call(entries, f"list {path}", path)


def _blob_identity(b: Blob) -> str:
    crc = base64.b64decode(b.crc32c).hex() if b.crc32c else "none"
    return f"size={int(b.size or 0)} generation={b.generation} crc32c={crc}"


def identity(path: str) -> str:
    """An object's size, generation and crc32c, from its metadata (see `files.identity`).

    Raises:
      FileNotFoundError: no such object.
    """

    def stat() -> str:
        b = blob(path)
        b.reload(retry=NO_CLIENT_RETRY)
        return _blob_identity(b)

    return call(stat, f"stat {path}", path)


def size(path: str) -> int:
    def stat() -> int:
        b = blob(path)
        b.reload(retry=NO_CLIENT_RETRY)
        return int(b.size)

    return call(stat, f"stat {path}", path)


def read_bytes(path: str) -> bytes:
    return call(lambda: blob(path).download_as_bytes(retry=NO_CLIENT_RETRY), f"read {path}", path)


def download(path: str, out: IO[bytes]) -> None:
    """Downloads an object into `out` from its start, retried (a retry starts `out` over)."""

    def attempt() -> None:
        out.seek(0)
        out.truncate()
        blob(path).download_to_file(out, retry=NO_CLIENT_RETRY)

    call(attempt, f"read {path}", path)


def delete(path: str) -> None:
    """Raises FileNotFoundError if there is no such object."""
    call(lambda: blob(path).delete(retry=NO_CLIENT_RETRY), f"delete {path}", path)


def check_bucket(path: str) -> None:
    """Raises FileNotFoundError naming the bucket if a gs:// path's bucket does not exist."""
    bucket, _ = split_gcs(path)
    if not with_retries(
        lambda: client(path).bucket(bucket).exists(retry=NO_CLIENT_RETRY), f"stat gs://{bucket}"
    ):
        raise FileNotFoundError(errno.ENOENT, f"bucket {bucket!r} does not exist", path)

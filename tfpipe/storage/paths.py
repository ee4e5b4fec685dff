"""Path rules, local and gs://, with no I/O: the gs:// prefix, the bucket/object split and the
bucket names GCS accepts (checked before any request), joining, base names, wildcards, and the
hidden prefix of files in progress. `tfpipe.storage` re-exports them (`storage.is_gcs`, ...).

A `gs:` path without a bucket (`gs://`, `gs:/b`) would otherwise be taken as a local folder named
`gs:`, and a bucket name GCS refuses (`gs://Probe`) would fail later, with advice that fails too.
"""

from __future__ import annotations

import os
import re

from tfpipe.errors import InvalidPath

GCS_PREFIX = "gs://"
# Names that start with it are hidden: no `train-*` glob of a reader matches a file in progress.
HIDDEN_PREFIX = "."


def is_gcs(path: str) -> bool:
    """Whether `path` is a gs:// path."""
    return str(path).startswith(GCS_PREFIX)


def split_gcs(path: str) -> tuple[str, str]:
    """(bucket, object name) of a gs:// path: `gs://b/x/y` is ("b", "x/y"), `gs://b` ("b", "").

    Raises:
      InvalidPath: the path names no bucket, or one GCS would refuse (`check_url`).
    """
    check_url(path)
    return _parts(str(path))


def _parts(text: str) -> tuple[str, str]:
    bucket, _, name = text[len(GCS_PREFIX) :].partition("/")
    return bucket, name


_BUCKET_PART = re.compile(r"[a-z0-9](?:[a-z0-9_-]{0,61}[a-z0-9])?")
_IPV4 = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")


def bucket_problem(bucket: str) -> str | None:
    """Why GCS would refuse `bucket` as a bucket name, or None (cloud.google.com/storage/docs/
    buckets#naming: 3-63 characters of lowercase letters, digits, -, _ and dots, starting and
    ending with a letter or digit; up to 222 with dots, 63 between them; not an IP address;
    not starting with "goog" or holding "google")."""
    if not 3 <= len(bucket) <= (222 if "." in bucket else 63):
        return "it must be 3 to 63 characters long (222 with dots)"
    if bucket != bucket.lower():
        return "it must be lowercase (GCS bucket names have no capitals)"
    if not all(_BUCKET_PART.fullmatch(part) for part in bucket.split(".")):
        return (
            "it may hold only lowercase letters, digits, -, _ and dots, start and end with a "
            "letter or digit, and have at most 63 characters between dots"
        )
    if _IPV4.fullmatch(bucket):
        return "it must not be an IP address"
    if bucket.startswith("goog") or "google" in bucket or "g00gle" in bucket:
        return 'it must not start with "goog" or hold "google"'
    return None


def check_url(path: str) -> None:
    """Refuses a `gs:` path that names no bucket, or a bucket name GCS would refuse.

    `gs://`, `gs:/b` or `gs:b` would otherwise be taken as a local folder named `gs:`.

    Raises:
      InvalidPath: naming the path and the rule it breaks.
    """
    text = str(path)
    if text[:3].lower() != "gs:":
        return
    bucket = _parts(text)[0] if is_gcs(text) else ""
    if not bucket:
        raise InvalidPath(f"Expected gs://BUCKET/PATH. Received: {text!r}, which names no bucket")
    problem = bucket_problem(bucket)
    if problem:
        raise InvalidPath(f"{text}: {bucket!r} is not a valid GCS bucket name: {problem}.")


def join(base: str, *parts: str) -> str:
    """`parts` joined under `base` with "/" on gs://, with the OS's separator locally."""
    base = str(base)
    if is_gcs(base):
        return "/".join([base.rstrip("/"), *(p.strip("/") for p in parts)])
    return os.path.join(base, *parts)


def basename(path: str) -> str:
    return str(path).rstrip("/").rsplit("/", 1)[-1]


def has_wildcards(path: str) -> bool:
    return any(c in str(path) for c in "*?[")


def resolved(path: str) -> str:
    """A local path made absolute, symbolic links followed, so two spellings of one path
    compare equal; a gs:// path as it is."""
    return path if is_gcs(path) else os.path.realpath(path)

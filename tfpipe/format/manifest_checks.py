"""Checks of a manifest's values that every entry of it uses: counts, checksums, file names."""

from __future__ import annotations

import posixpath
import re

from tfpipe.errors import ManifestError

CHECKSUM_RE = re.compile(r"crc32c:[0-9a-f]{8}|sha256:[0-9a-f]{64}")
MAX_COUNT = 2**63 - 1  # int64, what TF and the codec count in


def is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT


def check_checksum(what: str, checksum: str) -> None:
    """Refuses a checksum not spelled `<algorithm>:<hex>`, naming `what` holds it."""
    if not CHECKSUM_RE.fullmatch(checksum):
        raise ManifestError(
            f"{what}: expected a checksum 'crc32c:<8 hex>' or 'sha256:<64 hex>'. Received: {checksum[:80]!r}"
        )


def check_relative_name(name: str) -> str:
    """Refuses shard names that could point outside the dataset directory."""
    if (
        not name
        or name.startswith(("/", "\\"))
        or "://" in name
        or (len(name) > 1 and name[1] == ":")
        or ".." in posixpath.normpath(name.replace("\\", "/")).split("/")
        or ".." in name.replace("\\", "/").split("/")
    ):
        raise ManifestError(
            f"Shard names must be relative names inside the dataset directory. Received: {name!r}"
        )
    return name

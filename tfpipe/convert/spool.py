"""The local spool: where a shard is written before its commit (beside the shards locally, a
temporary folder for gs://), and the removal of what a killed run left there."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile

from tfpipe import storage

SPOOL_PREFIX = "tfpipe-spool-"


def spool_prefix(dest_dir: str) -> str:
    """The name prefix of the local spool folders of runs writing to gs:// `dest_dir`."""
    return f"{SPOOL_PREFIX}{hashlib.sha256(dest_dir.rstrip('/').encode()).hexdigest()[:12]}-"


def local_spool_dir(dest_dir: str) -> str:
    """Where shards are written before commit: beside them locally, a temp dir for gs://.

    The temp dir's name carries a hash of `dest_dir`, so the next run on that destination
    finds and removes what a killed run left (`remove_dead_spools`).
    """
    if storage.is_gcs(dest_dir):
        return tempfile.mkdtemp(prefix=spool_prefix(dest_dir))
    os.makedirs(dest_dir, exist_ok=True)
    return dest_dir


def remove_dead_spools(dest_dir: str) -> list[str]:
    """Removes the spool folders earlier runs on gs:// `dest_dir` left in the temp dir.

    Only call it while holding the destination's lock: then no live run owns any of them.
    """
    if not storage.is_gcs(dest_dir):
        return []
    root, prefix = tempfile.gettempdir(), spool_prefix(dest_dir)
    removed = [os.path.join(root, n) for n in os.listdir(root) if n.startswith(prefix)]
    for path in removed:
        shutil.rmtree(path, ignore_errors=True)
    return removed

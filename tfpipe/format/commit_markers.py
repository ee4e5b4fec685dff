"""Commit markers: what lets a reader check a gs:// split's generation with one small listing.

A read never yields records of a shard that `tfpipe.json` no longer lists as `build()` read it
(pipeline/read/generation.py checks it once per shard read). Checking it by reading `tfpipe.json`
costs little locally (~0.03 ms) but on gs:// ~40 ms of CPU per check: TensorFlow's gs:// reader
allocates and zeroes a whole GCS_READ_CACHE_BLOCK_SIZE_MB block (64 MiB) for every file it
opens, however small. A listing costs no block: `tf.io.matching_files` of one name is one list
request, ~2 ms of CPU (benchmarks/gcs_check_cost.py).

So a conversion to gs:// keeps one marker object per committed split, whose name carries the
split's identity, a digest of its shards' names and checksums: `.tfpipe-commits/<split>.<digest>`.
- It is written once the shards are, before the manifest's commit (a run killed in between
  leaves a marker no committed manifest names, so no reader looks for it).
- Every marker of the split is removed before `--overwrite` un-commits the split and deletes
  its shards, so no shard of a split is rewritten while a marker of that split exists.
So while the marker named by the manifest a reader loaded exists, the split's shards are still
the ones that manifest listed: a reader that finds it needs nothing more; one that does not
reads `tfpipe.json` as before (the marker was removed, or never written: local datasets, a
gs:// dataset copied there by another tool or converted before markers, Beam's WriteDataset).

The markers sit in a folder of their own because TensorFlow lists every object under a
pattern's folder and matches the names itself: beside 1,024 shards one listing cost 27 ms.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from tfpipe import storage
from tfpipe.format.manifest import ShardInfo

COMMITS_DIR = ".tfpipe-commits"
_GLOB_CHARS = "*?[\\"


def marker(root: str, split: str, shards: Sequence[ShardInfo]) -> str:
    """The marker object of `split` as committed with `shards` (see the module doc)."""
    listed = "".join(f"{s.name}\0{s.checksum}\n" for s in shards)
    return storage.join(root, COMMITS_DIR, f"{split}.{hashlib.sha256(listed.encode()).hexdigest()[:32]}")


def mark(root: str, split: str, shards: Sequence[ShardInfo]) -> str | None:
    """Writes the marker of a split about to be committed on gs://; returns its path (None
    locally, where a reader's check reads tfpipe.json for next to nothing)."""
    if not storage.is_gcs(root):
        return None
    path = marker(root, split, shards)
    storage.write_atomic(
        path, f"tfpipe: split {split!r} committed with these shards\n".encode(), overwrite=True
    )
    return path


def unmark(root: str, split: str) -> list[str]:
    """Removes every marker of `split` under gs:// `root` (none locally); returns their paths.
    Call it before the split is un-committed or any of its shards is rewritten."""
    if not storage.is_gcs(root):
        return []
    folder = storage.join(root, COMMITS_DIR)
    gone = [storage.join(folder, name) for name in storage.listdir(folder) if name.startswith(f"{split}.")]
    for path in gone:
        storage.remove(path)
    return gone


def committed(root: str, split: str, shards: Sequence[ShardInfo]) -> str | None:
    """The marker of `split` as `shards` list it, if it exists now and TensorFlow can look it
    up by name (a path without glob characters); None otherwise, so readers read tfpipe.json."""
    if not storage.is_gcs(root):
        return None
    path = marker(root, split, shards)
    if any(c in path[len(storage.GCS_PREFIX) :] for c in _GLOB_CHARS) or not storage.exists(path):
        return None
    return path

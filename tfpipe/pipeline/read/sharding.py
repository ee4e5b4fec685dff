"""How input pipelines share a dataset's files: by file when there are at least as many files
as pipelines, else by record (every pipeline reads every file and keeps every n-th record).

Pure functions of counts and sizes, so they are tested with integers alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Literal

# A size or record count that is not known (files without a manifest).
UNKNOWN = -1
# Bytes of TFRecord framing per record (length, its CRC, the data's CRC): no record is smaller.
RECORD_FRAMING = 16

ShardBy = Literal["none", "file", "record"]


def shard_files(files: int, pipelines: int, index: int) -> tuple[ShardBy, list[int]]:
    """How input pipeline `index` of `pipelines` shares `files` files: ("none" | "file" |
    "record", the indices of the files it reads)."""
    if pipelines == 1:
        return "none", list(range(files))
    if files >= pipelines:
        return "file", list(range(files))[index::pipelines]
    return "record", list(range(files))


def share(records: int, shard_by: str, pipelines: int, index: int) -> int:
    """Records pipeline `index` reads of `records` in its files (every n-th, by record)."""
    return len(range(index, records, pipelines)) if shard_by == "record" else records


@dataclasses.dataclass(frozen=True, slots=True)
class FileShare:
    """What one input pipeline reads of the files (see `share_files`).

    Attributes:
      shard_by: "none" (one pipeline), "file" or "record" (fewer files than pipelines).
      files: indices of the files it reads (all of them with record sharding).
      examples: records it yields per epoch; None when a count is unknown.
      at_most: an upper bound on those records from the sizes (every record takes at least
        RECORD_FRAMING bytes); None when a size is unknown or the files are compressed.
      read_records: records its interleave yields (before a record shard); None if unknown.
      cache_bytes: serialized bytes it would cache (with record sharding, its 1/n share of
        all files'); None when a size is unknown.
    """

    shard_by: ShardBy
    files: tuple[int, ...]
    examples: int | None
    at_most: int | None
    read_records: int | None
    cache_bytes: int | None


def share_files(
    sizes: Sequence[int], counts: Sequence[int], pipelines: int, index: int, *, compressed: bool
) -> FileShare:
    """How input pipeline `index` of `pipelines` shares files of these sizes and record counts
    (UNKNOWN: not known): by file when there are at least as many files as pipelines, else by
    record. A pure function of its arguments."""
    shard_by, idx = shard_files(len(sizes), pipelines, index)
    mine_sizes = [sizes[j] for j in idx]
    mine_counts = [counts[j] for j in idx]
    sizes_known = UNKNOWN not in mine_sizes
    read_records = sum(mine_counts) if UNKNOWN not in mine_counts else None
    examples = None if read_records is None else share(read_records, shard_by, pipelines, index)
    at_most = (
        share(sum(mine_sizes) // RECORD_FRAMING, shard_by, pipelines, index)
        if sizes_known and not compressed
        else None
    )
    cache_bytes = sum(mine_sizes) // (pipelines if shard_by == "record" else 1) if sizes_known else None
    return FileShare(shard_by, tuple(idx), examples, at_most, read_records, cache_bytes)

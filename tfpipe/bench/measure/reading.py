"""The storage stage: how fast records come off storage, in examples/s, MB/s and requests/s.

The read prefix of a caching pipeline reads its records from the cache after the first epoch,
which says nothing about the storage. So the storage figures come from the read prefix of the
same pipeline planned with `cache="none"`: what the first epoch reads at, and what every epoch
reads at when the data does not fit the cache.

Requests are not counted (TensorFlow's GCS filesystem keeps no counter); they follow from how
it reads a file: one ranged GET per block of GCS_READ_CACHE_BLOCK_SIZE_MB (64 MiB by default)
from the start of the file to its end, so a shard of B bytes costs ceil(B / block) requests.
Reading a tfpipe dataset adds a generation check per shard read, once the shard is open (two
for a shard longer than a block), so records of two conversions of a split are never mixed
(pipeline/read/generation.py): a listing of the split's commit marker, or a read of its manifest where
it has none (tfpipe/format/commit_markers.py).
tests/bench/measure/test_bench_storage.py checks that figure against the requests the local GCS twin served.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tfpipe.bench.results import Location, Rate, Storage
from tfpipe.pipeline.read.generation import generation_checks
from tfpipe.storage import gcs_block_bytes

MB = 1e6


def requests_per_file(sizes: Sequence[int], block: int, *, manifest: bool = True) -> float:
    """Mean requests to read one of these files whole: TensorFlow's block reads, and with a
    `manifest`, tfpipe's generation checks (see `generation_checks`)."""
    if not sizes:
        return 0.0
    blocks = sum(max(1, math.ceil(s / block)) for s in sizes)
    checks = sum(generation_checks(s, gcs=True) for s in sizes) if manifest else 0
    return (blocks + checks) / len(sizes)


def figures(
    *,
    location: Location,
    cache: str,
    read: Rate,
    sizes: Sequence[int],
    examples: int | None,
    consumer_eps: float,
    first_epoch: Rate | None = None,
    block: int | None = None,
) -> Storage:
    """The Storage figures from the uncached read prefix's rate and the files it reads.

    Args:
      location: where the files are.
      cache: the pipeline's resolved cache.
      read: the read prefix's rate with cache="none".
      sizes: bytes of each file the pipeline reads.
      examples: records in those files; None when unknown (files without a manifest).
      consumer_eps: examples/s the consumer takes (per host).
      first_epoch: the whole pipeline's rate with cache="none", when the pipeline caches.
      block: GCS read block in bytes; None reads the variable (see gcs_block_bytes).
    """
    per_example = sum(sizes) / examples if examples and sizes else None
    requests = None
    if location == "gcs" and per_example is not None and examples:
        files_per_sec = read.examples_per_sec * len(sizes) / examples
        requests = files_per_sec * requests_per_file(sizes, block or gcs_block_bytes())
    return Storage(
        location=location,
        cache=cache,
        examples_per_sec=read.examples_per_sec,
        mb_per_sec=None if per_example is None else read.examples_per_sec * per_example / MB,
        requests_per_sec=requests,
        bytes_per_example=per_example,
        needed_mb_per_sec=None if per_example is None else consumer_eps * per_example / MB,
        cpu_ms_per_example=read.cpu_ms_per_example,
        first_epoch_examples_per_sec=None if first_epoch is None else first_epoch.examples_per_sec,
    )

"""A weighted mixture as a tf.data stream: each source's resumable order (order/stream.py),
started at its count of earlier positions and batched by its quota of a block, the blocks put
together by one gather each in the order of the mixture's choices (mixture/spec.py; `mixed`).
A choice per element (`choose_from_datasets`) gave the same stream at 1.2x the CPU a token.

- records (images, tables): the mixed stream starts at position `step x positions a step`;
- text: the mixed stream is of documents, cut into chunks and packed, so documents of every
  source share rows. A start at step K finds the chunk holding its first row by counting the
  rows of every chunk before it from the sources' lengths files (each source's order applied to
  its lengths, mixed by the same choices), as one source's text pipeline does (its
  `resumable_chunks`), then starts every source at its count before that chunk. The rows are
  counted by the pipeline's batching (`rows`: text's `TextRows`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

from tfpipe._tf import plain, tf
from tfpipe.pipeline.mixture.spec import BLOCK, MixSpec
from tfpipe.pipeline.order import stream as order_stream

_FOREVER = (1 << 63) - 1


@dataclasses.dataclass(frozen=True)
class SourceRead:
    """How to stream one source of the mixture: its order, reader and cache.

    Attributes:
      spec: the source's resumable order (this input pipeline's).
      read: `(path, size, count) -> Dataset` of `(records, sources)` groups.
      cached: cache="memory": the source's records loaded once, ordered from memory.
      parallelism: files read in parallel.
      lengths: the source's lengths file (text), or None.
    """

    spec: Any
    read: Callable[..., Any]
    cached: bool
    parallelism: int
    lengths: Any = None

    @property
    def stride(self) -> int:
        """Global stream positions per record of this pipeline (record sharding keeps 1 in n)."""
        return self.spec.pipelines if self.spec.by_record else 1


def mixed(tf_: Any, mix: MixSpec, g: Any, streams: Callable[[Any, bool], list[Any]]) -> Any:
    """The mixed stream from global position `g`, in blocks (batched elements of up to BLOCK).

    `streams(starts, batched)` gives each source's stream from its start position, batched by
    its quota: block `b` takes exactly `quota_s` positions of source `s`, so every source starts
    at `b * quota_s` for the block holding `g`, and each block is one gather of the sources'
    quotas concatenated: position `i` takes its source's next item in that source's order
    (the stable sort of the block's choices by source), no choice per element. The first
    block's positions before `g` are dropped.
    """
    b0 = g // BLOCK
    skip0 = g - b0 * BLOCK
    parts = streams(b0 * tf_.constant(mix.quotas, tf_.int64), True)
    base = tf_.constant(mix.base, tf_.int64)
    key = tf_.constant(mix.key, tf_.int64)

    def block(quotas: Any, b: Any) -> Any:
        chosen = tf_.gather(base, order_stream.permutation(tf_, BLOCK, tf_.stack([key, b])))
        # Concatenated, the sources' items sit in (source, order) order: the stable sort of the
        # choices lists the positions in that order, so its inverse is each position's item.
        index = tf_.math.invert_permutation(tf_.argsort(chosen, stable=True))
        skip = tf_.where(tf_.equal(b, b0), skip0, 0)
        fields = zip(*quotas, strict=True)
        return tuple(tf_.gather(tf_.concat(list(f), 0), index)[skip:] for f in fields)

    numbered = tf_.data.Dataset.zip((tuple(parts), tf_.data.Dataset.range(b0, _FOREVER)))
    return numbered.map(plain(block))


def _scaled(counts: Any, k: int, stride: int) -> Any:
    """Source k's start: its count of items before the block, in its order's units."""
    return counts[k] * stride


def record_streams(
    mix: MixSpec, sources: list[SourceRead], *, keys: bool, needs_source: bool
) -> Callable[[Any, bool], list[Any]]:
    """`starts -> each source's record stream from its start, in batches of its quota`
    (records, sources[, key])."""

    def streams(c: Any, _: bool) -> list[Any]:
        return [
            order_stream.stream(
                s.spec,
                s.read,
                functools.partial(_scaled, c, k, s.stride),
                cached=s.cached,
                sources=needs_source,
                keys=keys,
                batch=mix.quotas[k],
                parallelism=s.parallelism,
            )
            for k, s in enumerate(sources)
        ]

    return streams


def records(
    mix: MixSpec,
    sources: list[SourceRead],
    start: Callable[[], Any],
    *,
    positions_per_step: int,
    keys: bool,
    needs_source: bool,
    batch: int | None,
) -> Any:
    """The mixed records of this input pipeline from the step `start()` gives (read when the
    iterator starts): single records, or batches of `batch` (batched presets)."""
    tf_ = tf()
    streams = record_streams(mix, sources, keys=keys, needs_source=needs_source)

    def from_step(_: Any) -> Any:
        return mixed(tf_, mix, tf_.cast(start(), tf_.int64) * positions_per_step, streams)

    ds = tf_.data.Dataset.from_tensors(0).flat_map(plain(from_step))
    return ds.unbatch() if batch is None else ds.rebatch(batch, drop_remainder=True)


def text_chunks(
    mix: MixSpec,
    sources: list[SourceRead],
    rows: Any,
    start: Callable[[], Any],
    *,
    size: int,
    rows_per_step: int,
    needs_source: bool,
) -> Any:
    """The mixed documents in chunks `(records, sources, skip)` from the step `start()` gives:
    the chunk holding the step's first row, its rows before the step as skip."""
    tf_ = tf()
    streams = record_streams(mix, sources, keys=False, needs_source=needs_source)

    def find(target: Any) -> Any:
        return chunk_of(mix, sources, rows, size, target)

    def from_step(_: Any) -> Any:
        first, skips = rows.first_chunk(tf_, start, rows_per_step, find)
        docs = mixed(tf_, mix, first * size, streams).rebatch(size, drop_remainder=True)
        return tf_.data.Dataset.zip((docs, skips)).map(plain(lambda rs, skip: (rs[0], rs[1], skip)))

    return tf_.data.Dataset.from_tensors(0).flat_map(plain(from_step))


def chunk_of(mix: MixSpec, sources: Any, rows: Any, size: int, target: Any) -> tuple[Any, Any]:
    """(chunk, rows before it) of the chunk holding row `target` of this input pipeline's mixed
    stream: the sources' lengths in their orders, mixed by the same choices, in chunks, each
    chunk's rows counted as the batching `rows` places them."""
    tf_ = tf()
    lengths = mixed(
        tf_,
        mix,
        tf_.constant(0, tf_.int64),
        lambda _, __: [
            rows.ordered_lengths(s.spec, s.lengths, n) for s, n in zip(sources, mix.quotas, strict=True)
        ],
    )
    counts = (
        lengths.map(plain(lambda n, _: n))
        .rebatch(size, drop_remainder=True)
        .map(plain(lambda chunk: rows.chunk_rows(chunk)))
    )
    spans = counts.scan(
        tf_.constant(0, tf_.int64), plain(lambda before, n: (before + n, tf_.stack([before, before + n])))
    )
    found = spans.enumerate().filter(plain(lambda i, span: span[1] > target)).take(1)
    return found.map(plain(lambda i, span: (i, span[0]))).get_single_element()

"""A weighted mixture as a tf.data stream (the choice function is mixture/spec.py's).

Each source streams its items in its own resumable order (order/stream.py) and tags each with
the group of the mixed stream it falls in (a block of BLOCK positions for records; a modality's
own groups for its mixing: text's chunks of documents or of virtual time, in
tfpipe/modalities/text/mixture/stream.py). One scan a source regroups its items by tag
(mixture/regroup.py: the items of a group not yet complete carried to the next step), so each
source yields exactly one group (maybe empty) per group of the mixed stream, and the sources'
streams zip. Records: each block's items put in their global order (their positions are a
permutation of the block) and unbatched (`records`). A start at step K starts at the block
holding the step's first position, each source at its count before it (closed form,
`spec.tf_counts`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

from tfpipe._tf import plain, tf
from tfpipe.pipeline.mixture import regroup
from tfpipe.pipeline.mixture import spec as mixture_spec
from tfpipe.pipeline.mixture.spec import BLOCK, MixSpec
from tfpipe.pipeline.order import stream as order_stream
from tfpipe.pipeline.read import raw

_FOREVER = (1 << 63) - 1


@dataclasses.dataclass(frozen=True)
class SourceRead:
    """How to stream one source of the mixture: its order, reader and cache.

    Attributes:
      spec: the source's resumable order (this input pipeline's).
      read: `(path, size, count) -> Dataset` of `(records, sources)` groups.
      cached: cache="memory": the source's records loaded once, ordered from memory.
      parallelism: files read in parallel.
      lengths: what its modality's mixing needs besides (text: its lengths file), or None.
      block: records a step of its scan takes (about its share of a group).
    """

    spec: Any
    read: Callable[..., Any]
    cached: bool
    parallelism: int
    lengths: Any = None
    block: int = 256

    @property
    def stride(self) -> int:
        """Global stream positions per record of this pipeline (record sharding keeps 1 in n)."""
        return self.spec.pipelines if self.spec.by_record else 1


def loaded(s: SourceRead) -> Any:
    """The source's records loaded once (cache="memory"), made outside any dataset function so
    every iterator shares them (`order_stream.cached_records`); None when streamed."""
    if not s.cached:
        return None
    records = order_stream.cached_records(s.spec, s.read)
    return lambda: records.get_single_element()[0]


def items(s: SourceRead, load: Any, start: Any, *, keys: bool, needs_source: bool) -> Any:
    """The source's records from its item `start` on, in batches of `s.block`."""
    return order_stream.stream(
        s.spec,
        s.read,
        lambda: start * s.stride,
        cached=load is not None,
        sources=needs_source,
        keys=keys,
        batch=s.block,
        parallelism=s.parallelism,
        load=load,
    )


# Records (images, tables), and a modality's elements (text's documents): exact positions.


def _tag_elements(tf_: Any, mix: MixSpec, s: int, size: int, state: Any, *element: Any) -> Any:
    """Tags items k, k+1, ... of source `s` (k: the state) with their group (position // size).
    Strings: the element's; ints: its keys' two columns if any, then the item's place in its
    group (position % size)."""
    (k,) = state
    strings = tuple(x for x in element if x.dtype == tf_.string)
    keys = [x for x in element if x.dtype != tf_.string]
    n = tf_.shape(element[0], out_type=tf_.int64)[0]
    at = mixture_spec.tf_position(tf_, mix.rates, s, k + tf_.range(n))
    ints = tf_.concat([*(tf_.reshape(x, [n, -1]) for x in keys), (at % size)[:, None]], 1)
    return (k + n,), at // size, strings, ints


def element_groups(
    tf_: Any, mix: MixSpec, items: list[Any], counts: Any, size: int, first: Any, shape: regroup.Items
) -> Any:
    """The sources' items (from their `counts`) zipped by group of `size` positions from group
    `first` on: each group's (strings..., ints without the place, source index), its items in
    their global order (their places are a permutation of the group)."""
    streams = [
        regroup.scan_groups(
            tf_, ds, (counts[k],), functools.partial(_tag_elements, tf_, mix, k, size), first, shape
        )
        for k, ds in enumerate(items)
    ]

    def joined(*groups: Any) -> Any:
        parts = [regroup.unpad(g, shape) for g in groups]
        cat = [tf_.concat([p[i] for p in parts], 0) for i in range(shape.strings + 1)]
        order = tf_.math.invert_permutation(cat[-1][:, -1])
        source = tf_.repeat(
            tf_.range(len(groups), dtype=tf_.int64), tf_.stack([regroup.length(g, shape) for g in groups])
        )
        return (*(tf_.gather(x, order) for x in cat), tf_.gather(source, order))

    return tf_.data.Dataset.zip(tuple(streams)).map(plain(joined))


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
    """The mixed records `(record, source[, key])` of this input pipeline from the step `start()`
    gives (read when the iterator starts): single records, or batches of `batch` (batched
    presets)."""
    tf_ = tf()
    loads = [loaded(s) for s in sources]
    shape = regroup.Items(strings=2, width=3 if keys else 1)

    def from_step(_: Any) -> Any:
        g = tf_.cast(start(), tf_.int64) * positions_per_step
        b0 = g // BLOCK
        counts = mixture_spec.tf_counts(tf_, mix.rates, b0 * BLOCK)
        each = [
            items(s, load, counts[k], keys=keys, needs_source=needs_source)
            for k, (s, load) in enumerate(zip(sources, loads, strict=True))
        ]
        blocks = element_groups(tf_, mix, each, counts, BLOCK, b0, shape)
        skips = tf_.data.Dataset.from_tensors(g - b0 * BLOCK).concatenate(
            tf_.data.Dataset.from_tensors(tf_.constant(0, tf_.int64)).repeat()
        )

        def block(b: Any, skip: Any) -> Any:
            record, source, ints = b[0][skip:], b[1][skip:], b[2][skip:]
            return (record, source, ints[:, :2]) if keys else (record, source)

        return tf_.data.Dataset.zip((blocks, skips)).map(plain(block))

    ds = tf_.data.Dataset.from_tensors(0).flat_map(plain(from_step))
    return raw.unbatch(ds) if batch is None else raw.rebatch(ds, batch, drop_remainder=True)

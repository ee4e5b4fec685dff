"""A text mixture as a tf.data stream: the mixed documents in chunks (`mix_by="documents"`,
`document_chunks`), or for weights in tokens each chunk's *segments* (a document's pieces in
that chunk of virtual time: the record and the token range `[lo, hi)` it reads), every source's
in turn; mixture/pack.py packs each source's on its own and orders the rows (`token_chunks`).
Each source's items are tagged and regrouped as pipeline/mixture/stream.py does for records.

A start at step K finds the chunk holding the step's first row by walking the chunks before it
from the sources' lengths files alone (as one source's text pipeline does): the same tags and
groups computed on the lengths in each source's order, each chunk's rows counted as the pack
stage places them; for tokens the walk also gives each source's first document and its tokens
before it at that chunk.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

from tfpipe._tf import plain, tf
from tfpipe.modalities.text import lengths as text_lengths
from tfpipe.modalities.text import packer
from tfpipe.modalities.text import stages as text_stages
from tfpipe.pipeline.mixture import regroup
from tfpipe.pipeline.mixture import spec as mixture_spec
from tfpipe.pipeline.mixture import stream as mixture_stream
from tfpipe.pipeline.mixture.spec import MixSpec
from tfpipe.pipeline.mixture.stream import SourceRead, element_groups, loaded
from tfpipe.pipeline.order import stream as order_stream


@dataclasses.dataclass(frozen=True)
class TextCut:
    """How a text mixture cuts its documents.

    Attributes:
      L: the sequence length.
      eos: an EOS is appended to each document.
      classify: a classifier's documents: their first L - 2 tokens framed by [CLS] and [SEP].
      truncate: only each document's first L tokens are kept.
      mode: the packing mode.
      span: the virtual time a chunk spans (tokens), or the documents a chunk holds (documents).
    """

    L: int
    eos: bool
    classify: bool
    truncate: bool
    mode: Any
    span: int

    def kept(self, tf_: Any, lengths: Any) -> Any:
        """Each document's tokens as packed (`pieces.packed_lengths`), int64."""
        q = tf_.minimum(lengths, self.L - 2) + 2 if self.classify else lengths + int(self.eos)
        return tf_.minimum(q, self.L) if self.truncate else q


def segments(tf_: Any, q: Any, before: Any, rate: int, cut: TextCut) -> tuple[Any, ...]:
    """(document, lo, hi, chunk) of each segment of documents of `q` tokens as packed, `before`
    tokens of their source earlier (`pieces.segments` in TensorFlow)."""
    i64, L = tf_.int64, cut.L
    n = (q + (L - 1)) // L
    doc = tf_.repeat(tf_.range(tf_.size(q, out_type=i64)), n)
    start = (tf_.range(tf_.reduce_sum(n)) - tf_.repeat(tf_.cumsum(n, exclusive=True), n)) * L
    length = tf_.minimum(tf_.constant(L, i64), tf_.gather(q, doc) - start)
    first = before + tf_.gather(tf_.cumsum(q, exclusive=True), doc) + start
    chunk = mixture_spec.piece_time(first, length, rate) // cut.span
    changed = tf_.logical_or(tf_.not_equal(doc[1:], doc[:-1]), tf_.not_equal(chunk[1:], chunk[:-1]))
    new = tf_.concat([tf_.ones([tf_.minimum(tf_.size(doc), 1)], tf_.bool), changed], 0)
    at = tf_.reshape(tf_.where(new), [-1])
    lo = tf_.gather(start, at)
    hi = lo + tf_.math.segment_sum(length, tf_.cumsum(tf_.cast(new, i64)) - 1)
    return tf_.gather(doc, at), lo, hi, tf_.gather(chunk, at)


# The start's chunk, found by a walk over the lengths.


def _start(
    tf_: Any,
    start: Callable[[], Any],
    rows_per_step: int,
    find: Callable[[Any], tuple[Any, ...]],
    sources: int,
) -> tuple[Any, Any, Any]:
    """(the chunk holding the start step's first row, each source's (item, tokens before it) at
    that chunk `[sources, 2]`, each chunk's rows to skip from it on). `find(row)` gives (chunk,
    rows before it, the sources' starts); a fixed start at 0 finds nothing."""
    fixed = getattr(start, "step", None)
    target = tf_.cast(start(), tf_.int64) * rows_per_step
    zero = tf_.constant(0, tf_.int64)
    nothing = (zero, zero, tf_.zeros([sources, 2], tf_.int64))
    if fixed == 0:
        first, before, at = nothing
    elif fixed is not None:
        first, before, at = find(target)
    else:
        first, before, at = tf_.cond(target > 0, lambda: find(target), lambda: nothing)
    skips = tf_.data.Dataset.from_tensors(target - before).concatenate(
        tf_.data.Dataset.from_tensors(zero).repeat()
    )
    return first, at, skips


def _find(tf_: Any, counts: Any, target: Any) -> tuple[Any, Any, Any]:
    """(chunk, rows before it, the sources' starts there) of the chunk holding row `target`,
    from a dataset of each chunk's (rows, starts `[sources, 2]`)."""
    spans = counts.scan(
        tf_.constant(0, tf_.int64),
        plain(lambda before, x: (before + x[0], (tf_.stack([before, before + x[0]]), x[1]))),
    )
    found = spans.enumerate().filter(plain(lambda i, x: x[0][1] > target)).take(1)
    return found.map(plain(lambda i, x: (i, x[0][0], x[1]))).get_single_element()


def _lengths_table(s: SourceRead) -> Callable[[], Any]:
    """The source's lengths file read once, by the first iterator (every later one takes it
    from memory), as `mixture.stream.loaded` loads records."""
    tf_ = tf()
    table = (
        tf_.data.Dataset.from_tensors(0).map(plain(lambda _: text_lengths.read_lengths(s.lengths))).cache()
    )
    return lambda: table.get_single_element()


def _ordered_lengths(s: SourceRead, table: Callable[[], Any]) -> Any:
    """The source's lengths in its order from position 0 (`text_lengths.ordered_lengths`), one
    part a block."""
    return text_lengths.ordered_lengths(s.spec, s.lengths, s.block, read=table).map(plain(lambda x, _: (x,)))


# Documents: chunks of the mixed documents.


def document_chunks(
    mix: MixSpec,
    sources: list[SourceRead],
    pack: Any,
    start: Callable[[], Any],
    *,
    size: int,
    rows_per_step: int,
    needs_source: bool,
) -> Any:
    """The mixed documents in chunks `(records, sources, skip, source index)` from the step
    `start()` gives: the chunk holding the step's first row, its rows before the step as skip."""
    tf_ = tf()
    loads = [loaded(s) for s in sources]
    find = _document_find(mix, sources, pack, size, [_lengths_table(s) for s in sources])

    def from_step(_: Any) -> Any:
        first, _, skips = _start(tf_, start, rows_per_step, find, len(sources))
        counts = mixture_spec.tf_counts(tf_, mix.rates, first * size)
        each = [
            mixture_stream.items(s, load, counts[k], keys=False, needs_source=needs_source)
            for k, (s, load) in enumerate(zip(sources, loads, strict=True))
        ]
        docs = element_groups(tf_, mix, each, counts, size, first, regroup.Items(strings=2, width=1))
        return tf_.data.Dataset.zip((docs, skips)).map(plain(lambda d, skip: (d[0], d[1], skip, d[3])))

    return tf_.data.Dataset.from_tensors(0).flat_map(plain(from_step))


def _document_find(
    mix: MixSpec, sources: list[SourceRead], pack: Any, size: int, tables: list[Callable[[], Any]]
) -> Callable[[Any], tuple[Any, Any, Any]]:
    """`target -> (chunk, rows before it, zeros)`: the chunk of the mixed documents holding row
    `target`, each chunk's rows counted from the sources' lengths (each source's order applied
    to its lengths file, mixed by the same positions)."""
    tf_ = tf()
    n = len(sources)

    def find(target: Any) -> Any:
        lengths = [_ordered_lengths(s, table) for s, table in zip(sources, tables, strict=True)]
        zero = tf_.zeros([n], tf_.int64)
        chunks = element_groups(
            tf_, mix, lengths, zero, size, tf_.constant(0, tf_.int64), regroup.Items(0, 2)
        )
        at = tf_.zeros([n, 2], tf_.int64)
        counts = chunks.map(plain(lambda ints, _: (text_stages.rows_of(pack, ints[:, 0]), at)))
        return _find(tf_, counts, target)

    return find


# Tokens: chunks of virtual time, a segment per document and chunk.

# The int parts of a segment: its tokens [lo, hi) of its document, the document's tokens as
# packed, its document (the source's item) and the source's tokens before that document.
_LO, _HI, _KEPT, _DOC, _BEFORE = range(5)


def _tag_segments(tf_: Any, mix: MixSpec, s: int, cut: TextCut, state: Any, lengths: Any, *rest: Any) -> Any:
    """Tags the segments of a block of source `s`'s documents (their token counts `lengths`,
    `rest` their records and sources, or their rows in the source's loaded records) with their
    chunk. State: the source's documents and tokens before the block."""
    done, before = state
    q = cut.kept(tf_, lengths)
    doc, lo, hi, chunk = segments(tf_, q, before, mix.rates[s], cut)
    doc_before = before + tf_.gather(tf_.cumsum(q, exclusive=True), doc)
    rest = tuple(tf_.gather(r, doc) for r in rest)
    rows = [r for r in rest if r.dtype != tf_.string]
    ints = tf_.stack([lo, hi, tf_.gather(q, doc), done + doc, doc_before, *rows], 1)
    state = (done + tf_.size(q, out_type=tf_.int64), before + tf_.reduce_sum(q))
    return state, chunk, tuple(r for r in rest if r.dtype == tf_.string), ints


def _loaded_rows(s: SourceRead, start: Any, lengths: Any, needs_source: bool) -> Any:
    """A cached source's documents from item `start` on as (token counts, rows in its loaded
    records, sources): its order applied to the row numbers, not to the records, so its
    scan carries numbers and the chunk gathers each record once."""
    tf_ = tf()
    first = tf_.constant(s.spec.first_ids, tf_.int64)
    by_row = tf_.gather(
        lengths, tf_.ragged.range(first, first + tf_.constant(s.spec.counts, tf_.int64)).flat_values
    )
    rows = order_stream.stream(
        s.spec,
        s.read,  # never called: `load` gives the table
        lambda: start * s.stride,
        cached=True,
        sources=needs_source,
        keys=False,
        batch=s.block,
        parallelism=1,
        load=lambda: tf_.range(s.spec.examples, dtype=tf_.int64),
    )
    return rows.map(plain(lambda row, name: (tf_.gather(by_row, row), row, name)))


def token_chunks(
    mix: MixSpec,
    sources: list[SourceRead],
    cut: TextCut,
    start: Callable[[], Any],
    *,
    rows_per_step: int,
    needs_source: bool,
) -> Any:
    """The mixed text in chunks of virtual time `(records, sources, skip, source index, lo, hi,
    tokens)` from the step `start()` gives: each chunk's segments, source by source; the chunk
    holding the step's first row first, its rows before the step as skip. A cached source's
    scan carries its records' rows, not the records (a record's bytes copied once, not at
    every step of the scan)."""
    tf_ = tf()
    loads = [loaded(s) for s in sources]
    tables = [_lengths_table(s) for s in sources]
    find = _token_find(mix, sources, cut, tables)
    n = len(sources)
    shapes = [regroup.Items(1, 6) if load is not None else regroup.Items(2, 5) for load in loads]

    def from_step(_: Any) -> Any:
        first, at, skips = _start(tf_, start, rows_per_step, find, n)
        streams, records = [], []
        for k, (s, load, table) in enumerate(zip(sources, loads, tables, strict=True)):
            lengths = table()
            if load is not None:
                items = _loaded_rows(s, at[k, 0], lengths, needs_source)
                records.append(load())
            else:
                items = mixture_stream.items(s, load, at[k, 0], keys=True, needs_source=needs_source)
                items = items.map(plain(lambda r, src, key, t=lengths: (tf_.gather(t, key[:, 1]), r, src)))
                records.append(None)
            tag = functools.partial(_tag_segments, tf_, mix, k, cut)
            streams.append(regroup.scan_groups(tf_, items, (at[k, 0], at[k, 1]), tag, first, shapes[k]))

        def joined(*groups: Any) -> Any:
            parts = [regroup.unpad(g, shape) for g, shape in zip(groups, shapes, strict=True)]
            mine = [
                (tf_.gather(table, p[-1][:, 5]), p[0]) if table is not None else (p[0], p[1])
                for p, table in zip(parts, records, strict=True)
            ]
            ints = tf_.concat([p[-1][:, :5] for p in parts], 0)
            source = tf_.repeat(
                tf_.range(n, dtype=tf_.int64),
                tf_.stack([regroup.length(g, shape) for g, shape in zip(groups, shapes, strict=True)]),
            )
            recs, names = (tf_.concat([m[i] for m in mine], 0) for i in range(2))
            return recs, names, source, ints[:, _LO], ints[:, _HI], ints[:, _KEPT]

        chunks = tf_.data.Dataset.zip(tuple(streams)).map(plain(joined))
        return tf_.data.Dataset.zip((chunks, skips)).map(plain(lambda c, skip: (c[0], c[1], skip, *c[2:])))

    return tf_.data.Dataset.from_tensors(0).flat_map(plain(from_step))


def _token_find(
    mix: MixSpec, sources: list[SourceRead], cut: TextCut, tables: list[Callable[[], Any]]
) -> Callable[[Any], tuple[Any, Any, Any]]:
    """`target -> (chunk, rows before it, each source's (document, tokens before it) there)`: the
    chunk holding row `target`, each chunk's rows counted from the sources' lengths (their
    segments tagged as the stream tags them, placed as the pack stage places them)."""
    tf_ = tf()
    n = len(sources)
    shape = regroup.Items(0, 5)

    def find(target: Any) -> Any:
        zero = tf_.constant(0, tf_.int64)
        walks = [
            regroup.scan_groups(
                tf_,
                _ordered_lengths(s, table),
                (zero, zero),
                functools.partial(_tag_segments, tf_, mix, k, cut),
                zero,
                shape,
                heads=(_DOC, _BEFORE),
            )
            for k, (s, table) in enumerate(zip(sources, tables, strict=True))
        ]

        def rows(*groups: Any) -> Any:
            ints = tf_.concat([regroup.unpad(g, shape)[0] for g in groups], 0)
            source = tf_.repeat(
                tf_.range(n, dtype=tf_.int64), tf_.stack([regroup.length(g, shape) for g in groups])
            )
            count = packer.by_source(tf_, ints[:, _HI] - ints[:, _LO], source, cut.L, cut.mode, n)[5]
            return count, tf_.stack([g[-1] for g in groups])

        return _find(tf_, tf_.data.Dataset.zip(tuple(walks)).map(plain(rows)), target)

    return find


def find_start(
    mix: MixSpec, sources: list[SourceRead], pack: Any, cut: TextCut | None, size: int, target: Any
) -> tuple[Any, Any, Any]:
    """(chunk, rows before it, each source's (document, tokens before it) there) of the chunk
    holding row `target` of this input pipeline's mixed text, run now (describe(), tests)."""
    tables: list[Callable[[], Any]] = [
        functools.partial(text_lengths.read_lengths, s.lengths) for s in sources
    ]
    if cut is None:
        return _document_find(mix, sources, pack, size, tables)(target)
    return _token_find(mix, sources, cut, tables)(target)

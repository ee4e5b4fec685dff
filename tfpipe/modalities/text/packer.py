"""The text packer in TensorFlow ops: one chunk of parsed documents -> rows `[R, L]`.

The algorithm and its modes are described in tfpipe/packing/reference.py, whose `pack` gives
exactly the rows this module gives (tests/modalities/text/test_packer.py checks it on real text).
Everything runs inside a tf.data map, with no `py_function`. first_fit loops once per round,
never per document: a round places a piece in many rows at once with an argsort, a few
searchsorted and scatters (20 to 90 rounds for a chunk of 512 rows of real text).
"""

from __future__ import annotations

from types import ModuleType

from tfpipe._tf import Tensor, tf
from tfpipe.packing.spec import Mode


def pieces(tf_: ModuleType, lengths: Tensor, L: int, truncate: bool) -> tuple[Tensor, Tensor, Tensor]:
    """(document, first token, length) of every piece, as `reference.pieces`."""
    n = (lengths + (L - 1)) // L
    if truncate:
        n = tf_.minimum(n, 1)
    doc = tf_.repeat(tf_.range(tf_.size(lengths, out_type=tf_.int64)), n)
    k = tf_.range(tf_.reduce_sum(n)) - tf_.repeat(tf_.cumsum(n, exclusive=True), n)
    start = k * L
    return doc, start, tf_.minimum(tf_.constant(L, tf_.int64), tf_.gather(lengths, doc) - start)


def first_fit(tf_: ModuleType, length: Tensor, L: int) -> tuple[Tensor, Tensor, Tensor]:
    """(row, offset) of every piece and the row count: `reference._first_fit` in rounds."""
    i64 = tf_.int64
    order = tf_.argsort(-length, stable=True)
    order = tf_.cast(order, i64)
    placed = tf_.TensorArray(i64, size=0, dynamic_size=True, infer_shape=False)

    def round_(i: Tensor, q: Tensor, pid: Tensor, free: Tensor, placed: Tensor) -> tuple[Tensor, ...]:
        by_free = tf_.cast(tf_.argsort(-free, stable=True), i64)
        take, ok = match(tf_, tf_.gather(free, by_free), q)
        rows = tf_.boolean_mask(by_free, ok)
        got = tf_.gather(q, take)
        placed = placed.write(i, tf_.stack([tf_.gather(pid, take), rows, L - tf_.gather(free, rows)], 1))
        free = tf_.tensor_scatter_nd_sub(free, rows[:, None], got)
        keep = tf_.tensor_scatter_nd_update(
            tf_.ones_like(q, tf_.bool), take[:, None], tf_.zeros_like(take, tf_.bool)
        )
        q, pid = tf_.boolean_mask(q, keep), tf_.boolean_mask(pid, keep)
        m = opened(tf_, q, tf_.reduce_max(tf_.concat([free, [0]], 0)), L)
        count = tf_.size(free, out_type=i64)
        new = tf_.stack([pid[:m], tf_.range(count, count + m), tf_.zeros([m], i64)], 1)
        placed = placed.write(i + 1, new)
        return i + 2, q[m:], pid[m:], tf_.concat([free, L - q[:m]], 0), placed

    _, _, _, free, placed = tf_.while_loop(
        lambda i, q, *_: tf_.size(q) > 0,
        round_,
        (tf_.constant(0), tf_.gather(length, order), order, tf_.zeros([0], i64), placed),
        shape_invariants=(
            tf_.TensorShape([]),
            tf_.TensorShape([None]),
            tf_.TensorShape([None]),
            tf_.TensorShape([None]),
            tf_.TensorShape(None),
        ),
        parallel_iterations=1,
    )
    placed = tf_.reshape(placed.concat(), [-1, 3])
    n = tf_.size(length, out_type=i64)[None]
    row = tf_.scatter_nd(placed[:, :1], placed[:, 1], n)
    offset = tf_.scatter_nd(placed[:, :1], placed[:, 2], n)
    return row, offset, tf_.size(free, out_type=i64)


def match(tf_: ModuleType, free: Tensor, q: Tensor) -> tuple[Tensor, Tensor]:
    """`reference.match`: one round's pieces taken, and which rows take one."""
    want = tf_.searchsorted(-q, -free, side="left", out_type=tf_.int64)
    j = tf_.range(tf_.size(free, out_type=tf_.int64))
    first = tf_.searchsorted(want, want, side="left", out_type=tf_.int64)
    after = tf_.searchsorted(want, want, side="right", out_type=tf_.int64)
    limit = tf_.gather(tf_.concat([want, tf_.size(q, out_type=tf_.int64)[None]], 0), after)
    take = want + j - first
    ok = take < limit
    return tf_.boolean_mask(take, ok), ok


def opened(tf_: ModuleType, q: Tensor, most_free: Tensor, L: int) -> Tensor:
    """`reference.opened`: how many of the longest pending pieces open new rows."""
    too_long = tf_.searchsorted(-q, -most_free[None], side="left", out_type=tf_.int64)[0]
    return tf_.minimum(too_long, (tf_.reduce_sum(q[:too_long]) + (L - 1)) // L)


def concat(tf_: ModuleType, lengths: Tensor, L: int, truncate: bool) -> tuple[Tensor, ...]:
    """`reference._concat`: the documents end to end, cut at every row end."""
    if truncate:
        lengths = tf_.minimum(lengths, L)
    ends = tf_.cumsum(lengths)
    total = tf_.reduce_sum(lengths)
    rows = (total + (L - 1)) // L
    cuts, _ = tf_.unique(tf_.sort(tf_.concat([ends - lengths, tf_.range(rows, dtype=tf_.int64) * L], 0)))
    cuts = tf_.boolean_mask(cuts, cuts < total)
    seg_end = tf_.concat([cuts[1:], total[None]], 0)
    doc = tf_.searchsorted(ends, cuts, side="right", out_type=tf_.int64)
    start = cuts - tf_.gather(ends - lengths, doc)
    return doc, start, seg_end - cuts, cuts // L, cuts % L, rows


def place(tf_: ModuleType, lengths: Tensor, L: int, mode: Mode, truncate: bool) -> tuple[Tensor, ...]:
    """`reference.place`: (doc, start, length, row, offset, rows) of one chunk's pieces."""
    if mode == "concat":
        return concat(tf_, lengths, L, truncate)
    doc, start, length = pieces(tf_, lengths, L, truncate)
    if mode == "none":
        count = tf_.size(doc, out_type=tf_.int64)
        return doc, start, length, tf_.range(count), tf_.zeros_like(doc), count
    return (doc, start, length, *first_fit(tf_, length, L))


def pack(tokens: Tensor, L: int, mode: Mode, truncate: bool = False) -> dict[str, Tensor]:
    """One chunk of documents (a `[docs, None]` int RaggedTensor, in order) as rows:
    `{"tokens", "segment_ids", "positions"}` int32 `[rows, L]`, as `reference.pack`."""
    tf_ = tf()
    i64 = tf_.int64
    rows, _ = pack_ranges(
        tokens.values,
        tf_.cast(tokens.row_starts(), i64),
        tf_.cast(tokens.row_lengths(), i64),
        L,
        mode,
        truncate,
    )
    return rows


def pack_ranges(
    values: Tensor,
    starts: Tensor,
    lengths: Tensor,
    L: int,
    mode: Mode,
    truncate: bool = False,
    source: Tensor | None = None,
    sources: int = 1,
) -> tuple[dict[str, Tensor], tuple[Tensor, Tensor, Tensor]]:
    """Documents given as ranges of `values` (int64 `starts` and `lengths`, in order) as rows,
    as `pack` packs them, and the placement's (document, row, length) of every piece: a
    document may be part of one (a mixture's segment), its pieces cut every L from its start.
    With `source` (each document's, of `sources`), each source's documents are packed on their
    own (`by_source`; no truncation: a mixture's segments are cut already).

    A row holds its pieces end to end from column 0 (every mode places them so), so the rows
    are one ragged gather of the token ranges in (row, offset) order, made dense once: a
    scatter of every token cost ~200 ns a token, this ~20.
    """
    tf_ = tf()
    i64 = tf_.int64
    if source is None:
        doc, start, length, row, offset, rows = place(tf_, lengths, L, mode, truncate)
    else:
        doc, start, length, row, offset, rows, _ = by_source(tf_, lengths, source, L, mode, sources)
    srt = tf_.argsort(row * (1 << 32) + offset, stable=True)
    row_s, length_s = tf_.gather(row, srt), tf_.gather(length, srt)
    first = tf_.gather(starts, tf_.gather(doc, srt)) + tf_.gather(start, srt)
    per_row = tf_.math.unsorted_segment_sum(length_s, row_s, rows)

    def dense(v: Tensor) -> Tensor:
        return tf_.RaggedTensor.from_row_lengths(v, per_row, validate=False).to_tensor(shape=[None, L])

    index = tf_.ragged.range(first, first + length_s).flat_values
    out_tokens = dense(tf_.cast(tf_.gather(values, index), tf_.int32))
    positions = dense(tf_.cast(tf_.ragged.range(length_s).flat_values, tf_.int32))
    # A segment starts where a position is 0 in the filled part of a row; its id counts them.
    filled = tf_.range(L, dtype=i64)[None, :] < per_row[:, None]
    seg_starts = tf_.logical_and(filled, tf_.equal(positions, 0))
    segments = tf_.cumsum(tf_.cast(seg_starts, tf_.int32), axis=1) * tf_.cast(filled, tf_.int32)
    return {"tokens": out_tokens, "segment_ids": segments, "positions": positions}, (doc, row, length)


def by_source(
    tf_: ModuleType, lengths: Tensor, source: Tensor, L: int, mode: Mode, sources: int
) -> tuple[Tensor, ...]:
    """`place` of each source's documents (pieces of at most L: a mixture's segments) on their
    own, at once: (doc, start, length, row, offset, rows, each row's source). Rows are numbered
    source by source, each source's in the order `place` of its documents alone numbers them,
    so each source's rows equal `reference.place` of its documents alone."""
    i64 = tf_.int64
    if mode == "concat":
        parts = [
            concat(tf_, tf_.boolean_mask(lengths, tf_.equal(source, s)), L, False) for s in range(sources)
        ]
        index = [
            tf_.boolean_mask(tf_.range(tf_.size(lengths, out_type=i64)), tf_.equal(source, s))
            for s in range(sources)
        ]
        before = tf_.cumsum(tf_.stack([p[-1] for p in parts]), exclusive=True)
        doc = tf_.concat([tf_.gather(i, p[0]) for i, p in zip(index, parts, strict=True)], 0)
        row = tf_.concat([p[3] + before[s] for s, p in enumerate(parts)], 0)
        row_source = tf_.repeat(tf_.range(sources, dtype=i64), tf_.stack([p[-1] for p in parts]))
        return (
            doc,
            tf_.concat([p[1] for p in parts], 0),
            tf_.concat([p[2] for p in parts], 0),
            row,
            tf_.concat([p[4] for p in parts], 0),
            tf_.reduce_sum(tf_.stack([p[-1] for p in parts])),
            row_source,
        )
    doc, start, length = pieces(tf_, lengths, L, False)
    piece_source = tf_.gather(source, doc)
    if mode == "none":  # one piece a row, in order; a mixture's segments come source by source
        count = tf_.size(doc, out_type=i64)
        return doc, start, length, tf_.range(count), tf_.zeros_like(doc), count, piece_source
    row, offset, rows, row_source = first_fit_by(tf_, length, piece_source, L, sources)
    return doc, start, length, row, offset, rows, row_source


def first_fit_by(
    tf_: ModuleType, length: Tensor, source: Tensor, L: int, sources: int
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """`first_fit` of each source's pieces into rows of their own, every source's rounds run
    at once: (row, offset) of every piece, the row count and each row's source. Rows and pieces
    are sorted by (source, then as `first_fit` sorts them), so each source's pieces meet only its
    rows and go where `first_fit` of them alone puts them.

    Long: one while loop for every source (a loop a source would trace and run the packer's
    rounds once per source), its round the steps of `first_fit`'s with the sources' keys.
    """
    i64 = tf_.int64
    span = 2 * L + 2  # a source's keys (source * span - length) never reach the next source's
    order = tf_.cast(tf_.argsort(source * span - length, stable=True), i64)
    placed = tf_.TensorArray(i64, size=0, dynamic_size=True, infer_shape=False)

    def round_(
        i: Tensor, q: Tensor, qs: Tensor, pid: Tensor, free: Tensor, fs: Tensor, placed: Tensor
    ) -> tuple[Tensor, ...]:
        by_free = tf_.cast(tf_.argsort(fs * span - free, stable=True), i64)
        take, ok = match_by(tf_, tf_.gather(free, by_free), tf_.gather(fs, by_free), q, qs, span, sources)
        rows = tf_.boolean_mask(by_free, ok)
        placed = placed.write(i, tf_.stack([tf_.gather(pid, take), rows, L - tf_.gather(free, rows)], 1))
        free = tf_.tensor_scatter_nd_sub(free, rows[:, None], tf_.gather(q, take))
        keep = tf_.tensor_scatter_nd_update(
            tf_.ones_like(q, tf_.bool), take[:, None], tf_.zeros_like(take, tf_.bool)
        )
        q, qs, pid = tf_.boolean_mask(q, keep), tf_.boolean_mask(qs, keep), tf_.boolean_mask(pid, keep)
        new = opened_by(tf_, q, qs, free, fs, L, sources)
        count = tf_.size(free, out_type=i64)
        m = tf_.reduce_sum(tf_.cast(new, i64))
        placed = placed.write(
            i + 1,
            tf_.stack([tf_.boolean_mask(pid, new), tf_.range(count, count + m), tf_.zeros([m], i64)], 1),
        )
        free = tf_.concat([free, L - tf_.boolean_mask(q, new)], 0)
        fs = tf_.concat([fs, tf_.boolean_mask(qs, new)], 0)
        rest = tf_.logical_not(new)
        return (
            i + 2,
            tf_.boolean_mask(q, rest),
            tf_.boolean_mask(qs, rest),
            tf_.boolean_mask(pid, rest),
            free,
            fs,
            placed,
        )

    none = tf_.TensorShape([None])
    _, _, _, _, free, fs, placed = tf_.while_loop(
        lambda i, q, *_: tf_.size(q) > 0,
        round_,
        (
            tf_.constant(0),
            tf_.gather(length, order),
            tf_.gather(source, order),
            order,
            tf_.zeros([0], i64),
            tf_.zeros([0], i64),
            placed,
        ),
        shape_invariants=(tf_.TensorShape([]), none, none, none, none, none, tf_.TensorShape(None)),
        parallel_iterations=1,
    )
    placed = tf_.reshape(placed.concat(), [-1, 3])
    n = tf_.size(length, out_type=i64)[None]
    # Rows renumbered source by source, each source's in their opening order.
    by = tf_.cast(tf_.argsort(fs, stable=True), i64)
    rank = tf_.math.invert_permutation(by)
    row = tf_.gather(rank, tf_.scatter_nd(placed[:, :1], placed[:, 1], n))
    offset = tf_.scatter_nd(placed[:, :1], placed[:, 2], n)
    return row, offset, tf_.size(free, out_type=i64), tf_.gather(fs, by)


def match_by(
    tf_: ModuleType, free: Tensor, fs: Tensor, q: Tensor, qs: Tensor, span: int, sources: int
) -> tuple[Tensor, Tensor]:
    """`match` with rows and pieces of several sources (rows sorted by (source, free space, most
    first), pieces by (source, length, longest first)): a row takes pieces of its source only;
    the rows no piece of their source fits stand aside."""
    i64 = tf_.int64
    want = tf_.searchsorted(qs * span - q, fs * span - free, side="left", out_type=i64)
    end = tf_.gather(
        tf_.searchsorted(qs, tf_.range(1, sources + 1, dtype=i64), side="left", out_type=i64), fs
    )
    valid = want < end
    want, end = tf_.boolean_mask(want, valid), tf_.boolean_mask(end, valid)
    j = tf_.range(tf_.size(want, out_type=i64))
    first = tf_.searchsorted(want, want, side="left", out_type=i64)
    after = tf_.searchsorted(want, want, side="right", out_type=i64)
    limit = tf_.gather(tf_.concat([want, tf_.size(q, out_type=i64)[None]], 0), after)
    take = want + j - first
    ok = take < tf_.minimum(limit, end)
    at = tf_.boolean_mask(tf_.range(tf_.size(free, out_type=i64)), valid)
    full = tf_.scatter_nd(
        tf_.boolean_mask(at, ok)[:, None],
        tf_.ones_like(tf_.boolean_mask(at, ok), tf_.bool),
        tf_.shape(free, out_type=i64),
    )
    return tf_.boolean_mask(take, ok), full


def opened_by(
    tf_: ModuleType, q: Tensor, qs: Tensor, free: Tensor, fs: Tensor, L: int, sources: int
) -> Tensor:
    """`opened` for each source at once: which pending pieces (sorted by (source, length, longest
    first)) open new rows: of each source's pieces too long for every open row of it, as many as
    their tokens fill at least."""
    i64 = tf_.int64
    most = tf_.maximum(tf_.math.unsorted_segment_max(free, fs, sources), 0)
    too_long = q > tf_.gather(most, qs)
    start = tf_.searchsorted(qs, tf_.range(sources, dtype=i64), side="left", out_type=i64)
    rank = tf_.range(tf_.size(q, out_type=i64)) - tf_.gather(start, qs)
    long_q = tf_.where(too_long, q, 0)
    n_long = tf_.math.unsorted_segment_sum(tf_.cast(too_long, i64), qs, sources)
    tokens = tf_.math.unsorted_segment_sum(long_q, qs, sources)
    m = tf_.minimum(n_long, (tokens + (L - 1)) // L)
    return rank < tf_.gather(m, qs)

"""A text mixture mixed by pieces in virtual time, in NumPy: the reference (as packing.reference is
the packer's) for the design that meets issue 35's "within 0.5 point over any 100 batches".
Research code: nothing in tfpipe calls it yet (mixture/stream.py still mixes whole documents;
tests/test_imports.py checks that nothing imports this module); issue 45 wires it into `build()`,
and benchmarks/mixture_shares.py measures it.

Why: a choice per document makes a window's token share follow the lengths of the documents in
it (pydoc's topics, 79 documents of ~1,500 tokens, strayed 21 points over 100 batches of 8x128;
benchmarks/mixture_shares.py). Three steps bound it:

1. Pieces. Each source's documents, in its own resumable order, EOS added, are cut into pieces
   of at most L (`packing.reference.pieces`, as the packer cuts them: every piece is a segment of
   its own with positions from 0, so a document's pieces may sit in different chunks and the
   rows read the same).
2. Virtual time (weighted fair queueing). Piece `i` of source `s` finishes at
   `finish = (tokens of s through i << SCALE_BITS) // quota_s`, the quotas being the weights in
   tokens apportioned over `mixture_spec.BLOCK`. The mixed stream is every source's pieces in
   order of finish (ties to the earlier source). At any point each source's tokens so far are
   within one piece (L tokens) of its weight's share, and source s's count of pieces before
   virtual time t is a search in its own cumulative lengths (`count_at`): closed form per
   source, no walk over the other sources. A chunk is a span of virtual time
   (`chunk_span`), so its pieces per source are a contiguous range of that source's order.
3. Balanced rows. A chunk is packed first-fit and its rows put in training order; a random
   order leaves a window that cuts a chunk with a random subset of its rows (2.8 points at
   8x128). `balanced_order` keeps the randomness but merges the rows by source: every prefix
   of the chunk's rows then holds each source's tokens in the chunk's proportion, within a row.

What wiring it into the graph takes (the order of work): each source's piece lengths in its
order (`text_lengths.ordered_lengths`, cut as `packing.pieces` cuts) with their finish, carried
across batches by a scan, give each piece's chunk; each source's records, zipped with their
pieces' chunks, are grouped by chunk (a record whose pieces straddle two chunks goes to both,
with its piece range); a chunk is the sources' groups concatenated, parsed, EOS added, cut into
pieces, its pieces packed (none is longer than L, so the packer cuts nothing) and its rows put
in `balanced_order`, keyed as `text_stages.chunk_seed` keys the random order today. A start
walks the chunks' rows from the lengths alone, as now, and starts each source at its count;
the Position's identity carries the mixture's version so that a state of the per-document
mixture is refused by name.
"""

from __future__ import annotations

import numpy as np

from tfpipe.packing import reference

# Virtual time is tokens << SCALE_BITS over a quota (< 2**12): integer, so the graph computes
# the very same keys; a source's tokens stay below 2**43 (8.8e12) before int64 would wrap.
SCALE_BITS = 20


def piece_lengths(
    lengths: np.ndarray, sequence_length: int, extra: int = 1, truncate: bool = False
) -> np.ndarray:
    """The pieces (token counts, in order) of documents of these token counts, `extra` tokens
    (the EOS) added to each, as the packer cuts them."""
    return reference.pieces(np.asarray(lengths, np.int64) + extra, sequence_length, truncate)[2]


def finish(pieces: np.ndarray, quota: int, before: int = 0) -> np.ndarray:
    """Each piece's finish in virtual time: the source's tokens through it (`before` tokens
    earlier) shifted by SCALE_BITS, over its quota."""
    return ((before + np.cumsum(np.asarray(pieces, np.int64))) << SCALE_BITS) // quota


def merge(pieces: list[np.ndarray], quotas: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(source, piece index in its source) of each piece of the mixed stream: every source's
    pieces in order of finish, ties to the earlier source."""
    keys = np.concatenate([finish(p, q) for p, q in zip(pieces, quotas, strict=True)])
    source = np.concatenate([np.full(len(p), s, np.int64) for s, p in enumerate(pieces)])
    index = np.concatenate([np.arange(len(p), dtype=np.int64) for p in pieces])
    order = np.argsort(keys, kind="stable")
    return source[order], index[order]


def budget(t: int, quota: int) -> int:
    """The most tokens of a source whose pieces finish by virtual time `t`:
    `(C << SCALE_BITS) // quota <= t` exactly when `C <= budget(t, quota)`."""
    return ((t + 1) * quota - 1) >> SCALE_BITS


def count_at(epoch_pieces: list[np.ndarray], quota: int, t: int) -> int:
    """Source pieces finishing by virtual time `t` (closed form): whole epochs of its tokens,
    then a search in the next epoch's cumulative lengths. `epoch_pieces[e]` is epoch e's
    pieces in that epoch's order; every epoch holds the same tokens (a permutation)."""
    per_epoch = int(epoch_pieces[0].sum())
    b = budget(t, quota)
    e, rest = divmod(b, per_epoch)
    within = np.searchsorted(np.cumsum(epoch_pieces[e]), rest, side="right") if rest else 0
    return e * len(epoch_pieces[0]) + int(within)


def chunk_span(chunk_tokens: int, block: int) -> int:
    """Virtual time a chunk of about `chunk_tokens` tokens spans: all sources together spend
    `block` tokens (their quotas' sum) per `1 << SCALE_BITS` of virtual time."""
    return max(1, (chunk_tokens << SCALE_BITS) // block)


def balanced_order(tokens: np.ndarray, permutation: np.ndarray) -> np.ndarray:
    """The training order of a chunk's rows: `tokens` is `[rows, sources]` (each row's tokens
    of each source), `permutation` a random order of the rows, kept within each side below.

    Two sources: each row's excess is its tokens of source 0 less the chunk's share of its
    tokens; the rows over and under the share are merged by their running excess before them
    (the greedy "take a row over the share while the prefix is under it", as one sort), so
    every prefix is within one row's excess (< L) of the chunk's share. More sources: rows
    classed by their main source, merged by each row's midpoint in its class's tokens (rows
    holding several sources stray by more)."""
    rows = np.asarray(tokens, np.int64)[permutation]
    size = rows.sum(1)
    total = max(1, int(size.sum()))
    if rows.shape[1] == 2:
        # Integer excess scaled by the chunk's tokens: rows[:, 0] * total - size * chunk's source 0.
        excess = rows[:, 0] * total - size * int(rows[:, 0].sum())
        over = excess > 0
        key = np.zeros(len(rows), np.int64)
        for side, sign in ((over, 1), (~over, -1)):
            e = sign * excess[side]
            key[side] = np.cumsum(e) - e  # the side's running excess before the row
        # Ties to the rows over the share (the prefix is at or under it then).
        return permutation[np.lexsort((~over, key))]
    main = np.argmax(rows, axis=1)
    key = np.zeros(len(rows), np.int64)
    for c in np.unique(main):
        mine = main == c
        t = size[mine]
        key[mine] = ((2 * np.cumsum(t) - t) << SCALE_BITS) // max(1, 2 * int(t.sum()))
    return permutation[np.argsort(key, kind="stable")]

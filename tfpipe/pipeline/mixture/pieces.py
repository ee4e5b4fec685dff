"""A text mixture by tokens, in NumPy: the reference the graph (the text modality's
mixture/stream.py and mixture/pack.py) must equal row for row, as packing.reference is the
packer's.

1. Pieces. Each source's documents, in its own resumable order and as packed (EOS added,
   `packed_lengths`), are cut into pieces of at most L. Piece `k` of a document holds its tokens
   `[kL, min((k + 1) L, q))`.
2. Virtual time (weighted fair queueing). A piece of `u` tokens after `a` earlier tokens of its
   source is at `spec.piece_time(a, u, rate)`, and its chunk is that time over `spec.chunk_span`:
   each source's pieces in a chunk are a run of its order, its tokens within one piece of its
   rate's share of the chunk. A document's pieces in one chunk form a *segment* `(document, lo,
   hi)`: the chunk reads the document's tokens `[lo, hi)`; a document whose pieces fall in two
   chunks is read by both (`segments`).
3. Rows of one source each. In a chunk, each source's segments are packed on their own
   (`packing.reference.place`: the packer cuts each segment every L from `lo`, a multiple of L,
   so it cuts the document's own pieces), so every row holds one source.
4. Balanced row order (`balanced_order`). The chunk's rows in a random order (a Philox
   permutation keyed by the chunk, as one source's rows are shuffled), then each source's rows
   spread over the chunk by the midpoint of their tokens in that source's tokens (stride
   scheduling): every prefix of the chunk's rows holds each source's tokens in the chunk's
   proportion within about one row.

So every window of batches holds each source within about two rows of its weight, whatever
the documents' lengths: 0.37 point at worst over windows of 100 batches of 4 x 2048 on three
corpora of 500 to 6,500 tokens a document (benchmarks/mixture_three.py), where a choice per
document strayed 4.8 points. Rows of one source fill as that source fills alone.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tfpipe.packing import reference
from tfpipe.packing.spec import Mode
from tfpipe.pipeline.mixture import spec

# A row's place in its source's tokens is a fraction with KEY_BITS bits: exact in int64 for
# chunks below 2**30 tokens.
KEY_BITS = 32


def packed_lengths(lengths: np.ndarray, L: int, *, eos: bool, classify: bool, truncate: bool) -> np.ndarray:
    """Each document's tokens as packed (`text_stages.documents`, then `truncate`): a
    classifier's first L - 2 framed by [CLS] and [SEP], else with its EOS; the first L only
    where it truncates."""
    q = np.asarray(lengths, np.int64)
    q = np.minimum(q, L - 2) + 2 if classify else q + int(eos)
    return np.minimum(q, L) if truncate else q


@dataclasses.dataclass(frozen=True)
class Segments:
    """Pieces of a run of one source's documents, grouped by (document, chunk).

    Attributes:
      doc: each segment's document (index into the run).
      lo, hi: the document's tokens (as packed) it holds.
      chunk: its chunk.
    """

    doc: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    chunk: np.ndarray


def segments(q: np.ndarray, L: int, rate: int, span: int, before: int = 0) -> Segments:
    """The segments of documents of `q` tokens as packed (in order, `before` tokens of their
    source earlier): each document cut every L, each piece timed, the pieces of a document in
    one chunk grouped."""
    q = np.asarray(q, np.int64)
    doc, start, length = reference.pieces(q, L)
    first = before + np.cumsum(q) - q
    chunk = spec.piece_time(first[doc] + start, length, rate) // span
    new = np.r_[True, (doc[1:] != doc[:-1]) | (chunk[1:] != chunk[:-1])] if len(doc) else np.zeros(0, bool)
    ids = np.cumsum(new) - 1
    lo = start[new]
    return Segments(doc[new], lo, lo + np.bincount(ids, length, len(lo)).astype(np.int64), chunk[new])


def chunk_rows(
    lengths: list[np.ndarray], sources: np.ndarray, L: int, mode: Mode
) -> tuple[reference.Placement, ...]:
    """Each source's rows of a chunk: its segments (`lengths`: hi - lo, in chunk order; `sources`:
    each one's source) placed on their own."""
    return tuple(reference.place(np.asarray(lengths)[sources == s], L, mode) for s in np.unique(sources))


def balanced_order(source: np.ndarray, tokens: np.ndarray, permutation: np.ndarray) -> np.ndarray:
    """The training order of a chunk's rows (each of one source: `source`, its real tokens
    `tokens`), `permutation` a random order of them kept within each source: each row at the
    midpoint of its tokens in its source's tokens (in that order), as an exact fraction of
    KEY_BITS bits; ties to the earlier source."""
    src = np.asarray(source, np.int64)[permutation]
    t = np.asarray(tokens, np.int64)[permutation]
    key = np.zeros(len(t), np.int64)
    for s in np.unique(src):
        mine = src == s
        c = np.cumsum(t[mine])
        key[mine] = ((2 * c - t[mine]) << KEY_BITS) // (2 * int(c[-1]))
    return permutation[np.lexsort((src, key))]

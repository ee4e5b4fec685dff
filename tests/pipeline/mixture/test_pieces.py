"""The piece-level mixture's reference (pipeline/mixture/pieces.py) on real lengths: pydoc's topics (79
long documents) and the stdlib's docstrings, tokens as characters / 4. Integers and NumPy only."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tfpipe.packing import reference, spec
from tfpipe.pipeline.mixture import pieces as mp
from tfpipe.pipeline.mixture.spec import BLOCK, quotas

L = 128


@pytest.fixture(scope="module")
def lengths():
    import pydoc_data.topics

    from tfpipe.synthetic import text

    topics = pydoc_data.topics.topics
    return (
        np.array([max(1, len(topics[k]) // 4) for k in sorted(topics)], np.int64),
        np.array([max(1, len(x) // 4) for x in text.documents(1400)[:701]], np.int64),
    )


def epochs(lens, n, seed):
    rng = np.random.default_rng(seed)
    return [mp.piece_lengths(lens[rng.permutation(len(lens))], L) for _ in range(n)]


def test_every_prefix_holds_each_source_within_one_piece_of_its_weight(lengths):
    q = quotas([0.3, 0.7])
    pieces = [
        np.concatenate(epochs(lens, n, s)) for s, (lens, n) in enumerate(zip(lengths, (2, 60), strict=True))
    ]
    src, index = mp.merge(pieces, q)
    assert sorted(index[src == 0]) == list(range(len(pieces[0])))  # each piece once, in order
    assert np.all(np.diff(index[src == 0]) == 1) and np.all(np.diff(index[src == 1]) == 1)
    tokens = np.zeros((len(src), 2), np.int64)
    tokens[src == 0, 0] = pieces[0][index[src == 0]]
    tokens[src == 1, 1] = pieces[1][index[src == 1]]
    keys = [mp.finish(x, n) for x, n in zip(pieces, q, strict=True)]
    merged = np.where(src == 0, keys[0][np.minimum(index, len(keys[0]) - 1)], keys[1][index % len(keys[1])])
    both = int(np.searchsorted(merged, min(k[-1] for k in keys), side="right"))  # no source done yet
    done = np.cumsum(tokens, 0)[:both]
    off = done - np.outer(done.sum(1), np.array(q) / BLOCK)
    assert np.abs(off).max() <= L + 1, np.abs(off).max()


def test_a_source_count_at_any_virtual_time_is_a_search_in_its_own_lengths(lengths):
    small = epochs(lengths[0], 4, seed=7)  # the topics repeat: four epochs, each its own order
    q = 1229
    keys = mp.finish(np.concatenate(small), q)
    rng = np.random.default_rng(0)
    for t in [0, int(keys[0]) - 1, int(keys[0]), *rng.integers(0, int(keys[-1]), 200).tolist()]:
        assert mp.count_at(small, q, t) == int(np.searchsorted(keys, t, side="right")), t


def rows_of_chunk(lengths, seed):
    """A chunk of ~512 rows of both sources' pieces, packed first-fit: [rows, 2] tokens."""
    rng = np.random.default_rng(seed)
    parts = [mp.piece_lengths(lens[rng.permutation(len(lens))], L) for lens in lengths]
    units = np.concatenate([parts[0][:150], parts[1][:700]])
    src = np.repeat([0, 1], [150, 700])
    p = reference.place(units, L, "first_fit")
    out = np.zeros((p.rows, 2), np.int64)
    np.add.at(out, (p.row, src[p.doc]), p.length)
    return out, rng.permutation(p.rows)


def prefix_off(rows):
    done = np.cumsum(rows, 0)
    share = rows.sum(0) / rows.sum()
    return np.abs(done - np.outer(done.sum(1), share)).max()


def test_balanced_rows_hold_the_chunk_share_in_every_prefix_and_random_rows_do_not(lengths):
    rows, perm = rows_of_chunk(lengths, seed=3)
    order = mp.balanced_order(rows, perm)
    assert sorted(order) == list(range(len(rows)))
    assert prefix_off(rows[order]) < L, prefix_off(rows[order])  # within one row's excess
    assert prefix_off(rows[perm]) > 4 * L  # the random order strays by rows


def window_worst(lengths, pieces_first: bool, seed: int = 0, B: int = 8, batches: int = 400) -> float:
    """The worst |share - 0.3| of the topics over windows of 100 batches of [B, L]: the merged
    design (a choice per document in blocks) or the piece-level one."""
    rng = np.random.default_rng(seed)
    streams = [
        np.concatenate([lens[rng.permutation(len(lens))] for _ in range(8 * BLOCK // len(lens) + 2)])
        for lens in lengths
    ]
    if pieces_first:
        q = quotas([0.3, 0.7])
        pieces = [mp.piece_lengths(s, L) for s in streams]
        src, index = mp.merge(pieces, q)
        keys = [mp.finish(x, n) for x, n in zip(pieces, q, strict=True)]
        units, ends = np.zeros(len(src), np.int64), np.zeros(len(src), np.int64)
        for s in (0, 1):
            units[src == s], ends[src == s] = pieces[s][index[src == s]], keys[s][index[src == s]]
        chunk = ends // mp.chunk_span(spec.CHUNK_ROWS * L, BLOCK)
    else:
        q = quotas([0.3 / (lengths[0].mean() + 1), 0.7 / (lengths[1].mean() + 1)])
        src = np.concatenate([rng.permutation(np.repeat([0, 1], q)) for _ in range(8)])
        at, units = [0, 0], np.zeros(len(src), np.int64)
        for i, s in enumerate(src):
            units[i], at[s] = streams[s][at[s]] + 1, at[s] + 1
        chunk = np.arange(len(src)) // spec.chunk_documents(L, float(units.mean()))
    edges = np.r_[0, np.flatnonzero(np.diff(chunk)) + 1, len(src)]
    out = []
    for a, b in itertools.pairwise(edges):
        p = reference.place(units[a:b], L, "first_fit")
        rows = np.zeros((p.rows, 2), np.int64)
        np.add.at(rows, (p.row, src[a:b][p.doc]), p.length)
        out.append(rows[mp.balanced_order(rows, rng.permutation(p.rows))])
    rows = np.concatenate(out)
    per_batch = rows[: batches * B].reshape(batches, B, 2).sum(1)
    x = np.cumsum(np.vstack([[0, 0], per_batch]), 0)
    w = x[100:] - x[:-100]
    return float(np.abs(w[:, 0] / w.sum(1) - 0.3).max())


def test_pieces_meet_half_a_point_over_every_100_batches_where_documents_do_not(lengths):
    """The issue's target at 8x128 with pydoc's topics as a source: the piece-level mixture
    stays within 0.5 point over every window of 100 batches; the merged choice per document,
    rows in the same balanced order, strays by points."""
    assert window_worst(lengths, pieces_first=True) < 0.005
    assert window_worst(lengths, pieces_first=False) > 0.02

"""The text mixture's NumPy reference (pipeline/mixture/pieces.py) on real lengths: pydoc's topics
(79 long documents) and the stdlib's docstrings, tokens as characters / 4. Integers and NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from tfpipe.packing import reference, spec
from tfpipe.pipeline.mixture import pieces as mp
from tfpipe.pipeline.mixture import spec as mixture_spec

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


def stream(lens, n, rng):
    """n documents of one source in its order (a new permutation each epoch), EOS added."""
    return np.concatenate([lens[rng.permutation(len(lens))] for _ in range(n // len(lens) + 2)])[:n] + 1


def test_segments_read_every_token_once_each_chunk_a_run_of_the_order(lengths):
    rng = np.random.default_rng(0)
    q = stream(lengths[0], 300, rng)
    span = mixture_spec.chunk_span(spec.CHUNK_ROWS * L, (3, 7))
    seg = mp.segments(q, L, 3, span)
    covered = np.zeros(len(q), np.int64)
    np.add.at(covered, seg.doc, seg.hi - seg.lo)
    assert (covered == q).all() and (seg.lo % L == 0).all()
    assert (np.diff(seg.chunk) >= 0).all()  # chunks follow the order: each a run of it
    # A later start (its tokens before) tags as the whole stream does.
    later = mp.segments(q[100:], L, 3, span, before=int(q[:100].sum()))
    assert (later.chunk == seg.chunk[seg.doc >= 100]).all()


def test_each_chunk_holds_each_source_within_one_piece_of_its_rate(lengths):
    rng = np.random.default_rng(1)
    rates = (3, 7)
    span = mixture_spec.chunk_span(spec.CHUNK_ROWS * L, rates)
    per = []
    for s, (lens, n) in enumerate(zip(lengths, (1000, 20000), strict=True)):
        seg = mp.segments(stream(lens, n, rng), L, rates[s], span)
        per.append(np.bincount(seg.chunk, seg.hi - seg.lo)[:6])
    per = np.array(per)
    share = per / per.sum(0)
    assert np.abs(share[0] - 0.3).max() * per.sum(0).min() <= 2 * L


def chunk(lengths, seed):
    """A chunk of both sources' pieces placed source by source: (each row's source, its tokens)."""
    rng = np.random.default_rng(seed)
    parts = [
        mp.segments(stream(lens, n, rng), L, 1, 1 << 62) for lens, n in zip(lengths, (60, 600), strict=True)
    ]
    size = np.concatenate([p.hi - p.lo for p in parts])
    src = np.repeat([0, 1], [len(p.lo) for p in parts])
    placed = mp.chunk_rows(size, src, L, "first_fit")
    source = np.repeat([0, 1], [p.rows for p in placed])
    tokens = np.concatenate([np.bincount(p.row, p.length, p.rows) for p in placed]).astype(np.int64)
    return source, tokens, rng.permutation(len(source))


def prefix_off(source, tokens):
    done = np.cumsum(np.eye(2, dtype=np.int64)[source] * tokens[:, None], 0)
    share = done[-1] / done[-1].sum()
    return np.abs(done - np.outer(done.sum(1), share)).max()


def test_balanced_rows_hold_the_chunk_share_in_every_prefix_and_random_rows_do_not(lengths):
    source, tokens, perm = chunk(lengths, 3)
    order = mp.balanced_order(source, tokens, perm)
    assert sorted(order) == list(range(len(source)))
    assert prefix_off(source[order], tokens[order]) <= L
    assert prefix_off(source[perm], tokens[perm]) > 4 * L


def window_worst(lengths, weight: float = 0.3, B: int = 8, batches: int = 600, seed: int = 0) -> float:
    """The worst |share - weight| of the topics over windows of 100 batches of [B, L], the
    mixture as pieces.py describes it."""
    rng = np.random.default_rng(seed)
    rates = mixture_spec.rates([weight, 1 - weight])
    span = mixture_spec.chunk_span(spec.CHUNK_ROWS * L, rates)
    need = 2 * batches * B * L
    segs = [
        mp.segments(stream(lens, int(need * w / lens.mean()) + 50, rng), L, rates[s], span)
        for s, (lens, w) in enumerate(zip(lengths, (weight, 1 - weight), strict=True))
    ]
    rows = []
    for c in range(min(int(s.chunk[-1]) for s in segs)):
        size = np.concatenate([(s.hi - s.lo)[s.chunk == c] for s in segs])
        src = np.concatenate([np.full(int((s.chunk == c).sum()), k) for k, s in enumerate(segs)])
        placed = mp.chunk_rows(size, src, L, "first_fit")
        source = np.concatenate([np.full(p.rows, k) for k, p in zip(np.unique(src), placed, strict=True)])
        tokens = np.concatenate([np.bincount(p.row, p.length, p.rows) for p in placed]).astype(np.int64)
        order = mp.balanced_order(source, tokens, rng.permutation(len(source)))
        rows.append(np.eye(2, dtype=np.int64)[source[order]] * tokens[order][:, None])
        if sum(len(r) for r in rows) >= batches * B:
            break
    per = np.concatenate(rows)[: batches * B].reshape(batches, B, 2).sum(1)
    x = np.cumsum(np.vstack([[0, 0], per]), 0)
    w = x[100:] - x[:-100]
    return float(np.abs(w[:, 0] / w.sum(1) - weight).max())


def test_the_issue_target_in_numpy(lengths):
    """Every window of 100 batches of 8 x 128 within 0.5 point of the weights with pydoc's long
    topics weighted 0.3 (a choice per document strayed 21 points here)."""
    assert window_worst(lengths) < 0.005


def test_a_row_holds_one_source_and_fills_as_its_source_alone(lengths):
    source, tokens, _ = chunk(lengths, 5)
    assert tokens.max() <= L and set(source.tolist()) == {0, 1}
    alone = reference.place(np.concatenate([[L] * 3, [L // 2] * 4]), L, "first_fit")
    assert alone.rows == 5

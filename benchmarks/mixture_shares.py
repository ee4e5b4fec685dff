"""How far a text mixture's realised token share strays over windows of 100 batches (issue 35 A,
target 0.5 point), simulated in NumPy on real lengths: the design merged now against the
piece-level one proposed for it, so the choice is measured before it is built.

The data: the stdlib's docstrings (`tfpipe.synthetic.text.documents`, 701 of them) and pydoc's
topics (79 long documents), tokens approximated as characters / 4 (a BPE's ratio on English);
batches of B=8 rows of L=128, the topics weighted 0.3. Designs:

- "documents" (merged now): a choice per document, each block of 4,096 documents a random
  permutation of the sources' quotas (weight over mean document length); chunks of documents
  packed first-fit, rows shuffled within a chunk.
- "pieces": each source's documents (EOS added) cut into pieces of at most L, merged by their
  finish time in virtual time (a source's tokens so far over its weight: weighted fair
  queueing, so every prefix is within one piece of the weights, and a source's count at
  virtual time t is a search in its own cumulative lengths); chunks of CHUNK_ROWS x L units of
  virtual time, rows shuffled within a chunk.
- "pieces+balanced": the same, the rows of a chunk ordered so that every prefix of them holds
  each source's tokens in the chunk's proportion within one row (`mixture_pieces.balanced_order`).
  "documents+balanced": the merged design with that row order, to tell the two steps apart.

Run: python benchmarks/mixture_shares.py (TFPIPE_MIX_B, TFPIPE_MIX_L, TFPIPE_MIX_WEIGHT;
TFPIPE_MIX_LENGTHS=WEIGHTED_DIR,OTHER_DIR for two converted datasets' real lengths): seconds,
pure NumPy; prints each design's worst window and the standard deviation of the windows' share.
"""

from __future__ import annotations

import os

import numpy as np

from tfpipe.packing import reference, spec
from tfpipe.pipeline.mixture import pieces as mixture_pieces

B, L = int(os.environ.get("TFPIPE_MIX_B", "8")), int(os.environ.get("TFPIPE_MIX_L", "128"))
WINDOW, BATCHES = 100, 2000
WEIGHT = float(os.environ.get("TFPIPE_MIX_WEIGHT", "0.3"))  # of the topics


def lengths() -> tuple[np.ndarray, np.ndarray]:
    """(the weighted source's, the other's) document lengths: TFPIPE_MIX_LENGTHS=A,B reads two
    converted text datasets' lengths files (real tokenizer counts), else characters / 4."""
    import pydoc_data.topics

    from tfpipe.synthetic import text

    given = os.environ.get("TFPIPE_MIX_LENGTHS")
    if given:
        from tfpipe.format.manifest import Manifest
        from tfpipe.modalities.text.lengths import Lengths, load_lengths

        out = []
        for root in given.split(","):
            m = Manifest.load(root)
            t = m.split("train").text
            out.append(load_lengths(Lengths(m.lengths_path("train"), t.documents, t.tokens)))
        return out[0], out[1]
    docs = np.array([max(1, len(x) // 4) for x in text.documents(1400)[:701]], np.int64)
    topics = pydoc_data.topics.topics
    return np.array([max(1, len(topics[k]) // 4) for k in sorted(topics)], np.int64), docs


def source_stream(lens: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
    """n document lengths of one source in its order: a new permutation every epoch, EOS added."""
    epochs = -(-n // len(lens)) + 1
    return np.concatenate([lens[rng.permutation(len(lens))] for _ in range(epochs)])[:n] + 1


def rows_by_source(
    units: np.ndarray, src: np.ndarray, rng: np.random.Generator, balanced: bool
) -> np.ndarray:
    """A chunk's units (pieces, or whole documents) packed first-fit: [rows, 2] tokens of each
    source per row, in the rows' training order (random, or `mixture_pieces.balanced_order`)."""
    p = reference.place(units, L, "first_fit")
    out = np.zeros((p.rows, 2), np.int64)
    np.add.at(out, (p.row, src[p.doc]), p.length)
    order = rng.permutation(p.rows)
    return out[mixture_pieces.balanced_order(out, order) if balanced else order]


def documents_design(topics, docs, rng, balanced: bool = False) -> np.ndarray:
    means = np.array([topics.mean() + 1, docs.mean() + 1])
    probs = np.array([WEIGHT, 1 - WEIGHT]) / means
    from tfpipe.pipeline.mixture.spec import quotas as apportion

    q = apportion(list(probs))
    n = 4096 * 8
    choice = np.concatenate([rng.permutation(np.repeat([0, 1], q)) for _ in range(n // 4096)])
    streams = [source_stream(topics, rng, n), source_stream(docs, rng, n)]
    at = [0, 0]
    lens = np.empty(n, np.int64)
    for i, c in enumerate(choice):
        lens[i] = streams[c][at[c]]
        at[c] += 1
    size = spec.chunk_documents(L, float(lens.mean()))
    rows = [
        rows_by_source(lens[k : k + size], choice[k : k + size], rng, balanced) for k in range(0, n, size)
    ]
    return np.concatenate(rows)


def pieces_design(topics, docs, rng, balanced: bool) -> np.ndarray:
    from tfpipe.pipeline.mixture.spec import BLOCK, quotas

    q = quotas([WEIGHT, 1 - WEIGHT])
    n_tokens = B * L * BATCHES * 2
    pieces = [
        mixture_pieces.piece_lengths(source_stream(lens, rng, int(n_tokens * w / lens.mean()) + 10) - 1, L)
        for lens, w in ((topics, WEIGHT), (docs, 1 - WEIGHT))
    ]
    src, index = mixture_pieces.merge(pieces, q)
    keys = [mixture_pieces.finish(x, n) for x, n in zip(pieces, q, strict=True)]
    p, ends = np.zeros(len(src), np.int64), np.zeros(len(src), np.int64)
    for s in range(2):
        p[src == s], ends[src == s] = pieces[s][index[src == s]], keys[s][index[src == s]]
    chunk = ends // mixture_pieces.chunk_span(spec.CHUNK_ROWS * L, BLOCK)
    edges = np.flatnonzero(np.diff(chunk)) + 1
    rows = [
        rows_by_source(p[a:b], src[a:b], rng, balanced)
        for a, b in zip(np.r_[0, edges], np.r_[edges, len(p)], strict=True)
    ]
    return np.concatenate(rows)


def windows(rows: np.ndarray) -> tuple[float, float, float]:
    batches = rows[: (len(rows) // B) * B].reshape(-1, B, 2).sum(1)[:BATCHES]
    x = np.cumsum(np.vstack([[0, 0], batches]), 0)
    w = x[WINDOW:] - x[:-WINDOW]
    share = w[:, 0] / w.sum(1)
    fill = batches.sum() / (len(batches) * B * L)
    return float(np.abs(share - WEIGHT).max()), float(share.std()), float(fill)


def main() -> None:
    topics, docs = lengths()
    print(f"weighted source: {len(topics)} documents, mean {topics.mean():.0f} tokens; ", end="")
    print(f"the other: {len(docs)}, mean {docs.mean():.0f}")
    print(f"B={B} L={L}, windows of {WINDOW} batches over {BATCHES} batches, weight {WEIGHT}")
    for name, run in (
        ("documents", lambda r: documents_design(topics, docs, r)),
        ("documents+balanced", lambda r: documents_design(topics, docs, r, True)),
        ("pieces", lambda r: pieces_design(topics, docs, r, False)),
        ("pieces+balanced", lambda r: pieces_design(topics, docs, r, True)),
    ):
        got = [windows(run(np.random.default_rng(seed))) for seed in range(3)]
        worst = max(g[0] for g in got)
        std = np.mean([g[1] for g in got])
        fill = np.mean([g[2] for g in got])
        print(
            f"  {name:18s} worst window {100 * worst:5.2f} points, std {100 * std:5.2f}, fill {fill:.1%} (3 seeds)"
        )


if __name__ == "__main__":
    main()

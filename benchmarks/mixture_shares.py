"""How far a text mixture's realised token share strays over windows of 100 batches (issue 35 A,
target 0.5 point), simulated in NumPy on real lengths: the design of issue 35 (a choice per
document) against the one built for issue 45 (pieces in virtual time, rows of one source,
balanced: pipeline/mixture/pieces.py, the reference the graph is tested against).

The data: the stdlib's docstrings (`tfpipe.synthetic.text.documents`, 701 of them) and pydoc's
topics (79 long documents), tokens approximated as characters / 4 (a BPE's ratio on English);
batches of B=8 rows of L=128, the topics weighted 0.3. Designs:

- "documents" (issue 35): a choice per document, each block of 4,096 documents a random
  permutation of the sources' quotas (weight over mean document length); chunks of documents
  packed first-fit, rows shuffled within a chunk.
- "pieces" (built, issue 45): pieces of at most L merged by virtual time into chunks, each
  source's pieces packed on their own, the rows in `pieces.balanced_order`.

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


def _quotas(probabilities: list[float], block: int = 4096) -> list[int]:
    """Issue 35's quotas: each share of `block` documents, by largest remainder."""
    exact = [p / sum(probabilities) * block for p in probabilities]
    out = [int(x) for x in exact]
    for i in sorted(range(len(exact)), key=lambda i: -(exact[i] - out[i]))[: block - sum(out)]:
        out[i] += 1
    return out


def documents_design(topics, docs, rng) -> np.ndarray:
    means = np.array([topics.mean() + 1, docs.mean() + 1])
    q = _quotas(list(np.array([WEIGHT, 1 - WEIGHT]) / means))
    n = 4096 * 8
    choice = np.concatenate([rng.permutation(np.repeat([0, 1], q)) for _ in range(n // 4096)])
    streams = [source_stream(topics, rng, n), source_stream(docs, rng, n)]
    at = [0, 0]
    lens = np.empty(n, np.int64)
    for i, c in enumerate(choice):
        lens[i] = streams[c][at[c]]
        at[c] += 1
    size = spec.chunk_documents(L, float(lens.mean()))
    out = []
    for k in range(0, n, size):
        p = reference.place(lens[k : k + size], L, "first_fit")
        rows = np.zeros((p.rows, 2), np.int64)
        np.add.at(rows, (p.row, choice[k : k + size][p.doc]), p.length)
        out.append(rows[rng.permutation(p.rows)])
    return np.concatenate(out)


def pieces_design(topics, docs, rng) -> np.ndarray:
    from tfpipe.pipeline.mixture import spec as mixture_spec

    rates = mixture_spec.rates([WEIGHT, 1 - WEIGHT])
    span = mixture_spec.chunk_span(spec.CHUNK_ROWS * L, rates)
    need = 2 * B * L * BATCHES
    segs = [
        mixture_pieces.segments(source_stream(lens, rng, int(need * w / lens.mean()) + 10), L, rates[k], span)
        for k, (lens, w) in enumerate(((topics, WEIGHT), (docs, 1 - WEIGHT)))
    ]
    out = []
    for c in range(min(int(x.chunk[-1]) for x in segs)):
        size = np.concatenate([(x.hi - x.lo)[x.chunk == c] for x in segs])
        src = np.concatenate([np.full(int((x.chunk == c).sum()), k) for k, x in enumerate(segs)])
        placed = mixture_pieces.chunk_rows(size, src, L, "first_fit")
        source = np.concatenate([np.full(p.rows, k) for k, p in zip(np.unique(src), placed, strict=True)])
        tokens = np.concatenate([np.bincount(p.row, p.length, p.rows) for p in placed]).astype(np.int64)
        order = mixture_pieces.balanced_order(source, tokens, rng.permutation(len(source)))
        out.append(np.eye(2, dtype=np.int64)[source[order]] * tokens[order][:, None])
        if sum(len(o) for o in out) >= B * BATCHES:
            break
    return np.concatenate(out)


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
        ("pieces", lambda r: pieces_design(topics, docs, r)),
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

"""The fill of each packing mode (real tokens / slots), predicted from a split's length histogram
without reading the data, and the rows an epoch packs into. NumPy only: `describe()`, bench,
`build()` and `steps_per_epoch` call `predicted_fill` and `epoch_rows`, so they say one figure.

"none" is counted: every piece takes a row. "first_fit" and "concat" are simulated: documents
with the histogram's lengths, in a seeded random order (the training order is random), packed
chunk by chunk by the reference packer (reference.py), which gives the rows the pipeline's
packer gives. A large split is sampled: at most SAMPLED_CHUNKS chunks are packed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from tfpipe.errors import ConfigError
from tfpipe.packing import reference
from tfpipe.packing.spec import MODES, Mode, Spec, added_tokens, chunk_documents, chunk_size

# Chunks packed to predict one fill: enough that the prediction's spread is well under a point.
SAMPLED_CHUNKS = 64


def lengths_of(histogram: Mapping[str, Sequence[int]]) -> np.ndarray:
    """One length per document, from the histogram: a width-1 bin's lower bound; in a wider
    bin, its tokens shared out as evenly as whole tokens allow (the total is exact)."""
    try:
        lows = np.asarray(histogram["lengths"], np.int64)
        counts = np.asarray(histogram["counts"], np.int64)
        tokens = np.asarray(histogram["tokens"], np.int64)
    except KeyError as e:
        raise ConfigError(
            f"A length histogram has parallel lists 'lengths', 'counts' and 'tokens'. Missing: {e}"
        ) from None
    if not (len(lows) == len(counts) == len(tokens)) or (counts < 0).any():
        raise ConfigError(
            "A length histogram has parallel lists of one length and counts >= 0. Received lengths "
            f"of {len(lows)}, {len(counts)} and {len(tokens)} entries"
        )
    base, extra = np.divmod(tokens, np.maximum(counts, 1))
    per_bin = np.repeat(base, counts)
    # The first `extra` documents of a bin get one token more.
    rank = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    return per_bin + (rank < np.repeat(extra, counts))


def predict_fill(
    histogram: Mapping[str, Sequence[int]],
    sequence_length: int,
    mode: Mode,
    *,
    truncate: bool = False,
    eos: bool = False,
    chunk: int | None = None,
    seed: int = 0,
) -> float:
    """Predicted real tokens / slots of `mode` at `sequence_length` for a split.

    Args:
      histogram: the split's `length_histogram` (manifest `SplitText`).
      sequence_length: L.
      mode: "first_fit", "none" or "concat".
      truncate: only each document's first L tokens are kept.
      eos: an EOS is appended to each document (its length + 1).
      chunk: documents per chunk; None: `chunk_documents(L, mean length)`, as build() decides.
      seed: the order the documents are simulated in.

    Returns:
      The fill, in [0, 1] (0 for an empty split).
    """
    if mode not in MODES:
        raise ConfigError(f"mode must be one of {MODES}. Received: mode={mode!r}")
    L = sequence_length
    lengths = lengths_of(histogram) + int(eos)
    lengths = lengths[lengths > 0]
    if not len(lengths):
        return 0.0
    kept = np.minimum(lengths, L) if truncate else lengths
    if mode == "none":
        rows = len(lengths) if truncate else int((-(-lengths // L)).sum())
        return float(kept.sum() / (rows * L))
    size = chunk or chunk_documents(L, float(lengths.mean()))
    order = np.random.default_rng(seed).permutation(len(lengths))
    starts = np.arange(0, len(lengths), size)
    if len(starts) > SAMPLED_CHUNKS:
        starts = np.sort(np.random.default_rng(seed + 1).choice(starts, SAMPLED_CHUNKS, replace=False))
    real = slots = 0
    for s in starts:
        part = lengths[order[s : s + size]]
        real += int((np.minimum(part, L) if truncate else part).sum())
        slots += reference.place(part, L, mode, truncate).rows * L
    return real / slots


def shifted(histogram: Mapping[str, Sequence[int]], extra: int) -> dict[str, list[int]]:
    """The histogram of the documents as packed: `extra` tokens longer each (an EOS, or a
    classifier's [CLS] and [SEP])."""
    counts = list(histogram["counts"])
    return {
        "lengths": [lo + extra for lo in histogram["lengths"]],
        "counts": counts,
        "tokens": [t + extra * c for t, c in zip(histogram["tokens"], counts, strict=True)],
    }


def packed_lengths(spec: Spec) -> np.ndarray:
    """Each document's tokens as `spec` packs them, from its histogram: its own, the ones the
    pipeline adds (`added_tokens`), only the first L where it truncates. Empty without a
    histogram."""
    if not spec.histogram:
        return np.zeros(0, np.int64)
    lengths = lengths_of(shifted(spec.histogram, added_tokens(spec)))
    return np.minimum(lengths, spec.sequence_length) if spec.truncate else lengths


def predicted_fill(spec: Spec, sequence_length: int | None = None, mode: Mode | None = None) -> float:
    """The fill a pipeline packing as `spec` says gets, predicted from its histogram: with the
    tokens it adds to each document, its truncation and its chunk. The one prediction:
    `describe()` says it, bench reports it, `epoch_rows` counts by it.

    Args:
      spec: how the pipeline packs (the text preset's `TextPacking`).
      sequence_length: another L (bench's suggested length), at the chunk `build()` would
        choose there. None: `spec.sequence_length`.
      mode: another mode (bench's alternatives). None: `spec.mode`.

    Returns:
      The fill, in [0, 1]; 0 without a histogram or documents.
    """
    if not spec.histogram:
        return 0.0
    L = spec.sequence_length if sequence_length is None else sequence_length
    return predict_fill(
        shifted(spec.histogram, added_tokens(spec)),
        L,
        spec.mode if mode is None else mode,
        truncate=spec.truncate,
        chunk=chunk_size(spec, L),
    )


def epoch_rows(spec: Spec) -> int:
    """Rows (packed sequences of L tokens) one pass over a split packs into, predicted from its
    length histogram as the pipeline packs it (`predicted_fill`). 0 without a histogram.

    The one count of an epoch's rows: `build()` refuses a batch larger than it (as it refuses
    a batch larger than an epoch of records), `steps_per_epoch` divides it, `bench` reports it.
    """
    if not spec.histogram or not sum(spec.histogram.get("counts", ())):
        return 0
    fill = predicted_fill(spec)
    tokens = int(packed_lengths(spec).sum())
    return round(tokens / (fill * spec.sequence_length)) if fill else 0

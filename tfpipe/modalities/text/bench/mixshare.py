"""A text mixture's realised share of real tokens by source, counted over bench's batches.

Each packed row carries its real tokens by source (MIXTURE_TOKENS of the text modality's
mixture/pack.py, dropped by the batch stage; `mixture_pack.counting` batches the pack stage's rows alike), so the
counting pass that measures the fill (measure.py) sums them batch by batch in the same
pass: each source's share beside its weight, and the worst window of WINDOW consecutive
batches. Every row's counts are checked against its real tokens
(segment id not 0) there: a row that disagrees is refused as a bug.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from tfpipe.bench.results import MixShare
from tfpipe.errors import DataError
from tfpipe.modalities.text.mixture import pack as mixture_pack
from tfpipe.modalities.text.mixture.pack import MIXTURE_TOKENS

if TYPE_CHECKING:
    from tfpipe._tf import Tensor
    from tfpipe.pipeline.mixture.pipeline import MixturePipeline

# Batches a window holds: the "every window of 100 batches within 0.5 point".
WINDOW = 100


def by_source(rows: Mapping[str, Tensor]) -> npt.NDArray[np.int64]:
    """A batch's real tokens by source (int64 `[sources]`), each row's checked against its real
    tokens (segment id not 0).

    Raises:
      DataError: a row's tokens by source do not sum to its real tokens.
    """
    counts = rows[MIXTURE_TOKENS].numpy().astype(np.int64)
    real = (rows["segment_ids"].numpy() != 0).sum(1)
    wrong = np.flatnonzero(counts.sum(1) != real)
    if wrong.size:
        i = int(wrong[0])
        raise DataError(
            f"bench lost track of the mixture's rows: a row holds {real[i]} real tokens, its tokens by "
            f"source {counts[i].tolist()}. This is a bug in tfpipe (modalities/text/mixture/pack.py), not in the data; "
            "please report it."
        )
    return counts.sum(0)


def worst_windows(
    per_batch: npt.NDArray[np.int64], weights: Sequence[float], window: int
) -> npt.NDArray[np.float64]:
    """Each source's most |share - weight| (points) over every window of `window` consecutive
    batches of `per_batch` (`[batches, sources]` real tokens)."""
    totals = np.cumsum(np.vstack([np.zeros_like(per_batch[:1]), per_batch]), 0)
    tokens = totals[window:] - totals[:-window]
    shares = tokens / np.maximum(1, tokens.sum(1, keepdims=True))
    return 100 * np.abs(shares - np.asarray(weights)).max(0)


def shares(pipe: MixturePipeline, per_batch: npt.ArrayLike) -> tuple[MixShare, ...]:
    """Each source's real tokens over the counted batches (`[batches, sources]`, from step 0),
    its epoch at the last and its worst window."""
    mix = pipe.mixture
    assert mix is not None
    per_batch = np.asarray(per_batch, np.int64).reshape(-1, len(mix.names))
    window = min(WINDOW, len(per_batch))
    worst = worst_windows(per_batch, mix.weights, window) if window else np.zeros(len(mix.names))
    epochs = pipe.epochs_at(len(per_batch))
    return tuple(
        MixShare(name=n, weight=w, real_tokens=int(c), epoch=epochs[n], worst_window=float(x), window=window)
        for n, w, c, x in zip(mix.names, mix.weights, per_batch.sum(0), worst, strict=True)
    )


def window_shares(pipe: MixturePipeline, *, batches: int, window: int) -> npt.NDArray[np.float64]:
    """Each source's share of the real tokens in every window of `window` consecutive batches
    among the first `batches` (from step 0): a float NumPy array `[batches - window + 1,
    sources]`, from one pass over the pipeline's batches. Exact for the seed (the order is a
    function of it), not a measure of speed."""
    ds = mixture_pack.counting(pipe)
    per_batch = np.array([by_source(rows) for rows in ds.take(batches)], np.int64)
    totals = np.cumsum(np.vstack([np.zeros_like(per_batch[:1]), per_batch]), 0)
    tokens = totals[window:] - totals[:-window]
    return tokens / tokens.sum(1, keepdims=True)


def totals(pipe: MixturePipeline) -> tuple[int, int]:
    """(documents, tokens) of all the mixture's sources' splits, from their manifests."""
    texts: list[Any] = [p.source.manifest.split(p.source.split).text for p in pipe.parts]  # type: ignore[union-attr, arg-type]
    return sum(int(t.documents) for t in texts), sum(int(t.tokens) for t in texts)

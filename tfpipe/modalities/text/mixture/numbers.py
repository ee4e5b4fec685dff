"""A text mixture's own numbers, from the mix (each source weighted by its share), not from its
first source: its length histogram, its predicted fill and the rows and steps of one of its
epochs.
NumPy only; describe(), build()'s batch check, steps_per_epoch and bench read them.

- The histogram: each source's share of the mixed documents drawn evenly from its own
  histogram (a document's share is its weight over its mean length for weights in tokens).
- The fill: by tokens each row holds one source (mixture/pack.py), so the mixture fills as its
  sources fill alone, each packing its share of a chunk: `sum(w) / sum(w / fill_s)` in rows. By
  documents the chunk's documents pack together: the fill predicted from the mixed histogram.
- An epoch of a mixture: until every source has been read whole at least once, i.e. one epoch
  of the source that takes longest at its weight (its size over its weight). The source that
  runs out first would end an epoch before most of the larger sources was read; the longest
  one is the shortest stretch in which every document of the mixture is trained on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from tfpipe.format.manifest_text import length_bin
from tfpipe.packing import fill
from tfpipe.packing.spec import CHUNK_ROWS, added_tokens
from tfpipe.pipeline.mixture.spec import MixSpec

if TYPE_CHECKING:
    from tfpipe.modalities.text.stages import TextPacking
    from tfpipe.packing.spec import Mode
    from tfpipe.pipeline.stages.pipeline import Pipeline

# Documents the mixed histogram is drawn for, at most: its percentiles and fill need no more.
MAX_DOCUMENTS = 1 << 20


@dataclasses.dataclass(frozen=True)
class SourceText:
    """One text source as the mixture weighs it.

    Attributes:
      histogram: its split's length histogram (manifest).
      tokens: its tokens an epoch as packed (EOS or [CLS]/[SEP] added, truncation applied).
      documents: its documents an epoch.
    """

    histogram: Mapping[str, Sequence[int]]
    tokens: int
    documents: int

    @property
    def mean(self) -> float:
        return self.tokens / self.documents if self.documents else 0.0


def document_shares(mix: MixSpec, sources: Sequence[SourceText]) -> list[float]:
    """Each source's share of the mixed documents: its weight over its mean length as packed
    (weights in tokens), else its weight."""
    if mix.mix_by != "tokens":
        return mix.shares()
    raw = [w / s.mean if s.mean else 0.0 for w, s in zip(mix.shares(), sources, strict=True)]
    return [x / sum(raw) for x in raw]


def histogram(sources: Sequence[SourceText], shares: Sequence[float]) -> dict[str, list[int]]:
    """The mixed documents' length histogram (as the manifest keeps one: `length_bin`'s bins):
    each source's share of them drawn evenly over its own lengths, sorted."""
    total = min(MAX_DOCUMENTS, sum(s.documents for s in sources))
    drawn = []
    for s, share in zip(sources, shares, strict=True):
        own = fill.lengths_of(s.histogram)
        n = round(share * total)
        if n and len(own):
            drawn.append(own[((np.arange(n) + 0.5) * len(own) / n).astype(np.int64)])
    lengths = np.concatenate(drawn) if drawn else np.zeros(0, np.int64)
    bins = np.array([length_bin(int(n)) for n in lengths], np.int64)
    lows, index = np.unique(bins, return_inverse=True)
    return {
        "lengths": lows.tolist(),
        "counts": np.bincount(index, minlength=len(lows)).tolist(),
        "tokens": np.bincount(index, lengths, minlength=len(lows)).astype(np.int64).tolist(),
    }


def chunk_tokens(pack: TextPacking, mean: float) -> int:
    """Tokens (as packed) a chunk of the mixture spans: `chunk` documents of the mixture's
    mean length when given, else CHUNK_ROWS rows' worth."""
    L = pack.sequence_length
    return max(L, round(pack.chunk * mean)) if pack.chunk else CHUNK_ROWS * L


def token_fill(
    pack: TextPacking,
    mix: MixSpec,
    parts: Sequence[Pipeline],
    sources: Sequence[SourceText],
    L: int,
    mode: Mode,
) -> float:
    """The fill of a mixture by tokens (rows of one source each) at L in `mode`: each source's
    fill alone on its share of a chunk (`fill.predict_fill`), combined by its rows."""
    mean = sum(w * s.mean for w, s in zip(document_shares(mix, sources), sources, strict=True))
    span = chunk_tokens(
        pack if pack.sequence_length == L else dataclasses.replace(pack, sequence_length=L, chunk=None), mean
    )
    rows = 0.0
    for w, part, s in zip(mix.shares(), parts, sources, strict=True):
        own = part.decoder.packing
        per_chunk = max(1, round(span * w / s.mean)) if s.mean else 1
        f = fill.predict_fill(
            fill.shifted(own.histogram, added_tokens(own)), L, mode, truncate=own.truncate, chunk=per_chunk
        )
        rows += w / f if f else 0.0
    return 1.0 / rows if rows else 0.0


def epoch_tokens(mix: MixSpec, sources: Sequence[SourceText]) -> float:
    """Tokens (as packed) of one epoch of the mixture: until the source that takes longest at its
    weight has been read whole (`document_shares` for weights in documents)."""
    if mix.mix_by == "tokens":
        return max(s.tokens / w for w, s in zip(mix.shares(), sources, strict=True))
    docs = max(s.documents / w for w, s in zip(mix.shares(), sources, strict=True))
    return docs * sum(w * s.mean for w, s in zip(mix.shares(), sources, strict=True))

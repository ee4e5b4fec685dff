"""A weighted mixture's choice function, in closed form and exact (mixture version 2).

Each source `s` has an integer *rate* `n_s`: the weights as exact ratios (0.3/0.7 is 3:7,
1/3 stays a third; `rates`). Every item of a source has a *virtual time*: the midpoint of its
share of the source's work so far, over the source's rate (weighted fair queueing). The mixed
stream is every source's items in order of virtual time, ties to the earlier source. Two kinds
of items:

- elements (records for images and tables, documents with `mix_by="documents"`): item `k` of
  source `s` is at `(2k + 1) / (2 n_s)`, the divisor method of Sainte-Lague / Webster. Its
  global position is a sum of integer divisions (`position`), and each source's count before
  a global position a search (`counts`); both are exact in int64 (`RATE_TOTAL` bounds the
  products). Every prefix holds each source within 1/2 element of its weight's share for two
  sources; within one element for three (no counter-example in 3,000 random weight vectors,
  tests/pipeline/mixture/test_spec.py); a divisor method can stray further with four or more
  sources and one dominant (1.4 elements measured), as Balinski and Young showed.
- pieces (text, weights in tokens): each source's documents in its own order, as packed (EOS
  added), cut into pieces of at most L tokens; a piece of `u` tokens after `a` earlier tokens
  of its source is at `((2a + u) << (SCALE_BITS - 1)) // n_s` (`piece_time`). A *chunk* is a
  span of virtual time (`chunk_span`), so each source's pieces in a chunk are a contiguous run
  of its order, its tokens within one piece of its rate's share of the chunk.

Nothing here depends on hosts or input pipelines: the mixed stream is a function of the
sources' orders, the rates and the position.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from types import ModuleType
from typing import Any, Literal, TypeAlias, TypeVar

import numpy as np
import numpy.typing as npt

from tfpipe._tf import Tensor
from tfpipe.errors import ConfigError
from tfpipe.validation import finite_real

MixBy = Literal["tokens", "documents", "records"]
# 2: pieces of text in virtual time and exact element merges (issue 45); 1 (implied by a
# Position without it): a choice per document in permuted blocks of 4,096 (issue 35).
MIXTURE_VERSION = 2
# The rates' sum stays at most this, so every product in `position` fits int64 (2 n_r n_s <
# 2**49) and a weight's denominator is exact up to it; larger ratios (default weights: the
# sources' token counts) are rounded to it, 1 part in 16.7 million.
RATE_TOTAL = 1 << 24
# Virtual time of pieces is tokens << SCALE_BITS over a rate: integer, in int64 while a source
# has fewer than 2**43 tokens (8.8e12) behind it.
SCALE_BITS = 20
MAX_SOURCE_TOKENS = 1 << 43
# Elements per block of the element merges (records, documents): a block is a few hundred
# kilobytes of records, its sources' counts in it a function of the block.
BLOCK = 4096


@dataclasses.dataclass(frozen=True, slots=True)
class MixSpec:
    """What a mixture's choice of source per item is a function of.

    Attributes:
      names: the sources' names, in the order the mapping gave them.
      weights: each source's weight, normalised to sum to 1, in `mix_by` units.
      mix_by: "tokens" (text), "documents" (text) or "records" (images, tables).
      rates: each source's rate: the weights as exact integer ratios (`rates`).
      seed: the mixture's seed (the pipeline's).
    """

    names: tuple[str, ...]
    weights: tuple[float, ...]
    mix_by: MixBy
    rates: tuple[int, ...]
    seed: int

    @property
    def total(self) -> int:
        return sum(self.rates)

    def identity(self) -> dict[str, Any]:
        return {"names": list(self.names), "rates": list(self.rates), "mix_by": self.mix_by}

    def shares(self) -> list[float]:
        """Each source's share in `mix_by` units (what the weights became: exact up to
        RATE_TOTAL)."""
        return [n / self.total for n in self.rates]


def source_seed(seed: int, name: str) -> int:
    """The seed of one source's order: unrelated for each name, so two sources of the same
    shard counts do not share their permutations."""
    digest = hashlib.sha256(f"tfpipe-mixture:{seed}:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def check_weights(names: Sequence[str], weights: object) -> dict[str, float] | None:
    """The weights as a dict of positive finite floats by name, or None (the sources' sizes).

    Raises:
      ConfigError: not a mapping, a name that is not a source or a source without a weight,
        a weight that is not a positive finite number.
    """
    if weights is None:
        return None
    if not isinstance(weights, Mapping):
        raise ConfigError(
            f"weights must be a mapping of source name to weight, e.g. {{'web': 0.7, 'code': 0.3}}. "
            f"Received: {type(weights).__name__} {weights!r}"
        )
    extra, missing = sorted(set(weights) - set(names)), sorted(set(names) - set(weights))
    if extra or missing:
        raise ConfigError(
            f"weights must name each source of the mixture once: {list(names)}. Received: "
            + "; ".join(
                part
                for part in (
                    f"unknown {extra}" if extra else "",
                    f"no weight for {missing}" if missing else "",
                )
                if part
            )
        )
    out = {}
    for name in names:
        w = weights[name]
        if not (finite_real(w) and w > 0):  # a real number of any type (NumPy's too), not a bool
            raise ConfigError(f"weights[{name!r}] must be a finite number > 0. Received: {w!r}")
        out[name] = float(w)
    return out


def rates(weights: Sequence[float]) -> tuple[int, ...]:
    """The weights as integer rates in their exact ratio: each weight read as the simplest
    fraction of denominator at most 10**6 within 1e-12 of it (0.3 is 3/10, 1/3 a third), over
    a common denominator, divided by their greatest common divisor. Rates summing to more than
    RATE_TOTAL are rounded to it by largest remainder (1 part in 16.7 million).

    Raises:
      ConfigError: a weight under one part in RATE_TOTAL of the sum.
    """
    fractions = [Fraction(w).limit_denominator(10**6) for w in weights]
    fractions = [
        f if abs(float(f) - w) <= 1e-12 * w else Fraction(w) for f, w in zip(fractions, weights, strict=True)
    ]
    denominator = math.lcm(*(f.denominator for f in fractions))
    ints = [int(f * denominator) for f in fractions]
    divisor = math.gcd(*ints)
    ints = [n // divisor for n in ints]
    if sum(ints) > RATE_TOTAL:
        ints = list(_apportion(ints, RATE_TOTAL))
    return tuple(ints)


def _apportion(parts: Sequence[int], total: int) -> tuple[int, ...]:
    """`total` shared by `parts`, by largest remainder (ties to the earlier part)."""
    whole = sum(parts)
    out = [p * total // whole for p in parts]
    order = sorted(range(len(parts)), key=lambda i: (-(parts[i] * total % whole), i))
    for i in order[: total - sum(out)]:
        out[i] += 1
    return tuple(out)


def make(names: Sequence[str], weights: Mapping[str, float], mix_by: MixBy, seed: int) -> MixSpec:
    """The mixture's spec: the weights normalised and turned into exact rates.

    Raises:
      ConfigError: a weight under one part in RATE_TOTAL of their sum.
    """
    total = sum(weights.values())
    norm = tuple(weights[n] / total for n in names)
    r = rates([weights[n] for n in names])
    for name, n, w in zip(names, r, norm, strict=True):
        if n == 0:
            raise ConfigError(
                f"weights[{name!r}] is {w:.2g} of the mixture: less than one part in {RATE_TOTAL:,}, "
                "the mixture's finest rate. Raise it, or leave the source out."
            )
    return MixSpec(tuple(names), norm, mix_by, r, int(seed))


# Elements (records, documents): exact positions in the Webster merge.

# An item index or an array of them; a position or an array of them (int64).
Index: TypeAlias = int | npt.NDArray[np.int64]
Positions: TypeAlias = np.int64 | npt.NDArray[np.int64]


def period_position(rates: Sequence[int], s: int, k: Index) -> Positions:
    """The position of item `k` (< rates[s]; an int or int64 NumPy array) of source `s` in one
    period of the merge (rates' sum items, each source `rates[r]` of them): the items of every
    source at an earlier virtual time, ties to the earlier source."""
    n = np.asarray(rates, np.int64)
    k = np.asarray(k, np.int64)
    x = (2 * k[..., None] + 1) * n  # (2k + 1) n_r, compared with (2j + 1) n_s
    before = np.where(np.arange(len(n)) < s, (x // n[s] + 1) // 2, ((x - 1) // n[s] + 1) // 2)
    before[..., s] = k
    return before.sum(-1)


def position(rates: Sequence[int], s: int, k: Index) -> Positions:
    """The global position of item `k` of source `s` (NumPy, exact): whole periods, then its
    place in the period."""
    q, r = np.divmod(np.asarray(k, np.int64), rates[s])
    return q * sum(rates) + period_position(rates, s, r)


def counts(rates: Sequence[int], g: int) -> list[int]:
    """Each source's items before global position `g` (exact): whole periods, then a search
    of the period's positions."""
    q, r = divmod(int(g), sum(rates))
    out = []
    for s, n in enumerate(rates):
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi) // 2
            if int(period_position(rates, s, mid)) < r:
                lo = mid + 1
            else:
                hi = mid
        out.append(q * n + lo)
    return out


def tf_position(tf_: ModuleType, rates: Sequence[int], s: int, k: Tensor) -> Tensor:
    """`position` in TensorFlow (int64 `k` of any shape): what the stream computes."""
    n = tf_.constant(rates, tf_.int64)
    q, r = k // rates[s], k % rates[s]
    x = (2 * r[..., None] + 1) * n
    earlier = tf_.range(len(rates), dtype=tf_.int64) < s
    before = tf_.where(earlier, (x // rates[s] + 1) // 2, ((x - 1) // rates[s] + 1) // 2)
    own = tf_.one_hot(s, len(rates), dtype=tf_.int64)
    before = before * (1 - own) + r[..., None] * own
    return q * sum(rates) + tf_.reduce_sum(before, -1)


def tf_counts(tf_: ModuleType, rates: Sequence[int], g: Tensor) -> Tensor:
    """`counts` in TensorFlow: int64 `[sources]` items before global position `g` (a scalar
    tensor), each source's search over its period run at once (25 halvings bound any rate)."""
    total = sum(rates)
    q, r = g // total, g % total
    n = tf_.constant(rates, tf_.int64)
    lo, hi = tf_.zeros_like(n), n

    def halve(lo: Tensor, hi: Tensor) -> tuple[Tensor, Tensor]:
        mid = (lo + hi) // 2
        at = tf_.stack([tf_position(tf_, rates, s, tf_.gather(mid, s) % rates[s]) for s in range(len(rates))])
        below = tf_.logical_and(at < r, lo < hi)
        return tf_.where(below, mid + 1, lo), tf_.where(tf_.logical_and(~below, lo < hi), mid, hi)

    lo, _ = tf_.while_loop(
        lambda lo, hi: tf_.reduce_any(lo < hi), halve, (lo, hi), maximum_iterations=RATE_TOTAL.bit_length()
    )
    return q * n + lo


# Pieces (text by tokens): virtual time.

# Token counts (int64): a Python int, a NumPy array or a TensorFlow tensor (to mypy, Any).
Tokens = TypeVar("Tokens", int, npt.NDArray[np.int64])


def piece_time(before: Tokens, length: Tokens, rate: int) -> Tokens:
    """The virtual time of a piece of `length` tokens after `before` tokens of its source (int64,
    NumPy or TensorFlow alike): the midpoint of its tokens, scaled, over the rate."""
    return (2 * before + length) * (1 << (SCALE_BITS - 1)) // rate


def chunk_span(chunk_tokens: int, rates: Sequence[int]) -> int:
    """Virtual time a chunk spans: all sources together advance `sum(rates)` tokens per
    `1 << SCALE_BITS` of it, so a chunk holds about `chunk_tokens` tokens."""
    return max(1, (chunk_tokens << SCALE_BITS) // sum(rates))

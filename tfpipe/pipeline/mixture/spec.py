"""A weighted mixture's choice function: which source each global position takes, in closed form.

The mixed stream's positions (documents for text, records for other data) come in *blocks* of
`BLOCK` positions. Each source `s` has a quota `n_s` of every block (the weights turned into
shares of positions, apportioned by largest remainder), and a block's positions are the quotas'
sources permuted by one stateless Philox shuffle keyed by the mixture's seed and the block's
index. So the source of position `g` and each source's count of positions before `g` are
functions of `g` alone:

    count_s(g) = (g // BLOCK) * n_s + #{i < g % BLOCK : block(g // BLOCK)[i] == s}

and each source's stream (its own resumable order, order/resumable.py) starts at `count_s(g)`: a mixture
resumes as exactly as one source does, with nothing more to save than the step. A source's
epoch at `g` is `count_s(g) // its records (documents) per epoch`: a small source repeats
(up-sampled) while the large ones go on.

Weights for text are in tokens: a source's share of positions (documents) is its weight over
its mean document length (tokens, with the EOS the pipeline adds), so its expected share of the
tokens is its weight. With `mix_by="documents"` (text) and for records they are shares of
positions as given.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from tfpipe._tf import tf
from tfpipe.errors import ConfigError
from tfpipe.pipeline.order.resumable import KEY_FILES, domain_key
from tfpipe.pipeline.order.stream import permutation
from tfpipe.validation import finite_real

MixBy = Literal["tokens", "documents", "records"]
# Positions per block: a source's share of positions is its quota over BLOCK, within 1/BLOCK of
# its weight's (0.02 points), and its count at any position is one permutation away.
BLOCK = 4096
# The key part of the mixture's choices: input pipelines' parts are their index (< 2**20), so
# this one is never an input pipeline's (order.domain_key folds seed, part and domain).
MIX_PART = (1 << 20) - 1


@dataclasses.dataclass(frozen=True, slots=True)
class MixSpec:
    """What a mixture's choice of source per position is a function of.

    Attributes:
      names: the sources' names, in the order the mapping gave them.
      weights: each source's weight, normalised to sum to 1, in `mix_by` units.
      mix_by: "tokens" (text), "documents" (text) or "records" (images, tables).
      unit: each source's mean tokens per position ("tokens"), else 1s.
      quotas: each source's positions in every block of BLOCK.
      seed: the mixture's seed (the pipeline's).
    """

    names: tuple[str, ...]
    weights: tuple[float, ...]
    mix_by: MixBy
    unit: tuple[float, ...]
    quotas: tuple[int, ...]
    seed: int

    @property
    def key(self) -> int:
        return domain_key(self.seed, KEY_FILES, MIX_PART)

    @property
    def base(self) -> list[int]:
        """The sources of one block before its permutation: quota_s copies of s, in order."""
        return [s for s, n in enumerate(self.quotas) for _ in range(n)]

    def identity(self) -> dict[str, Any]:
        return {"names": list(self.names), "quotas": list(self.quotas), "mix_by": self.mix_by, "block": BLOCK}

    def shares(self) -> list[float]:
        """Each source's expected share in `mix_by` units from the quotas (what the weights became)."""
        amounts = [n * u for n, u in zip(self.quotas, self.unit, strict=True)]
        return [a / sum(amounts) for a in amounts]


def source_seed(seed: int, name: str) -> int:
    """The seed of one source's order: unrelated for each name, so two sources of the same
    shard counts do not share their permutations."""
    digest = hashlib.sha256(f"tfpipe-mixture:{seed}:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def check_weights(names: Sequence[str], weights: Any) -> dict[str, float] | None:
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


def quotas(probabilities: Sequence[float], block: int = BLOCK) -> tuple[int, ...]:
    """Each share of `block` positions, by largest remainder (ties to the earlier source).

    Raises:
      ConfigError: a share under one position a block.
    """
    total = sum(probabilities)
    exact = [p / total * block for p in probabilities]
    out = [math.floor(x) for x in exact]
    order = sorted(range(len(exact)), key=lambda i: (-(exact[i] - out[i]), i))
    for i in order[: block - sum(out)]:
        out[i] += 1
    return tuple(out)


def make(
    names: Sequence[str],
    weights: Mapping[str, float],
    mix_by: MixBy,
    unit: Sequence[float],
    seed: int,
) -> MixSpec:
    """The mixture's spec: positions shared by weight over unit (a source's mean tokens a
    document for mix_by="tokens", else 1).

    Raises:
      ConfigError: a weight too small for one position in BLOCK.
    """
    total = sum(weights.values())
    norm = tuple(weights[n] / total for n in names)
    q = quotas([w / u for w, u in zip(norm, unit, strict=True)])
    for name, n, w in zip(names, q, norm, strict=True):
        if n == 0:
            raise ConfigError(
                f"weights[{name!r}] is {w:.2g} of the mixture: less than one {mix_by[:-1]} in "
                f"{BLOCK}, the mixture's block. Raise it, or leave the source out."
            )
    return MixSpec(tuple(names), norm, mix_by, tuple(float(u) for u in unit), q, int(seed))


def block_choices(spec: MixSpec, block: int) -> list[int]:
    """The sources of block `block`'s positions, in plain Python (`order_stream.permutation`
    run eagerly): what the graph computes, for tests and `counts`."""
    tf_ = tf()
    perm = permutation(tf_, BLOCK, tf_.constant([spec.key, block], tf_.int64)).numpy()
    base = spec.base
    return [base[i] for i in perm]


def counts(spec: MixSpec, position: int) -> list[int]:
    """Each source's positions before global position `position` (closed form)."""
    b, i = divmod(position, BLOCK)
    head = block_choices(spec, b)[:i] if i else []
    return [b * n + head.count(s) for s, n in enumerate(spec.quotas)]

"""A mixture's choice function (pipeline/mixture/spec.py): the weights as exact rates, the element
merge's positions and counts (NumPy and TensorFlow alike), and every prefix within one element
of the weights. Integers and NumPy, plus a few eager TensorFlow calls."""

from __future__ import annotations

import numpy as np
import pytest

from tfpipe.errors import ConfigError
from tfpipe.pipeline.mixture import spec


def test_rates_are_the_weights_in_their_exact_ratio():
    assert spec.rates([0.3, 0.7]) == (3, 7)
    assert spec.rates([0.2, 0.5, 0.3]) == (2, 5, 3)
    assert spec.rates([1 / 3, 2 / 3]) == (1, 2)
    assert spec.rates([2, 4]) == (1, 2)
    assert spec.rates([990_584, 105_677, 1_097_969]) == (990_584, 105_677, 1_097_969)
    big = spec.rates([1e12, 3e12 + 1, 7.0])  # past RATE_TOTAL: rounded to it, 1 part in 16.7M
    assert sum(big) == spec.RATE_TOTAL and big[1] / big[0] == pytest.approx(3, rel=1e-6)


def test_a_weight_under_one_part_in_the_finest_rate_is_refused():
    with pytest.raises(
        ConfigError, match=r"weights\['a'\] is 1e-09 of the mixture: less than one part in 16,777,216"
    ):
        spec.make(["a", "b"], {"a": 1e-9, "b": 1.0}, "records", 0)


def sequence(rates, periods=3):
    """The merged sources, position by position, from `spec.position`."""
    out = np.full(periods * sum(rates), -1)
    for s, n in enumerate(rates):
        out[spec.position(rates, s, np.arange(periods * n))] = s
    return out


def test_positions_are_a_permutation_and_counts_invert_them():
    rng = np.random.default_rng(0)
    for _ in range(100):
        rates = tuple(int(x) for x in rng.integers(1, 60, rng.integers(2, 6)))
        seq = sequence(rates)
        assert (seq >= 0).all()  # every position taken once
        for g in rng.integers(0, len(seq), 5):
            assert spec.counts(rates, int(g)) == [int((seq[:g] == s).sum()) for s in range(len(rates))]


def test_tensorflow_computes_the_same_positions_and_counts():
    tf = pytest.importorskip("tensorflow")
    for rates in [(3, 7), (2, 5, 3), (990_584, 105_677, 1_097_969)]:
        k = tf.range(50, dtype=tf.int64) * 7919
        for s in range(len(rates)):
            assert (spec.tf_position(tf, rates, s, k).numpy() == spec.position(rates, s, k.numpy())).all()
        for g in (0, 1, 9, 10, 11, 12345, 10**12 + 7):
            assert spec.tf_counts(tf, rates, tf.constant(g, tf.int64)).numpy().tolist() == spec.counts(
                rates, g
            )


def stray(rates):
    """The most any source's count strays from its weight's share over every prefix."""
    seq = sequence(rates, periods=2)
    share = np.array(rates) / sum(rates)
    counts = np.cumsum(seq[:, None] == np.arange(len(rates)), 0)
    return np.abs(counts - np.outer(np.arange(1, len(seq) + 1), share)).max()


def test_every_prefix_holds_each_source_within_one_element():
    """Two sources: within half an element (a Sturmian word); three: within one, here over 1,500
    weight vectors half of them with one dominant source (the divisor method of Sainte-Lague
    can exceed one element from four sources on, which the docs say)."""
    rng = np.random.default_rng(1)
    assert max(stray(tuple(int(x) for x in rng.integers(1, 500, 2))) for _ in range(300)) <= 0.5 + 1e-9
    worst = 0.0
    for t in range(1500):
        rates = [int(x) for x in rng.integers(1, 60, 3)]
        if t % 2:
            rates[0] = int(rng.integers(1, 40)) * sum(rates)
        worst = max(worst, stray(tuple(rates)))
    assert worst < 1, worst


def test_a_piece_time_is_the_midpoint_of_its_tokens_over_the_rate():
    assert spec.piece_time(0, 100, 1) == 100 << (spec.SCALE_BITS - 1)
    assert spec.piece_time(100, 100, 2) == (300 << (spec.SCALE_BITS - 1)) // 2
    assert spec.chunk_span(1 << 20, (3, 7)) == (1 << 40) // 10

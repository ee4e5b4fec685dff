"""The resumable order in plain Python (`resumable.records`), tested on integers: a table of small
orders written out by hand, the properties every order has, and one TensorFlow test that the
graph (`order_stream.stream`) yields exactly what the plain form says."""

from __future__ import annotations

import dataclasses
import itertools
import random

import pytest

from tfpipe.pipeline.order import resumable
from tfpipe.pipeline.order.resumable import OrderSpec

from support.order_spec import spec
from support.pipeline_data import N_ROWS


def identity(n, _seed):
    return range(n)


def reverse(n, _seed):
    return range(n - 1, -1, -1)


def seeded(n, seed):
    """A permutation that depends on the seed, as TensorFlow's does."""
    perm = list(range(n))
    random.Random(hash(seed)).shuffle(perm)
    return perm


def take(s: OrderSpec, shuffle, n: int, start: int = 0) -> list[tuple[int, int]]:
    return [(p.file, p.record) for p in itertools.islice(resumable.records(s, start, shuffle), n)]


# (spec, shuffle, the first records as (file, record)): each row worked out by hand.
TABLE = [
    # Two files in one group, runs of 1: round-robin, then the longer file alone.
    (spec((3, 2)), identity, [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2)]),
    # Runs of 2 records from each file in turn.
    (spec((3, 2), run=2), identity, [(0, 0), (0, 1), (1, 0), (1, 1), (0, 2)]),
    # Groups of one file: each file whole, in file order; then epoch 1 does it again.
    (spec((2, 2), cycle=1), identity, [(0, 0), (0, 1), (1, 0), (1, 1), (0, 0)]),
    # Reversed: the files (1 before 0) and each window (of 2) permuted backwards.
    (spec((2, 2), cycle=1, window=2), reverse, [(1, 1), (1, 0), (0, 1), (0, 0)]),
    # Files reversed (1 first), so the stream is (1,0) (0,0) (1,1) | (0,1) (0,2): windows of 3,
    # each reversed.
    (spec((3, 2), window=3), reverse, [(1, 1), (0, 0), (1, 0), (0, 2), (0, 1)]),
    # Record sharding, pipeline 1 of 2: every other position of the global stream.
    (spec((3, 2), pipelines=2, index=1, by_record=True), identity, [(1, 0), (1, 1), (0, 0), (0, 1)]),
]


@pytest.mark.parametrize(("s", "shuffle", "want"), TABLE)
def test_the_order_on_integers(s, shuffle, want):
    assert take(s, shuffle, len(want)) == want


SPECS = [
    spec((5, 3, 7, 1), cycle=2, window=4, run=2),
    spec((4, 4, 4), cycle=3, window=5, run=1),
    spec((9,), cycle=1, window=4, run=3),
    spec((2, 6, 3, 3, 5), cycle=4, window=7, run=2, seed=11),
]


@pytest.mark.parametrize("s", SPECS)
def test_every_record_once_an_epoch_each_epoch_its_own_order(s):
    total = s.examples
    stream = take(s, seeded, 3 * total)
    epochs = [stream[e * total : (e + 1) * total] for e in range(3)]
    every = sorted((f, r) for f, count in enumerate(s.counts) for r in range(count))
    assert all(sorted(e) == every for e in epochs)
    assert len({tuple(e) for e in epochs}) == 3


@pytest.mark.parametrize("s", SPECS)
def test_a_start_anywhere_is_the_rest_of_the_stream(s):
    whole = take(s, seeded, 2 * s.examples)
    for start in (1, s.window, s.examples - 1, s.examples + 3):
        assert take(s, seeded, 5, start) == whole[start : start + 5]


def test_input_pipelines_share_the_global_stream_by_position():
    s = spec((5, 3, 7), cycle=2, window=4, run=2, pipelines=3, by_record=True)
    whole = take(dataclasses.replace(s, pipelines=1, index=0), seeded, 2 * s.examples)
    for i in range(3):
        mine = take(dataclasses.replace(s, index=i), seeded, 10)
        assert mine == whole[i::3][:10]


def test_augmentation_seeds_follow_the_seed_epoch_and_example():
    s = spec((3, 2), seed=7)
    first, second = (list(itertools.islice(resumable.records(s, e * 5, seeded), 5)) for e in (0, 1))
    ids = {p.seed: (p.epoch, s.first_ids[p.file] + p.record) for p in first + second}
    assert len(ids) == 10  # every (epoch, example) its own seed
    assert next(resumable.records(s, 3, seeded)).seed == first[3].seed  # the same, started mid-epoch


def test_the_graph_yields_what_the_plain_order_says(table_ds):
    """Row ids are example ids (rows were written in order), so the graph's rows and the plain
    form's (file, record) pairs compare directly, with TensorFlow's own permutations."""
    tf = pytest.importorskip("tensorflow")
    import tfpipe

    def tf_shuffle(n, seed):
        from tfpipe.pipeline.order import stream as order_stream

        return order_stream.permutation(tf, n, tf.constant(seed, tf.int64)).numpy().tolist()

    kw = {"cycle_length": 2, "shuffle_buffer": 13, "seed": 5, "cache": "none", "batch_size": 1}
    pipe = tfpipe.pipeline.plan(table_ds, **kw)
    s = pipe.order
    want = [
        s.first_ids[p.file] + p.record
        for p in itertools.islice(resumable.records(s, 0, tf_shuffle), 2 * N_ROWS)
    ]
    got = [int(f["row_id"][0]) for f, _ in pipe.dataset().take(2 * N_ROWS)]
    assert got == want
    later = tfpipe.build(table_ds, start_step=N_ROWS + 5, **kw)
    assert [int(f["row_id"][0]) for f, _ in later.take(5)] == want[N_ROWS + 5 : N_ROWS + 10]

"""`InputWait.watch`: the stage that timestamps each element as its consumer takes it
(tfpipe/monitor/stamps.py), on tf.data alone (no fit)."""

from __future__ import annotations

import time

import numpy as np
import pytest

import tfpipe
from tfpipe.monitor.stamps import Stamps

tf = pytest.importorskip("tensorflow")


def take_slowly(ds, n: int, pause: float) -> list:
    it = iter(ds)
    out = []
    for _ in range(n):
        out.append(next(it))
        time.sleep(pause)
    return out


def test_elements_are_unchanged():
    ds = tf.data.Dataset.range(7).map(lambda i: ({"x": tf.fill([2], i), "s": tf.strings.as_string(i)}, i * 2))
    watched = tfpipe.monitor.InputWait().watch(ds)
    assert watched.element_spec == ds.element_spec
    got = list(watched.as_numpy_iterator())
    want = list(ds.as_numpy_iterator())
    assert len(got) == 7
    for (gx, gy), (wx, wy) in zip(got, want, strict=True):
        assert gy == wy and (gx["x"] == wx["x"]).all() and gx["s"] == wx["s"]
    assert watched.cardinality() == ds.cardinality()


def test_times_are_taken_when_the_consumer_asks_not_ahead_of_it():
    # The pipeline ends in a map, after which tf.data would inject a prefetch: the stamps
    # must still follow the consumer, who asks every 30 ms.
    stamps = Stamps()
    take_slowly(stamps.watch(tf.data.Dataset.range(10).map(lambda i: i + 1)), 6, 0.03)
    rows = stamps.read()
    assert rows[:, 0].tolist() == list(range(6))
    assert np.diff(rows[:, 1]).min() > 0.025
    assert (rows[:, 2] >= rows[:, 1]).all()
    assert len(stamps.read()) == 0  # read once


def test_the_prefetch_tf_data_would_have_added_is_kept():
    # A pipeline ending in a slow map (20 ms an element), taken every 30 ms: unwatched, tf.data
    # adds a prefetch after the map and the consumer never waits. So watched.
    def slow(i):
        return tf.py_function(lambda v: (time.sleep(0.02), v)[1], [i], tf.int64)

    stamps = Stamps()
    take_slowly(stamps.watch(tf.data.Dataset.range(20).map(slow)), 10, 0.03)
    rows = stamps.read()
    waits = rows[3:, 2] - rows[3:, 1]
    assert np.median(waits) < 0.005, waits


def test_a_watched_stage_counts_what_the_ring_lost():
    stamps = Stamps(capacity=4)
    list(stamps.watch(tf.data.Dataset.range(10)))
    assert len(stamps.read()) == 4
    assert stamps.lost == 6


def test_only_a_dataset_is_watched():
    with pytest.raises(
        tfpipe.ConfigError, match=r"watch\(\) takes the tf.data.Dataset.*Received: builtins.list"
    ):
        tfpipe.monitor.InputWait().watch([1, 2, 3])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"warmup_steps": -1}, "warmup_steps must be an int >= 0. Received: warmup_steps=-1"),
        ({"warmup_steps": 2.5}, "warmup_steps must be an int >= 0. Received: warmup_steps=2.5"),
        ({"log_dir": ""}, "log_dir must be a directory"),
    ],
)
def test_options_are_checked(kwargs, message):
    with pytest.raises(tfpipe.ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        tfpipe.monitor.InputWait(**kwargs)

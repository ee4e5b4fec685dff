"""The monitor's arithmetic on timestamps made up to a known answer (tfpipe/monitor/timeline.py
and figures.py): no TensorFlow, no fit."""

from __future__ import annotations

import numpy as np
import pytest

from tfpipe.monitor.figures import MIN_BLOCK_STEPS, MIN_BLOCKS, figure, job_series
from tfpipe.monitor.timeline import Calls, Deliveries, waits_and_periods, window_batches

NAN = np.nan


def calls(begin, until, done=None, first=None) -> Calls:
    n = len(begin)
    return Calls(
        np.array(begin, float),
        np.array(until, float),
        np.full(n, NAN) if done is None else np.array(done, float),
        np.arange(n) == 0 if first is None else np.array(first),
        np.arange(n),
    )


def rows(*fetches) -> np.ndarray:
    """[k, asked, got] rows, k counting from 0."""
    return np.array([[k, a, g] for k, (a, g) in enumerate(fetches)], float)


def test_a_synchronous_call_waits_for_its_own_fetch():
    # TensorFlow: each call asks 0.1 s in, gets its batch 0.4 s later, and ends at 1.0.
    c = calls([0, 1, 2], [1, 2, 3])
    avail, asked = window_batches(rows((0.1, 0.5), (1.1, 1.5), (2.1, 2.5)), c, 1)
    waits, periods, steps = waits_and_periods(c, avail, asked)
    assert waits == pytest.approx([0.4, 0.4, 0.4])  # not the 0.1 s before asking
    assert periods == pytest.approx([1, 1, 1])
    assert steps.tolist() == [1, 1, 1]


def test_a_fetch_while_the_device_computes_costs_it_nothing():
    # JAX: Python fetches each batch in 0.1 s and dispatches; the device takes 1 s a step.
    c = calls([0.0, 0.2, 0.4], [0.2, 0.4, 0.6], done=[1.1, 2.1, 3.1])
    avail, asked = window_batches(rows((0.0, 0.1), (0.2, 0.3), (0.4, 0.5)), c, 1)
    waits, periods, _ = waits_and_periods(c, avail, asked)
    assert waits == pytest.approx([0.1, 0, 0])
    assert periods == pytest.approx([1.1, 1, 1])
    # A fetch that ends after the device is free costs it the rest.
    c = calls([0.0, 0.2], [0.2, 2.0], done=[1.1, 2.5])
    avail, asked = window_batches(rows((0.0, 0.1), (0.2, 1.5)), c, 1)
    waits, _, _ = waits_and_periods(c, avail, asked)
    assert waits == pytest.approx([0.1, 0.4])


def test_several_steps_a_call_compute_alike():
    # 4 steps a call, 0.2 s each, the 3rd batch arriving 0.3 s after the 2nd step is done.
    compute, free = 0.2, 10.0
    got = [10.0, 10.1, 10.7, 10.75]
    # the device: step 1 at 10.0-10.2, 2 at 10.2-10.4, 3 waits to 10.7 (0.3 s), 4 at 10.9-11.1
    c = calls([free], [11.1])
    avail, asked = np.array([got]), np.full((1, 4), NAN)
    waits, periods, steps = waits_and_periods(c, avail, asked)
    assert waits == pytest.approx([0.3], abs=1e-6)
    assert periods == pytest.approx([1.1])
    assert steps.tolist() == [4]
    assert periods[0] - waits[0] == pytest.approx(4 * compute, abs=1e-6)


def test_fetches_outside_a_call_belong_to_none():
    c = calls([0, 1], [0.9, 1.9])
    avail, _ = window_batches(rows((-1.0, -0.5), (0.1, 0.2), (0.95, 0.99), (1.1, 1.3)), c, 1)
    assert avail[:, 0].tolist() == [0.2, 1.3]


def test_a_call_without_its_batch_is_not_measured():
    c = calls([0, 1], [1, 2])
    avail, asked = window_batches(rows((0.1, 0.2)), c, 1)
    waits, periods, _ = waits_and_periods(c, avail, asked)
    assert np.isnan(waits[1]) and np.isnan(periods[1])


def test_buffered_calls_consume_their_iterator_in_order():
    d = Deliveries()
    # An iterator made before training (3 elements), then the training one, whose rows
    # interleave with the last of the first one's.
    fetches = np.array(
        [[0, -5.0, -4.9], [1, -4.9, -4.8], [0, 0.05, 0.1], [2, -4.8, 0.12], [1, 0.1, 1.4], [2, 1.4, 2.2]]
    )
    d.add(fetches)
    c = calls([0, 1, 2], [1, 2, 3])
    got = d.consumed(c, 1)
    assert got[:, 0].tolist() == [0.1, 1.4, 2.2]
    waits, periods, _ = waits_and_periods(c, got, np.full_like(got, NAN))
    assert waits == pytest.approx([0.1, 0.4, 0.2])
    assert periods == pytest.approx([1, 1, 1])


def test_buffered_steps_per_call_take_that_many_elements():
    d = Deliveries()
    d.add(np.array([[k, k * 0.1, k * 0.1 + 0.05] for k in range(8)]))
    got = d.consumed(calls([0, 1], [1, 2]), 4)
    np.testing.assert_allclose(got, [[0.05, 0.15, 0.25, 0.35], [0.45, 0.55, 0.65, 0.75]])


def test_a_figure_with_its_interval():
    rng = np.random.default_rng(0)
    waits = 0.04 + 0.01 * rng.random(400)
    periods = 0.1 + 0.01 * rng.random(400)
    f = figure(waits, periods)
    assert f.input_wait == pytest.approx(waits.sum() / periods.sum())
    assert f.low < f.input_wait < f.high
    assert f.high - f.low < 0.01
    assert (f.steps, f.step_ms) == (400, pytest.approx(1000 * periods.mean()))
    assert "input wait 4" in str(f)


def test_too_few_steps_have_no_interval_and_none_have_no_figure():
    few = MIN_BLOCKS * MIN_BLOCK_STEPS - 1
    f = figure(np.full(few, 0.1), np.full(few, 1.0))
    assert (f.input_wait, f.low, f.high) == (pytest.approx(0.1), None, None)
    assert figure(np.full(3, NAN), np.full(3, NAN)) is None


def test_steps_per_call_count_steps():
    f = figure(np.full(10, 0.1), np.full(10, 1.0), steps=4)
    assert (f.steps, f.step_ms, f.wait_ms) == (40, pytest.approx(250), pytest.approx(25))


def test_the_slowest_host_sets_each_step_of_the_job():
    waits = np.array([[0.1, 0.0, NAN], [0.3, 0.1, 0.2]])
    periods = np.array([[1.0, 1.0, 1.0], [1.1, 1.0, 1.0]])
    w, p = job_series(waits, periods)
    assert w[:2].tolist() == [0.3, 0.1] and np.isnan(w[2])
    assert p[:2].tolist() == [1.1, 1.0]
    with pytest.raises(ValueError, match="hosts"):
        job_series(waits[0], periods[0])


def test_a_step_end_taken_late_is_bounded_by_the_next_ones():
    # Keras's callback threads took step 0's end after step 1's: step 0 was done by then.
    c = calls([0.0, 0.1, 0.2], [0.1, 0.2, 0.3], done=[2.5, 2.0, 3.0])
    np.testing.assert_allclose(c.steps_done(), [2.0, 2.0, 3.0])
    avail, asked = window_batches(rows((0.0, 0.05), (0.1, 0.15), (0.2, 0.25)), c, 1)
    waits, periods, _ = waits_and_periods(c, avail, asked)
    assert np.isfinite(waits[[0, 2]]).all() and np.isfinite(periods[[0, 2]]).all()

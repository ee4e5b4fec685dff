"""Verdict arithmetic on given rates: bands and their edges, bottleneck, cores, workers, advice."""

from __future__ import annotations

import math

import pytest

from tfpipe.bench import wait as w
from tfpipe.bench.config import BenchConfig
from tfpipe.bench.judge import advice
from tfpipe.bench.judge import verdict as v
from tfpipe.errors import ConfigError


@pytest.mark.parametrize(
    ("producer", "consumer", "wait", "band"),
    [
        (200, 100, 0.0, "not_input_bound"),  # producer faster: no wait, never negative
        (100, 100, 0.0, "not_input_bound"),
        (96, 100, 0.04, "not_input_bound"),
        (95.0001, 100, 0.049999, "not_input_bound"),  # just under the 5% edge
        (95, 100, 0.05, "moderately_input_bound"),  # the 5% edge itself is moderate
        (81, 100, 0.19, "moderately_input_bound"),
        (80.0001, 100, 0.199999, "moderately_input_bound"),
        (80, 100, 0.20, "highly_input_bound"),  # 1 - 0.8 is 0.19999999999999996 in floats
        (300, 2375, 1 - 300 / 2375, "highly_input_bound"),
        (0, 100, 1.0, "highly_input_bound"),
    ],
)
def test_predicted_wait_and_band(producer: float, consumer: float, wait: float, band: str) -> None:
    got = w.predicted_wait(producer, consumer)
    assert got == pytest.approx(wait, abs=1e-9)
    assert w.band(got) == band


def test_band_edges_directly() -> None:
    assert w.band(0.0) == "not_input_bound"
    assert w.band(0.0499999) == "not_input_bound"
    assert w.band(0.05) == "moderately_input_bound"
    assert w.band(0.1999999) == "moderately_input_bound"
    assert w.band(0.2) == "highly_input_bound"
    assert w.band(1.0) == "highly_input_bound"


def test_predicted_wait_rejects_bad_consumer() -> None:
    with pytest.raises(ConfigError, match="consumer examples_per_sec must be a positive finite number"):
        w.predicted_wait(100, 0)
    with pytest.raises(ConfigError, match="Received: producer examples_per_sec=nan"):
        w.predicted_wait(math.nan, 10)


def test_per_host_batch_divides_global_batch() -> None:
    assert BenchConfig(batch_size=1024, hosts=4).host_batch == 256
    assert BenchConfig(batch_size=37, hosts=1).host_batch == 37
    with pytest.raises(ConfigError, match="batch_size=1000, hosts=3"):
        BenchConfig(batch_size=1000, hosts=3)
    with pytest.raises(ConfigError, match="hosts must be an integer >= 1"):
        BenchConfig(batch_size=8, hosts=0)


def test_multi_host_verdict_uses_per_host_rates() -> None:
    # 4 hosts share a global batch of 1024 at 100 ms/step: each host must supply 2,560/s.
    per_host = BenchConfig(batch_size=1024, hosts=4).host_batch / 0.100
    assert per_host == pytest.approx(2560)
    assert w.band(w.predicted_wait(2400, per_host)) == "moderately_input_bound"
    assert w.band(w.predicted_wait(2600, per_host)) == "not_input_bound"


def test_bottleneck_is_the_largest_added_time_not_the_largest_eps_drop() -> None:
    # read -> parse loses 30,000/s but costs 0.03 ms; parse -> decode loses 19,700/s and costs 3.3 ms.
    stages = [("read", 50_000.0), ("parse", 20_000.0), ("decode", 300.0), ("batch", 290.0), ("final", 295.0)]
    b = v.bottleneck(stages)
    assert b.stage == "decode"
    assert b.examples_per_sec == 300.0
    assert b.ms_per_example == pytest.approx((1 / 300 - 1 / 20_000) * 1000)
    assert b.share == pytest.approx((1 / 300 - 1 / 20_000) / (1 / 290))
    assert b.drop == pytest.approx(1 - 300 / 20_000)


def test_bottleneck_first_stage_and_noise() -> None:
    # The first prefix's cost is measured from nothing: slow reading is the bottleneck.
    b = v.bottleneck([("read", 100.0), ("parse", 99.0), ("final", 101.0)])
    assert b.stage == "read"
    assert b.drop == 0.0
    assert b.share == pytest.approx((1 / 100) / (1 / 99))
    # A later prefix measured faster than an earlier one adds no cost, not negative cost.
    b = v.bottleneck([("read", 1000.0), ("parse", 500.0), ("batch", 600.0), ("final", 250.0)])
    assert b.stage == "final"
    assert b.ms_per_example == pytest.approx((1 / 250 - 1 / 500) * 1000)
    assert b.drop == pytest.approx(1 - 250 / 600)


def test_bottleneck_ties_go_to_the_earlier_stage_and_empty_is_unknown() -> None:
    assert v.bottleneck([("read", 100.0), ("parse", 50.0)]).stage == "read"
    assert v.bottleneck([]).stage == ""
    with pytest.raises(ConfigError, match=r"Stage 'parse': expected a positive throughput. Received: 0"):
        v.bottleneck([("read", 10.0), ("parse", 0)])


def test_cores_needed_within_measured_range_interpolates() -> None:
    curve = [(1, 100.0), (2, 190.0), (4, 360.0)]
    est = v.cores_needed(150.0, curve)
    assert (est.cores, est.available, est.extrapolated, est.enough) == (2, 4, False, True)
    assert est.per_core_eps == 100.0
    assert est.efficiency == pytest.approx(360 / 400)
    # 275/s lies between 2 cores (190) and 4 cores (360): 3 cores interpolate to 275 exactly.
    assert v.cores_needed(275.0, curve).cores == 3
    assert v.cores_needed(276.0, curve).cores == 4
    assert v.cores_needed(90.0, curve).cores == 1


def test_cores_needed_beyond_host_extrapolates_at_measured_efficiency() -> None:
    curve = [(1, 100.0), (2, 180.0)]
    est = v.cores_needed(2375.0, curve)
    # 90/s per core at 2 cores (90% efficiency) holds beyond: ceil(2375 / 90) = 27.
    assert (est.cores, est.extrapolated, est.enough) == (27, True, False)
    assert est.efficiency == pytest.approx(0.9)
    assert v.cores_needed(1800.0, curve).cores == 20  # exactly 20 x 90, no spurious 21st core
    assert v.cores_needed(0.0, curve).cores == 0


def test_rate_at_and_per_core_rate() -> None:
    curve = [(2, 180.0), (4, 320.0)]
    assert v.per_core_rate(curve) == 90.0  # no 1-core point: the lowest point's per-core rate
    assert v.rate_at(1, curve) == 90.0
    assert v.rate_at(3, curve) == 250.0
    assert v.rate_at(8, curve) == 640.0
    with pytest.raises(ConfigError, match="at least one"):
        v.per_core_rate([])


def test_service_workers_for_all_hosts() -> None:
    curve = [(1, 100.0), (2, 190.0), (4, 360.0)]
    s = v.service_workers(consumer_eps_per_host=1000.0, hosts=3, worker_cores=4, scaling=curve)
    assert (s.workers, s.worker_cores, s.worker_eps, s.demand_eps) == (9, 4, 360.0, 3000.0)
    # Workers bigger than this host: extrapolated at 90/s per core -> 8 cores give 720/s.
    s = v.service_workers(1000.0, 3, 8, curve)
    assert (s.workers, s.worker_eps) == (5, 720.0)
    with pytest.raises(ConfigError, match="worker_cores must be an integer >= 1"):
        v.service_workers(10.0, 1, 0, curve)


def _advice(
    producer: float, consumer: float, stages: list[tuple[str, float]], curve: list[tuple[int, float]], **kw
):
    wait = w.predicted_wait(producer, consumer)
    cores = v.cores_needed(consumer, curve)
    return advice.recommend(
        verdict=w.band(wait),
        wait=wait,
        producer_eps=producer,
        consumer_eps=consumer,
        bottleneck=v.bottleneck(stages),
        cores=cores,
        service=v.service_workers(consumer, 1, cores.available, curve),
        **kw,
    )


def test_recommendations_each_follow_a_finding() -> None:
    decode_bound = [("read", 40_000.0), ("parse", 20_000.0), ("decode", 300.0), ("final", 290.0)]
    recs = _advice(290, 2375, decode_bound, [(1, 160.0), (2, 290.0)])
    kinds = [r.kind for r in recs]
    assert kinds == ["decode_bound", "cpu_bound_beyond_host"]
    assert "--resize-shorter" in recs[0].action
    assert "decode" in recs[0].finding.lower()
    assert "tfpipe serve worker --allow-remote" in recs[1].action and "17 cores" in recs[1].finding
    assert all(r.finding and r.action for r in recs)

    read_bound = [("read", 500.0), ("parse", 480.0), ("final", 470.0)]
    recs = _advice(470, 1000, read_bound, [(1, 300.0), (2, 330.0)], data_on_gcs=True)
    assert [r.kind for r in recs] == ["read_bound", "cpu_bound_beyond_host", "poor_scaling"]
    assert "shards" in recs[0].action and "gs://" in recs[0].action
    assert "55%" in recs[2].finding

    recs = _advice(5000, 1000, decode_bound, [(1, 160.0), (2, 290.0)])
    assert [r.kind for r in recs] == ["keeps_up"]
    assert "5.0x" in recs[0].finding


def test_cores_from_cpu_cost_is_demand_times_cpu_seconds_per_example() -> None:
    curve = v.cores_needed(3000.0, [(1, 400.0), (2, 800.0), (4, 1600.0)])
    assert (curve.cores, curve.extrapolated) == (8, True)
    est = v.cores_from_cpu(3000.0, 2.5, curve=curve, cores_busy=4.0)
    assert est.cores == pytest.approx(7.5)  # 3,000/s x 2.5 ms
    assert (est.cpu_ms_per_example, est.cores_busy, est.at_cores, est.disagreement) == (2.5, 4.0, 4, "")
    with pytest.raises(ConfigError, match="cpu_ms_per_example must be a finite number >= 0"):
        v.cores_from_cpu(3000.0, math.nan, curve=curve, cores_busy=4.0)


def test_cores_disagreement_names_the_larger_estimate_and_why() -> None:
    # Whole cores within 25% agree: 10 vs ceil(9.2) = 10, and 4 vs 5 is exactly 25%.
    assert v.cores_disagreement(10, 9.2, cores_busy=3.5, at_cores=4) == ""
    assert v.cores_disagreement(4, 5.0, cores_busy=4.0, at_cores=4) == ""
    assert v.cores_disagreement(0, 0.0, cores_busy=1.0, at_cores=2) == ""
    idle = v.cores_disagreement(8, 3.6, cores_busy=1.8, at_cores=4)
    assert idle.startswith("The scaling curve says ~8 cores, the CPU cost per example ~3.6, 100% apart.")
    assert "Cores sit idle: with 4 threads the pipeline kept 1.8 cores busy" in idle
    assert "Other processes on this host took cores, or parallelism limits" in idle
    assert idle.endswith("on a quiet host, raise parallelism before adding cores.")
    outside = v.cores_disagreement(4, 6.3, cores_busy=2.9, at_cores=2)
    assert outside.startswith("The scaling curve says ~4 cores, the CPU cost per example ~6.3, 75% apart.")
    assert "With 2 threads the process kept 2.9 cores busy: work outside tf.data's threadpool" in outside
    assert outside.endswith("Plan for the CPU figure.")

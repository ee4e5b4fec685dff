"""Issue 34 on given numbers: the predicted wait's interval and its "cannot tell" words, the
bottleneck ranked by CPU where throughput disagrees, advice only the user can act on, and a
simulation that could not keep its step. No measurement here: the agreement itself is
benchmarks/verdict_agreement.py."""

from __future__ import annotations

import pytest

from tfpipe.bench import wait as w
from tfpipe.bench.judge import advice
from tfpipe.bench.judge import verdict as v
from tfpipe.bench.present.render import bottleneck_sentence
from tfpipe.errors import ConfigError


def test_rate_spread_is_the_relative_sd_between_pieces() -> None:
    # 90, 100, 110 examples/s in three pieces: sd 10 around 100.
    assert w.rate_spread([(45, 0.5), (50, 0.5), (55, 0.5)]) == pytest.approx(0.10)
    assert w.rate_spread([(50, 0.5), (50, 0.5)]) is None  # fewer than MIN_PIECES
    assert w.rate_spread([(50, 0.5), (50, 0.5), (50, 0.5)]) == 0.0


def test_wait_interval_is_the_wait_at_the_rate_one_sd_either_side() -> None:
    i = w.wait_interval(81.0, 100.0, 0.08)
    # 81 x 1.08 = 87.48 -> 12.52%; 81 x 0.92 = 74.52 -> 25.48%.
    assert (i.low, i.high) == (pytest.approx(0.1252), pytest.approx(0.2548))
    assert i.bands == ("moderately_input_bound", "highly_input_bound") and not i.certain
    sure = w.wait_interval(60.0, 100.0, 0.05)  # 37% .. 43%
    assert (sure.low, sure.high, sure.bands, sure.certain) == (
        pytest.approx(0.37),
        pytest.approx(0.43),
        ("highly_input_bound",),
        True,
    )
    # A producer faster than the consumer even at its low end: no wait either side.
    fast = w.wait_interval(200.0, 100.0, 0.2)
    assert (fast.low, fast.high, fast.bands) == (0.0, 0.0, ("not_input_bound",))
    # Across all three bands: 3% .. 33%.
    wide = w.wait_interval(82.0, 100.0, 0.18)
    assert wide.bands == ("not_input_bound", "moderately_input_bound", "highly_input_bound")
    # A spread beyond 100% takes the low rate to 0, not below.
    assert w.wait_interval(50.0, 100.0, 1.5).high == 1.0
    with pytest.raises(ConfigError, match="spread must be a finite number >= 0"):
        w.wait_interval(50.0, 100.0, -0.1)


def test_verdict_words_give_the_interval_or_say_they_cannot_tell() -> None:
    assert w.verdict_words(0.4, w.wait_interval(60.0, 100.0, 0.05)) == (
        "highly input-bound: 40% [37, 43] of step time waiting for input"
    )
    assert w.verdict_words(0.19, w.wait_interval(81.0, 100.0, 0.08)) == (
        "cannot tell moderately from highly input-bound: 19% [13, 25] of step time waiting for "
        "input: the interval spans the 20% edge at this run's spread (the producer's rate moved 8% "
        "between half-second pieces of its window)"
    )
    wide = w.verdict_words(0.18, w.wait_interval(82.0, 100.0, 0.18))
    assert wide.startswith(
        "cannot tell not from highly input-bound: 18% [3, 33] of step time waiting for input: the "
        "interval spans the 5% and 20% edges"
    )
    assert w.verdict_words(0.123, None) == "moderately input-bound: 12.3% of step time waiting for input"


def test_the_interval_spans_the_producers_windows() -> None:
    # Issue 41's quiet run: one window at 0.664 of the consumer (33.6% predicted, [29, 38] from a
    # 7% spread) while --simulate's consumer met 0.756 (24.4% measured). A second window at the
    # simulation's rate widens the interval to hold it, and the run cannot tell.
    one = w.wait_interval(66.4, 100.0, 0.07)
    assert (one.low, one.high, one.certain, one.moved) == (
        pytest.approx(1 - 66.4 * 1.07 / 100),
        pytest.approx(1 - 66.4 * 0.93 / 100),
        True,
        0.0,
    )
    assert not one.low <= 0.244 <= one.high
    two = w.wait_interval([66.4, 75.6], 100.0, 0.07)
    # From the faster window 7% faster (19.1%) to the slower 7% slower (38.2%).
    assert (two.low, two.high) == (pytest.approx(1 - 75.6 * 1.07 / 100), pytest.approx(1 - 66.4 * 0.93 / 100))
    assert two.low <= 0.244 <= two.high
    assert two.moved == pytest.approx(75.6 / 66.4 - 1)
    assert two.bands == ("moderately_input_bound", "highly_input_bound") and not two.certain
    assert w.verdict_words(0.29, two).endswith(
        "(the producer's rate moved 7% between half-second pieces of its windows, and 14% between the two windows)"
    )
    with pytest.raises(ConfigError, match="producer_eps must be at least one window's rate"):
        w.wait_interval([], 100.0, 0.07)


def test_a_busy_host_is_never_certain_and_the_title_says_so() -> None:
    busy = "the host was busy: other processes took 0.91 of 2 cores while the producer was timed"
    i = w.wait_interval(60.0, 100.0, 0.05, busy=busy)
    assert i.bands == ("highly_input_bound",) and not i.certain
    assert w.verdict_title(0.4, i) == "Highly input-bound on this busy host (cannot tell)"
    assert w.verdict_words(0.4, i) == (
        "highly input-bound on this busy host (cannot tell): 40% [37, 43] of step time waiting for "
        f"input: {busy}"
    )
    spans = w.wait_interval([81.0, 84.0], 100.0, 0.08, busy=busy)
    assert w.verdict_title(0.19, spans) == "Cannot tell moderately from highly input-bound"
    assert w.verdict_detail(0.19, spans).endswith(f"between the two windows); and {busy}")
    assert w.verdict_title(0.4, w.wait_interval(60.0, 100.0, 0.05)) == "Highly input-bound"
    assert w.verdict_title(0.03, None) == "Not input-bound"


def test_a_prefix_slower_than_a_longer_one_carries_a_harness_cost_and_cpu_ranks() -> None:
    # Issue 34's run B: the batch prefix ran at 197/s, the whole pipeline at 527/s, while the CPU
    # per example barely moved (2.44 -> 2.52 ms); decode adds nearly all the CPU.
    stages = [("read", 9000.0), ("parse", 6000.0), ("decode", 560.0), ("batch", 197.0), ("final", 527.0)]
    cpu = [0.05, 0.12, 2.40, 2.44, 2.52]
    assert v.bottleneck(stages).stage == "batch"  # throughput alone names the harness cost
    b = v.bottleneck(stages, cpu)
    assert (b.stage, b.basis, b.harness) == ("decode", "cpu", ("batch",))
    assert b.ms_per_example == pytest.approx(2.28)  # 2.40 - 0.12
    assert b.share == pytest.approx(2.28 / 2.52)
    assert b.drop == pytest.approx(1 - 560 / 6000)
    # Run A of the same issue, throughput monotone and agreeing with CPU: unchanged.
    a = v.bottleneck(
        [("read", 9000.0), ("parse", 6000.0), ("decode", 560.0), ("final", 527.0)], [*cpu[:3], 2.5]
    )
    assert (a.stage, a.basis, a.harness) == ("decode", "throughput", ())
    assert a.share == pytest.approx((1 / 560 - 1 / 6000) / (1 / 527))


def test_no_stage_is_named_when_the_cpu_costs_are_too_close() -> None:
    # Text: pack slower than batch and final; parse and pack add CPU within 1.5x of each other.
    stages = [("read", 40_000.0), ("parse", 9000.0), ("pack", 2000.0), ("batch", 2600.0), ("final", 2500.0)]
    cpu = [0.02, 0.30, 0.55, 0.56, 0.57]
    b = v.bottleneck(stages, cpu)
    assert (b.stage, b.basis, b.harness) == ("", "noisy", ("pack",))
    assert bottleneck_sentence(b, "sequence") == (
        "too noisy to name one: the prefixes' throughput and their CPU cost per sequence rank the "
        "stages differently, and no stage's CPU cost stands out (pack ran slower than a longer "
        "prefix: the cost of timing it alone, which training does not pay)"
    )
    # A 10% faster later prefix is within one rate's spread: no harness cost.
    assert v.slower_than_longer([("read", 100.0), ("final", 110.0)]) == ()
    assert v.slower_than_longer([("read", 100.0), ("parse", 95.0), ("final", 112.0)]) == ("read", "parse")
    with pytest.raises(ConfigError, match="a CPU cost for each of 2 prefixes"):
        v.bottleneck([("read", 1.0), ("final", 1.0)], [0.1])


def test_bottleneck_sentence_says_how_it_was_ranked() -> None:
    cpu = v.Bottleneck("decode", 560.0, 2.28, 0.905, 0.907, "cpu", ("batch",))
    assert bottleneck_sentence(cpu) == (
        "decode: 90% of the CPU per example (2.280 CPU ms), ranked by CPU cost because throughput "
        "disagrees (batch ran slower than a longer prefix: the cost of timing it alone, which "
        "training does not pay)"
    )
    time = v.Bottleneck("decode", 560.0, 1.62, 0.85, 0.9)
    assert bottleneck_sentence(time) == (
        "decode: 85% of the time per example (1.620 ms), throughput falls 90% at this prefix"
    )


def _stage_advice(stage: str, preset: str = "imagenet") -> advice.Recommendation | None:
    neck = v.Bottleneck(stage, 500.0, 1.0, 0.5, 0.5)
    return advice._stage_advice(neck, preset=preset, data_on_gcs=False)


@pytest.mark.parametrize(
    ("stage", "preset"),
    [
        ("batch", "imagenet"),
        ("final", "imagenet"),
        ("batch", "text"),
        ("final", "tabular"),
        ("parse", "tabular"),
        ("decode", "tabular"),
    ],
)
def test_no_advice_to_rewrite_the_preset(stage: str, preset: str) -> None:
    # Nothing in build()'s call, convert or the hardware changes these stages' own cost: the
    # cores advice that follows says what feeds them.
    assert _stage_advice(stage, preset) is None


def test_stage_advice_names_what_the_user_changes() -> None:
    decode = _stage_advice("decode")
    assert decode is not None and "tfpipe convert --resize-shorter 256" in decode.action
    assert "decode_and_crop" not in decode.action  # tfpipe's own stage, not the user's
    read = _stage_advice("read")
    assert read is not None
    for change in ("tfpipe convert --num-shards", "Order(cycle_length=", 'cache="memory"'):
        assert change in read.action
    assert "Move per-example work" not in read.action + decode.action
    pack = _stage_advice("pack", "text")
    assert pack is not None and "packing='concat'" in pack.action


class _Clock:
    """A fake clock for the simulated consumer: each take costs `call` seconds (and returns the
    next of `waits`, also spent), and each sleep overshoots by `overshoot`, as on a loaded host."""

    def __init__(self, call: float, overshoot: float, waits: list[float] | None = None) -> None:
        self.now, self.call, self.overshoot, self.waits = 0.0, call, overshoot, list(waits or [])

    def perf_counter(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds + self.overshoot

    def take(self, _it: object) -> float:
        waited = self.waits.pop(0) if self.waits else 0.0
        self.now += self.call + waited
        return waited


def test_the_simulated_consumer_keeps_its_schedule_when_sleep_overshoots(monkeypatch) -> None:
    from tfpipe.bench.measure import simulate

    clock = _Clock(call=0.001, overshoot=0.005)
    monkeypatch.setattr(simulate, "time", clock)
    wait, steps, window = simulate._consume(clock.take, None, 0.010, 1.0)
    # 10 ms steps for 1 s: 100 steps, not the 1/(10 + 5 ms) = 67 a sleep-after-each-step loop
    # takes (a consumer a third slower than asked waits less than predicted).
    assert wait == 0.0 and steps in (100, 101)
    assert window == pytest.approx(steps * 0.010, abs=0.011)


def test_the_simulated_consumer_is_measured_once_the_buffers_refill(monkeypatch) -> None:
    from tfpipe.bench.measure import simulate

    # After a producer phase the first three takes block (the drained buffers), then none do.
    clock = _Clock(call=0.0, overshoot=0.0, waits=[0.02, 0.02, 0.02])
    monkeypatch.setattr(simulate, "time", clock)
    wait, steps, _ = simulate._consume(clock.take, None, 0.010, 1.0)
    assert wait == 0.0 and steps >= 99
    # A producer that never catches up: the steps after REFILL_SHARE of the phase are measured.
    clock = _Clock(call=0.0, overshoot=0.0, waits=[0.02] * 1000)
    monkeypatch.setattr(simulate, "time", clock)
    wait, steps, window = simulate._consume(clock.take, None, 0.010, 1.0)
    assert wait / window == pytest.approx(0.02 / 0.03, abs=0.01)


def test_windows_pool_into_one_rate_and_their_loads_into_one() -> None:
    from tfpipe.bench.measure.producer import pooled
    from tfpipe.bench.results import HostLoad, Rate

    # 3 s at 400/s with a neighbour on 1 core, then 3 s at 600/s with it gone.
    a = Rate(400.0, 4.0, 12, 3.0, 0.4, 1.5, 4.5, 1.8, 0.05, (390.0, 400.0, 410.0), HostLoad(2, 1.0, 0.0, 3.0))
    b = Rate(
        600.0, 6.0, 18, 3.0, 0.3, 1.5, 3.0, 1.8, 0.05, (590.0, 600.0, 610.0), HostLoad(2, 0.0, 0.02, 3.0)
    )
    p = pooled((a, b))
    assert (p.examples_per_sec, p.elements, p.window_sec, p.first_element_sec) == (500.0, 30, 6.0, 0.4)
    assert p.cpu_ms_per_example == pytest.approx(1000 * 1.8 * 6 / 3000)
    assert p.spread == pytest.approx(0.22, abs=0.005)  # the two windows' pieces apart: a wide spread
    assert p.host == HostLoad(2, 0.5, 0.01, 6.0)
    assert pooled((a,)) is a
    assert HostLoad.combined([None, None]) is None


def test_the_host_is_busy_when_others_take_a_tenth_of_the_cores() -> None:
    from tfpipe.bench.judge import host
    from tfpipe.bench.results import HostLoad

    quiet, busy = HostLoad(2, 0.05, 0.0, 3.0), HostLoad(2, 0.15, 0.08, 3.0)
    assert not host.is_busy(quiet) and host.is_busy(busy) and not host.is_busy(None)
    assert host.busy_reason(quiet) == ""
    assert host.busy_reason(busy) == (
        "the host was busy: other processes took 0.15 of 2 cores and the hypervisor 0.08 while the "
        "producer was timed, so its rate is this host's under that load"
    )
    # Over the producer's two windows, by their seconds: 0.25 + 0.04 of 2 cores is busy.
    f = host.figures([busy, HostLoad(2, 0.35, 0.0, 3.0)], simulation=quiet, load_average=(1.0, 2.0))
    assert f.producer is not None and f.busy and not f.simulation_busy
    assert (f.producer.others_cores, f.producer.steal_cores) == (pytest.approx(0.25), pytest.approx(0.04))
    assert not host.figures([busy, quiet]).busy  # 0.10 + 0.04 of 2 cores: quiet enough
    assert host.sentence(host.figures([None])).startswith("not measured")


def test_the_hosts_counters_are_read_beside_a_window() -> None:
    from tfpipe.bench.measure import host

    start = host.sample()
    if start is None:
        pytest.skip("no /proc/stat: not Linux")
    sum(i * i for i in range(200_000))  # this process's own CPU: never counted as another's
    load = host.since(start)
    assert load is not None and load.cores == len(host.cores()) and load.window_sec > 0
    assert load.others_cores >= 0 and load.steal_cores >= 0
    assert host.since(None) is None

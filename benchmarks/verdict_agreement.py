"""Does bench's predicted input wait agree with the wait `--simulate` measures? (issue 34)

Per case and run, this prints the prediction bench's report makes (the full pipeline's rate in
its own producer window, as `tfpipe bench` times it), the wait the simulated consumer measured,
and the difference; and beside them what could explain a difference:

- `sim_pred`: the simulation's own prediction, from its producer phases (same iterator, same
  minutes): if it agrees with `measured` while `predicted` does not, the producer moved between
  the two windows (run-to-run spread, load), not the model of the wait;
- `step_x`: the consumer's achieved time per step without its waits, over the step it was
  asked to hold (1.00 = exact; above it, the loop's own overhead (the call, sleep's
  granularity, the GIL) made the consumer slower than asked, and it waits less);
- `cv`: the spread of the producer's rate between 0.25 s sub-windows of its window (bursts:
  text chunks, interleave cycles, epoch ends), and `jensen`: the wait those sub-window rates
  predict when each is taken alone, mean of max(0, 1 - p_i / c), which is what a consumer
  without buffers would see.

Cases: images (--pipeline=imagenet, the default cache and --cache none) and text (first_fit
and none packing), each against three consumers set from a first (calibration) run's producer
rate: 0.5x (not input-bound), 1/0.7x (~30% wait), 3x (~67% wait).

    python -m benchmarks.verdict_agreement --runs 3 [--cases images,images-nocache,text,text-none,text-short]
    python -m benchmarks.verdict_agreement --fit --runs 3   # model.fit, the differential method

(from the worktree root, so the worktree's tfpipe is the one imported)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
from typing import Any

from tfpipe.bench import wait
from tfpipe.bench.config import BenchConfig
from tfpipe.bench.measure import data, producer
from tfpipe.bench.measure.simulate import simulate
from tfpipe.bench.run import _plan

CASES = {
    "images": {"pipeline": "imagenet"},
    "images-nocache": {"pipeline": "imagenet", "cache": "none"},
    "text": {"pipeline": "text", "packing": "first_fit"},
    "text-none": {"pipeline": "text", "packing": "none"},
    # Issue 34's short steps: 16 sequences a step (the default is 64), ~2-10 ms.
    "text-short": {"pipeline": "text", "packing": "first_fit", "batch_size": 16},
}
# --fit: (case, model): on this 2-core CPU small_cnn's step is short (input-bound) and
# mobilenet_v2's long (not input-bound).
FIT_CASES = [("images", "small_cnn"), ("images", "mobilenet_v2")]
# Consumer rate over the calibration run's producer rate, per band.
BANDS = {"not": 0.5, "moderate": 1 / 0.7, "high": 3.0}
SUB_WINDOW = 0.25


@dataclasses.dataclass
class Row:
    case: str
    run: int
    band: str
    step_ms: float
    predicted: float
    measured: float
    sim_pred: float
    step_x: float
    cv: float
    jensen: float
    low: float
    high: float

    @property
    def diff(self) -> float:
        return self.measured - self.predicted


def sub_window_rates(pipe: Any, seconds: float, warmup: float) -> list[float]:
    """The full pipeline's examples/s in SUB_WINDOW pieces of one window, after warm-up, pulled
    as bench's producer window pulls (next() in Python)."""
    it = iter(pipe.dataset())
    next(it)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < warmup:
        next(it)
    rates: list[float] = []
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        s0, n = time.perf_counter(), 0
        while time.perf_counter() - s0 < SUB_WINDOW:
            next(it)
            n += 1
        rates.append(n * pipe.examples_per_element() / (time.perf_counter() - s0))
    return rates


def case_rows(name: str, runs: int, seconds: float, workdir: str | None) -> list[Row]:
    cfg = BenchConfig(**CASES[name], seconds=seconds, workdir=workdir)
    source = data.resolve(cfg, lambda _m: None)
    pipe = _plan(cfg, source, lambda _m: None)
    full = len(pipe.stages)
    calib = producer.measure_prefix(pipe, full, seconds=seconds, warmup=cfg.warmup).examples_per_sec
    rows = []
    for run in range(runs):
        # bench's producer window: the last prefix, timed alone (run.measure_producer).
        rate = producer.measure_prefix(pipe, full, seconds=seconds, warmup=cfg.warmup)
        subs = sub_window_rates(pipe, seconds, cfg.warmup)
        cv = statistics.pstdev(subs) / statistics.fmean(subs)
        for band, ratio in BANDS.items():
            consumer = calib * ratio
            step_ms = pipe.batch_size / consumer * 1000.0
            sim = simulate(pipe, step_time_ms=step_ms, seconds=seconds, warmup=cfg.warmup)
            achieved = (sim.window_sec - sim.wait_sec) / sim.steps * 1000.0
            interval = wait.wait_interval(rate.examples_per_sec, consumer, rate.spread or 0.0)
            rows.append(
                Row(
                    name,
                    run,
                    band,
                    step_ms,
                    wait.predicted_wait(rate.examples_per_sec, consumer),
                    sim.measured_input_wait,
                    sim.predicted_input_wait,
                    achieved / step_ms,
                    cv,
                    statistics.fmean(wait.predicted_wait(p, consumer) for p in subs),
                    interval.low,
                    interval.high,
                )
            )
            print_row(rows[-1])
    return rows


HEAD = (
    f"{'case':15} {'run':>3} {'band':9} {'step ms':>8} {'pred':>6} {'meas':>6} {'diff':>6} "
    f"{'sim_pred':>8} {'step_x':>6} {'cv':>5} {'jensen':>6} {'interval':>13} in"
)


def print_row(r: Row) -> None:
    print(
        f"{r.case:15} {r.run:>3} {r.band:9} {r.step_ms:8.1f} {r.predicted:6.3f} {r.measured:6.3f} "
        f"{r.diff:+6.3f} {r.sim_pred:8.3f} {r.step_x:6.2f} {r.cv:5.2f} {r.jensen:6.3f} "
        f"[{r.low:.3f},{r.high:.3f}] {'y' if r.low - 0.05 <= r.measured <= r.high + 0.05 else 'n'}",
        flush=True,
    )


def fit_row(case: str, model: str, run: int, seconds: float, workdir: str | None) -> None:
    """bench with --model and --fit (DS-Analyzer's differential method: model.fit on the
    pipeline against the same model on synthetic batches of the same shapes), printed beside
    bench's prediction for that model's step."""
    import tfpipe

    r = tfpipe.bench(**CASES[case], model=model, fit=True, seconds=seconds, workdir=workdir)
    f = r.fit
    assert f is not None
    print(
        f"fit {case:10} {model:13} run {run}: consumer step {r.consumer.step_time_ms:7.1f} ms, "
        f"fit real {f.real_step_ms:7.1f} ms vs synthetic {f.synthetic_step_ms:7.1f} ms -> measured "
        f"{f.measured_input_wait:.3f}; predicted {r.predicted_input_wait:.3f} "
        f"{_interval(r)}; diff {f.measured_input_wait - r.predicted_input_wait:+.3f}; "
        f"producer {r.producer.examples_per_sec:.0f}/s spread {r.producer.spread}",
        flush=True,
    )


def _interval(r: Any) -> str:
    i = r.predicted_input_wait_interval
    return "" if i is None else f"[{i.low:.3f}, {i.high:.3f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--json", default=None, help="write every row here")
    parser.add_argument("--fit", action="store_true", help="the model.fit cases (FIT_CASES) instead")
    args = parser.parse_args()
    if args.fit:
        for run in range(args.runs):
            for case, model in FIT_CASES:
                fit_row(case, model, run, args.seconds, args.workdir)
        return
    print(HEAD, flush=True)
    rows: list[Row] = []
    for name in args.cases.split(","):
        rows += case_rows(name, args.runs, args.seconds, args.workdir)
    worst = max(abs(r.diff) for r in rows)
    within = sum(abs(r.diff) <= 0.05 for r in rows)
    inside = sum(r.low - 0.05 <= r.measured <= r.high + 0.05 for r in rows)
    held = [r for r in rows if r.step_x <= 1.05]
    print(f"\n{within}/{len(rows)} within 5 points; worst {worst:.3f}")
    print(f"{inside}/{len(rows)} within the interval widened by 5 points")
    if held:
        print(
            f"of {len(held)} whose consumer held its step: {sum(abs(r.diff) <= 0.05 for r in held)} within 5 points"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump([dataclasses.asdict(r) | {"diff": r.diff} for r in rows], f, indent=1)


if __name__ == "__main__":
    main()

"""tfpipe.monitor against `tfpipe bench --fit`, and the monitor's own cost (issue 42).

- agreement: per case (a bench pipeline and one of its models), `tfpipe bench --fit --json`
  run as a user runs it (a child process), then the user's own training as a plain script
  would run it: `tfpipe.build()` of the dataset bench used, the same model, `model.fit` with
  `InputWait`. Both measure the wait the same way (the monitor), in separate processes minutes
  apart; they should agree within 5 points. Beside them: bench's prediction, and --fit's
  differential method (1 - synthetic / real step), which on a CPU also counts the model's
  compute slowed by the pipeline's threads on the shared cores: the report's `contention`.
- cost: steps/s of `model.fit` with and without the monitor on the same model and pipeline,
  and the process's CPU seconds per step (all threads; a neighbour taking the cores barely
  moves it, where it moves steps/s by tens of percent), in alternating paired rounds (A B,
  then B A, ...), each round's ratio taken from two fits seconds apart; the geometric mean
  ratio with its 95% interval (benchmarks/paired.py's t). A step is timed from a batch's
  beginning to the epoch's end (after Keras's final sync on JAX), so asynchronous dispatch
  cannot hide steps.
- stage: the watched stage's own cost per element, on a pipeline that costs nothing (a batch
  repeated from memory), taken the same paired way.

    python -m benchmarks.monitor_agreement --agreement --runs 3 [--cases imagenet:small_cnn,...]
    python -m benchmarks.monitor_agreement --cost --rounds 6
    KERAS_BACKEND=jax /work/venv-jax/bin/python -m benchmarks.monitor_agreement --cost --rounds 6
    python -m benchmarks.monitor_agreement --stage

(from the worktree root, so the worktree's tfpipe is the one imported)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from benchmarks.paired import t95
from tfpipe.bench.config import DEFAULT_BATCH

# (bench pipeline, model): the bench's models that train on this 2-core CPU in seconds a step.
CASES = [("imagenet", "small_cnn"), ("tabular", "mlp"), ("text", "small_transformer")]


def bench_fit(pipeline: str, model: str, seconds: float) -> dict:
    """`tfpipe bench --pipeline P --model M --fit --json` in a child process: its JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "report.json")
        cmd = [sys.executable, "-m", "tfpipe", "bench", f"--pipeline={pipeline}", f"--model={model}", "--fit"]
        cmd += ["--seconds", str(seconds), "--json", out]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        with open(out) as f:
            return json.load(f)


def users_fit(report: dict, pipeline: str, model_name: str, seconds: float) -> Any:
    """The user's own training on the dataset bench used: the pipeline bench planned (what
    build() makes of it), the same model, `model.fit` with InputWait, in this process.
    Returns the monitor's Figure (the same warm-up in steps as bench --fit's)."""
    import keras

    import tfpipe

    model, pipe = _case_model(pipeline, model_name, report["dataset"]["path"], report["batch_size"])
    synthetic_ms = report["fit"]["synthetic_step_ms"]
    warm = max(2, int(report["environment"]["warmup_seconds"] / max(synthetic_ms / 1000, 1e-3)))
    steps = max(3, min(500, int(seconds / (report["fit"]["real_step_ms"] / 1000))))
    monitor = tfpipe.monitor.InputWait(warmup_steps=warm, verbose=0)
    keras.utils.set_random_seed(0)
    model.fit(
        monitor.watch(pipe.dataset()), epochs=1, steps_per_epoch=warm + steps, verbose=0, callbacks=[monitor]
    )
    return monitor.result.host


def agreement(runs: int, seconds: float, cases: list[tuple[str, str]]) -> None:
    print(
        f"{'case':28} run  bench --fit [interval]   user's fit [interval]   diff   differential  "
        "contention  predicted"
    )
    worst = 0.0
    for pipeline, model in cases:
        for run in range(runs):
            report = bench_fit(pipeline, model, seconds)
            fit = report["fit"]
            user = users_fit(report, pipeline, model, seconds)
            diff = user.input_wait - fit["measured_input_wait"]
            worst = max(worst, abs(diff))
            print(
                f"{pipeline + ' ' + model:28} {run:3}  {fit['measured_input_wait']:.3f} "
                f"{_pair(fit['input_wait_low'], fit['input_wait_high'])}  {user.input_wait:.3f} "
                f"{_pair(user.low, user.high)}  {diff:+.3f}  {fit['differential_input_wait']:.3f}        "
                f"{fit['contention']:+.3f}      {report['predicted_input_wait']:.3f}",
                flush=True,
            )
    print(f"worst |bench --fit - user's fit|: {worst:.3f}")


def _pair(low: float | None, high: float | None) -> str:
    return "[  -  ,  -  ]" if low is None else f"[{low:.3f},{high:.3f}]"


def _case_model(
    pipeline: str, model_name: str, data_path: str | None, batch: int, workdir: str | None = None
) -> tuple[Any, Any]:
    """The pipeline bench plans for `pipeline` on `data_path` (None: the dataset bench generates,
    in `workdir`), and its model as bench builds it."""
    from tfpipe.bench.config import BenchConfig
    from tfpipe.bench.measure import data, models
    from tfpipe.bench.run import _plan

    cfg = BenchConfig(pipeline=pipeline, data=data_path, batch_size=batch, model=model_name, workdir=workdir)
    pipe = _plan(cfg, data.resolve(cfg, lambda _m: None), lambda _m: None)
    pack = pipe.decoder.packing
    spec = pipe.dataset().element_spec
    vocab = pack.vocab_size if pack is not None else None
    return models.build_model(model_name, spec, models.outputs_for(pipe), vocab), pipe


def seconds_per_step(model: Any, ds: Any, steps: int, warm: int, callbacks: list) -> tuple[float, float]:
    """A fit's (wall seconds, CPU seconds of the process) per step, from batch `warm`'s
    beginning to the epoch's end."""
    import keras

    class Clock(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            if batch == warm:
                self.start, self.cpu = time.perf_counter(), _cpu()

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            self.end, self.cpu_end = time.perf_counter(), _cpu()

    clock = Clock()
    model.fit(ds, epochs=1, steps_per_epoch=warm + steps, verbose=0, callbacks=[clock, *callbacks])
    return (clock.end - clock.start) / steps, (clock.cpu_end - clock.cpu) / steps


def _cpu() -> float:
    """User and system CPU seconds of this process, every thread (barely moved by load)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _ratio(values: list[float]) -> str:
    """The geometric mean of per-round ratios with its 95% interval."""
    logs = [math.log(x) for x in values]
    mean = statistics.fmean(logs)
    half = t95(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs)) if len(logs) > 1 else math.inf
    return f"{math.exp(mean):.4f} [{math.exp(mean - half):.4f}, {math.exp(mean + half):.4f}]"


def cost(rounds: int, seconds: float, data_dir: str | None, cases: list[tuple[str, str]]) -> None:
    """Paired steps/s and CPU per step with and without the monitor, per case (see the module
    doc)."""
    import keras

    import tfpipe

    print(f"Keras {keras.__version__} on {keras.backend.backend()}")
    print(
        f"{'case':26} {'step ms':>8} {'CPU ms/step':>11}  {'steps/s with / without [95%]':>31}  "
        f"{'CPU per step with / without [95%]':>35}  rounds"
    )
    for pipeline, model_name in cases:
        model, pipe = _case_model(pipeline, model_name, None, DEFAULT_BATCH[pipeline], data_dir)
        warm = 5
        first, _ = seconds_per_step(model, pipe.dataset(), 3, 1, [])
        steps = max(10, min(300, int(seconds / first)))
        speed, cpu, plain, plain_cpu = [], [], [], []
        for r in range(rounds):
            got = {}
            for which in ["without", "with"] if r % 2 == 0 else ["with", "without"]:
                if which == "with":
                    monitor = tfpipe.monitor.InputWait(warmup_steps=warm, verbose=0)
                    got[which] = seconds_per_step(
                        model, monitor.watch(pipe.dataset()), steps, warm, [monitor]
                    )
                else:
                    got[which] = seconds_per_step(model, pipe.dataset(), steps, warm, [])
            speed.append(got["without"][0] / got["with"][0])  # steps/s with over without
            cpu.append(got["with"][1] / got["without"][1])
            plain.append(got["without"][0])
            plain_cpu.append(got["without"][1])
        print(
            f"{pipeline + ' ' + model_name:26} {1000 * statistics.median(plain):8.1f} "
            f"{1000 * statistics.median(plain_cpu):11.1f}  {_ratio(speed):>31}  {_ratio(cpu):>35}  {rounds}",
            flush=True,
        )


def stage(rounds: int) -> None:
    """The watched stage's cost per element, paired (see the module doc)."""
    import numpy as np
    import tensorflow as tf

    import tfpipe

    x = np.zeros((128, 64), np.float32)
    n = 20000

    def per_element(ds: Any) -> float:
        it = iter(ds)
        for _ in range(100):
            next(it)
        t0 = time.perf_counter()
        for _ in range(n):
            next(it)
        return (time.perf_counter() - t0) / n

    diffs = []
    for r in range(rounds):
        plain = tf.data.Dataset.from_tensors(x).repeat().prefetch(2)
        watched = tfpipe.monitor.InputWait().watch(plain)
        a, b = (per_element(plain), per_element(watched)) if r % 2 == 0 else (None, per_element(watched))
        if a is None:
            a = per_element(plain)
        diffs.append(b - a)
    mean = statistics.fmean(diffs)
    half = t95(len(diffs) - 1) * statistics.stdev(diffs) / math.sqrt(len(diffs))
    print(
        f"watched stage: {1e6 * mean:.1f} us more per element [{1e6 * (mean - half):.1f}, {1e6 * (mean + half):.1f}]"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agreement", action="store_true")
    parser.add_argument("--cost", action="store_true")
    parser.add_argument("--stage", action="store_true")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--workdir", default=None, help="where bench's generated datasets are kept")
    parser.add_argument(
        "--cases", default=",".join(f"{p}:{m}" for p, m in CASES), help="pipeline:model,... (default: all)"
    )
    args = parser.parse_args()
    cases = [(c.split(":")[0], c.split(":")[1]) for c in args.cases.split(",")]
    if args.agreement:
        agreement(args.runs, args.seconds, cases)
    if args.cost:
        cost(args.rounds, args.seconds, args.workdir, cases)
    if args.stage:
        stage(args.rounds)


if __name__ == "__main__":
    main()

"""A bench's producer measured once and shared, or given, for the tests of what a report says.

A bench measures its producer (a text pipeline's counts, every stage prefix, the scaling curve,
the storage reads) in `tfpipe.bench.run.measure_producer`, and what that returns depends on the
plan and the measuring options only, never on the consumer. A test of how a report reads a
profile, words its advice or writes its JSON needs no new measurement for each consumer:

- `bench_once`, a module-scoped fixture (registered by tests/conftest.py): the first bench of a
  plan in the module measures it for real, and every later bench planned alike (same data,
  preset, split, batch, hosts, cache, window, cores, text rows) is handed that measurement.
  A module takes it for all its tests with `pytestmark = pytest.mark.usefixtures("bench_once")`.
- `handing()`: bench times nothing; each timed window is given (no dataset is made), for the
  fast lane's checks (a real measurement costs ~15 CPU-s). Which prefixes, core counts and
  storage reads there are is still bench's own logic.
- `run_cli_handed(ARGS)`: `tfpipe ARGS` in a child process (as `support.cli.run_cli`), its bench's
  windows given as in `handing()`: for a test of what a whole command does in a fresh process
  (its data generated, its environment offline) rather than of what it measures.

Everything else a bench does (reading the profile, resolving the data, planning, finding the
consumer, the --simulate and --fit runs, concluding, rendering) runs as it always does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import pathlib
import subprocess
import sys
from collections.abc import Iterator, Mapping

import pytest

from tfpipe.bench import run
from tfpipe.bench.config import BenchConfig
from tfpipe.bench.measure import producer
from tfpipe.bench.results import Rate

from support.cli import CLI_TIMEOUT, environment

# The BenchConfig fields the producer's measurement depends on, besides the global batch (the
# key holds BenchConfig.global_batch, which batch_size and the preset's default give).
MEASURING = (
    "pipeline",
    "data",
    "weights",
    "split",
    "hosts",
    "cache",
    "seconds",
    "warmup_seconds",
    "max_cores",
    "profile",
    "sequence_length",
    "packing",
    "truncate",
    "synthetic_examples",
    "workdir",
)
# The others: the consumer's, what runs after the producer is measured, the workers estimate.
CONSUMING = (
    "batch_size",
    "step_time_ms",
    "model",
    "accelerator",
    "from_profile",
    "profile_run",
    "simulate",
    "fit",
    "compare",
    "worker_cores",
)
# A field BenchConfig gains must be put in one of the two, or two plans could share a measurement.
assert {f.name for f in dataclasses.fields(BenchConfig)} == {*MEASURING, *CONSUMING}


# bench's own, whatever a fixture has put in its place.
MEASURE_PRODUCER = run.measure_producer


def key(cfg, source) -> tuple:
    """What a measurement depends on: the data as resolved (a generated dataset's folder too),
    the global batch, and the measuring fields."""
    fields = (getattr(cfg, name) for name in MEASURING)  # a mixture's data and weights: dicts
    frozen = (tuple(v.items()) if isinstance(v, dict) else v for v in fields)
    return (source.root, source.split, cfg.global_batch, *frozen)


@pytest.fixture(scope="module")
def bench_once():
    """Within the module, a bench planned as an earlier one reuses its measurement. Yields the
    list of every measurement the module's benches asked for (their keys, in order, reused or
    not): a test that expects a refusal before anything is measured checks it did not grow."""
    measured: dict[tuple, object] = {}
    asked: list[tuple] = []

    def once(pipe, cfg, source, say):
        k = key(cfg, source)
        asked.append(k)
        if k not in measured:
            measured[k] = MEASURE_PRODUCER(pipe, cfg, source, say)
        return measured[k]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(run, "measure_producer", once)
        yield asked


@contextlib.contextmanager
def handing(examples_per_sec: float = 400.0) -> Iterator[None]:
    """Within, bench times nothing: each window it asks `tfpipe.bench.measure.producer.measure` for is
    given, not run (no dataset is made), at `examples_per_sec` and 10% less each later window:
    the prefixes in order (each slower than the last), then the fewer cores of the scaling curve,
    then the uncached reads. A window of a dataset given before (the whole pipeline again, the
    producer's second window) is given the same rate. Everything around the windows is bench's
    own: which prefixes, which core counts (the pipeline's own pool is the producer's rate),
    what the storage is. A text pipeline's rows are still counted for real."""
    asked = itertools.count()
    given: dict[tuple, Rate] = {}
    kept: list[object] = []  # what the keys name by id, kept alive so no id is reused

    def measure(make_dataset, *, examples_per_element, seconds, warmup, on_window=None) -> Rate:
        named = [
            getattr(make_dataset, "__self__", None),
            *(c.cell_contents for c in make_dataset.__closure__ or ()),
        ]
        kept.extend(named)
        same = (make_dataset.__code__, tuple(map(id, named)), make_dataset.__defaults__)
        if same in given:
            return given[same]
        eps = examples_per_sec * 0.9 ** next(asked)
        cores = 1.5
        given[same] = Rate(
            eps, eps / examples_per_element, max(1, int(eps * seconds / examples_per_element)), seconds,
            0.4, warmup, 1000 * cores / eps, cores,
        )  # fmt: skip
        return given[same]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(producer, "measure", measure)
        # Never through bench_once's memo: given windows are no plan's measurement.
        patch.setattr(run, "measure_producer", MEASURE_PRODUCER)
        yield


# The child of `run_cli_handed`: tfpipe's CLI entry point, run inside `handing()`.
HANDED_CLI = """
import sys
from support.bench_once import handing
from tfpipe.cli import main
with handing():
    code = main(sys.argv[1:])
raise SystemExit(code)
"""


def run_cli_handed(*args: object, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
    """`tfpipe ARGS` in a child process whose bench times nothing (`handing()`): returncode,
    stdout, stderr (text). `env` adds to `support.cli.environment()`, whose PYTHONPATH gains tests/."""
    child = environment(env)
    child["PYTHONPATH"] = f"{pathlib.Path(__file__).parents[1]}:{child['PYTHONPATH']}"
    return subprocess.run(
        [sys.executable, "-c", HANDED_CLI, *map(str, args)],
        env=child,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT,
    )

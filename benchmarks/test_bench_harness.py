"""`tfpipe bench`'s own harness, on its defaults: the numbers the closing note reports.

Run: python -m pytest benchmarks/test_bench_harness.py -s -p no:cacheprovider
Measures, on the embedded default datasets (generated once into a temporary cache):
- the default `tfpipe bench --pipeline=imagenet` run, first time (generation included) and
  cached, as wall time of the real command; the first must stay under 2 minutes;
- the producer (full pipeline, steady state) for tfpipe and for the tensorflow/tpu-style baseline, same data;
- the tabular producer;
- generation + convert of the default synthetic dataset (what the first run pays);
- --simulate against the prediction in all three bands: |predicted - measured| <= 0.05.
Every number is attached to the benchmark's extra_info and printed with -s.
"""

from __future__ import annotations

import os

import pytest
from bands import BANDS, default_cli_run, report, simulate_timed

from tfpipe.bench import wait
from tfpipe.bench.config import DEFAULT_BATCH, BenchConfig
from tfpipe.bench.measure import producer
from tfpipe.bench.measure.synthetic import SyntheticSpec, ensure_dataset

DEFAULTS = BenchConfig()
SECONDS, WARMUP = DEFAULTS.seconds, DEFAULTS.warmup


def test_default_run_first_time_and_cached(benchmark, cache_home, tmp_path) -> None:
    first_wall, first = default_cli_run("imagenet", cache_home, str(tmp_path / "first.json"))
    cached_wall, cached = benchmark.pedantic(
        lambda: default_cli_run("imagenet", cache_home, str(tmp_path / "cached.json")), rounds=1, iterations=1
    )
    info = {
        "first_run_sec": first_wall,
        "first_generation_sec": first["dataset"]["generated_sec"],
        "cached_run_sec": cached_wall,
        "producer_eps_first": first["producer"]["examples_per_sec"],
        "producer_eps_cached": cached["producer"]["examples_per_sec"],
        "verdict": cached["verdict"],
        "bottleneck": cached["bottleneck"]["stage"],
    }
    info.update({f"stage_{s['name']}_eps": s["examples_per_sec"] for s in cached["stages"]})
    info.update({f"scaling_{p['cores']}_cores_eps": p["examples_per_sec"] for p in cached["scaling"]})
    benchmark.extra_info.update(info)
    report(3, "default run", **info)
    assert first["dataset"]["generated_sec"] > 0 and cached["dataset"]["generated_sec"] == 0
    assert (
        first["dataset"]["synthetic"]
        and first["dataset"]["examples"] == SyntheticSpec.default("imagenet").examples
    )
    assert first_wall < 120, f"first default run took {first_wall:.1f} s; the target is under 2 minutes"


@pytest.fixture(scope="module")
def imagenet(cache_home):
    manifest, _ = ensure_dataset(SyntheticSpec.default("imagenet"), os.path.join(cache_home, "tfpipe"))
    return manifest


@pytest.fixture(scope="module")
def imagenet_pipe(imagenet):
    from tfpipe.pipeline import plan

    return plan(imagenet.root, preset="imagenet", batch_size=DEFAULT_BATCH["imagenet"])


def _producer(benchmark, make, per_element: int, name: str) -> float:
    rates: list[float] = []

    def once() -> None:
        rates.append(
            producer.measure(
                make, examples_per_element=per_element, seconds=SECONDS, warmup=WARMUP
            ).examples_per_sec
        )

    benchmark.pedantic(once, rounds=3, iterations=1)
    best, median = max(rates), sorted(rates)[1]
    benchmark.extra_info.update({"examples_per_sec_median": median, "examples_per_sec_all": rates})
    report(3, name, median_eps=median, best_eps=best)
    return median


def test_producer_imagenet_tfpipe(benchmark, imagenet_pipe) -> None:
    eps = _producer(benchmark, imagenet_pipe.dataset, imagenet_pipe.batch_size, "producer imagenet tfpipe")
    assert eps > 0


def test_producer_imagenet_baseline(benchmark, imagenet_pipe, imagenet) -> None:
    recipe = pytest.importorskip("tfpipe.modalities.images.bench.recipe")
    # The recipe does not repeat; repeating its file list keeps one epoch longer than a window
    # (as `tfpipe bench --compare` does), instead of restarting it cold every 10 batches.
    files = list(imagenet_pipe.files) * 50

    def make():
        return recipe.recipe_dataset(
            files, batch_size=imagenet_pipe.batch_size, image_size=224, compression=imagenet.tf_compression
        ).repeat()

    eps = _producer(
        benchmark, make, imagenet_pipe.batch_size, "producer imagenet baseline (tensorflow/tpu-style)"
    )
    assert eps > 0


def test_producer_tabular(benchmark, cache_home) -> None:
    from tfpipe.pipeline import plan

    manifest, _ = ensure_dataset(SyntheticSpec.default("tabular"), os.path.join(cache_home, "tfpipe"))
    pipe = plan(manifest.root, preset="tabular", batch_size=DEFAULT_BATCH["tabular"])
    assert _producer(benchmark, pipe.dataset, pipe.batch_size, "producer tabular") > 0


def test_generate_and_convert_default_imagenet(benchmark, tmp_path) -> None:
    spec = SyntheticSpec.default("imagenet")
    seconds = benchmark.pedantic(lambda: ensure_dataset(spec, str(tmp_path))[1], rounds=1, iterations=1)
    benchmark.extra_info.update(
        {"images": spec.examples, "seconds": seconds, "images_per_sec": spec.examples / seconds}
    )
    report(
        3, "generate + convert", images=spec.examples, seconds=seconds, images_per_sec=spec.examples / seconds
    )


@pytest.mark.parametrize(("target", "band"), BANDS)
def test_simulate_within_005_of_prediction(benchmark, imagenet_pipe, target: float, band: str) -> None:
    sim, attempts = simulate_timed(benchmark, imagenet_pipe, target, band, SECONDS, WARMUP)
    benchmark.extra_info.update(
        {
            "step_time_ms": sim.step_time_ms,
            "producer_eps": sim.producer_examples_per_sec,
            "predicted": sim.predicted_input_wait,
            "measured": sim.measured_input_wait,
            "steps": sim.steps,
            "attempts": attempts,
        }
    )
    report(
        3,
        f"simulate {band}",
        step_ms=sim.step_time_ms,
        producer_eps=sim.producer_examples_per_sec,
        predicted=sim.predicted_input_wait,
        measured=sim.measured_input_wait,
    )
    assert wait.band(sim.predicted_input_wait) == band
    assert abs(sim.predicted_input_wait - sim.measured_input_wait) <= 0.05

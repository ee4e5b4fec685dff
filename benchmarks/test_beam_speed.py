"""The Beam engine against the local engine, on the same 2 cores and the same inputs.

Run: python -m pytest benchmarks/test_beam_speed.py -s -p no:randomly
(needs the beam extra: pip install -e ".[test,beam]").

Contenders, each converting the same input to a fresh destination, alternating in rounds
(local, beam, then beam, local, ...) so drift on a shared machine hurts both alike:
- local: `tfpipe.convert(..., workers=2)`, a process pool of 2;
- beam: `tfpipe.convert(..., engine="beam")` on the DirectRunner in multi_processing mode
  with 2 workers (two SDK harness processes started per pipeline).
Cases: ImageNet-like JPEGs passed through (default decode check), the same re-encoded with
--resize-shorter 256, and the benchmarks' 40-column CSV table (200k rows). Target: beam wall
time <= 1.5x local's.

Reported per contender: best wall seconds, items/s, and CPU seconds (this process plus its
reaped children: the pool's workers and Beam's harness processes), and the 1-minute load
average before the case, so a noisy run is visible as such. Also the wall time of an empty
pipeline (the runner's fixed start-up cost) and the ratio without it, per pipeline run.
"""

from __future__ import annotations

import os
import resource
import shutil
import time

import pytest

import tfpipe

pytest.importorskip("apache_beam")

ROUNDS = int(os.environ.get("TFPIPE_BENCH_ROUNDS", "2"))
WORKERS = 2
BEAM_OPTIONS = f"--runner=DirectRunner --direct_running_mode=multi_processing --direct_num_workers={WORKERS}"
TARGET = 1.5


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _once(src: str, dest: str, engine: str, **options: object) -> tuple[float, float, int]:
    shutil.rmtree(dest, ignore_errors=True)
    extra = {"engine": "beam", "pipeline_options": BEAM_OPTIONS} if engine == "beam" else {}
    cpu, start = _cpu(), time.perf_counter()
    m = tfpipe.convert(src, dest, workers=WORKERS, **extra, **options)
    wall, cpu = time.perf_counter() - start, _cpu() - cpu
    return wall, cpu, m.splits["train"].examples


def _fixed() -> float:
    """Wall seconds of a Beam pipeline that does nothing: the runner's start-up and shutdown
    (two SDK harness processes, each importing apache_beam), paid once per pipeline."""
    from tfpipe.beam.engine import _run, pipeline_options

    start = time.perf_counter()
    _run("noop", [0, 1], str, pipeline_options(BEAM_OPTIONS, WORKERS))
    return time.perf_counter() - start


def compare(benchmark, src: str, tmp: str, **options: object) -> dict[str, float]:
    load = os.getloadavg()[0]
    best: dict[str, tuple[float, float, int]] = {}
    fixed = []
    for r in range(ROUNDS):
        for engine in ("local", "beam") if r % 2 == 0 else ("beam", "local"):
            got = _once(src, os.path.join(tmp, engine), engine, **options)
            if engine not in best or got[0] < best[engine][0]:
                best[engine] = got
        fixed.append(_fixed())
    info = {
        "load_avg_1m_before": round(load, 2),
        "cores": os.cpu_count(),
        "beam_empty_pipeline_s": round(min(fixed), 2),
    }
    for engine, (wall, cpu, n) in best.items():
        info |= {
            f"{engine}_wall_s": round(wall, 2),
            f"{engine}_cpu_s": round(cpu, 2),
            f"{engine}_items_per_s": round(n / wall, 1),
            f"{engine}_cpu_ms_per_item": round(1000 * cpu / n, 3),
        }
    info["beam_over_local_wall"] = round(best["beam"][0] / best["local"][0], 2)
    pipelines = 2 if options.get("label") else 1  # a table's first pass is a pipeline of its own
    less_startup = best["beam"][0] - pipelines * min(fixed)
    info["beam_less_startup_over_local_wall"] = round(less_startup / best["local"][0], 2)
    benchmark.extra_info.update(info)
    print("\n", info)
    return info


def test_images_pass_through(benchmark, image_folder, tmp_path):
    info = benchmark.pedantic(
        compare,
        args=(benchmark, image_folder, str(tmp_path)),
        kwargs={"num_shards": 8},
        rounds=1,
        iterations=1,
    )
    assert info["beam_over_local_wall"] <= TARGET, info


def test_images_resize_shorter(benchmark, image_folder, tmp_path):
    info = benchmark.pedantic(
        compare,
        args=(benchmark, image_folder, str(tmp_path)),
        kwargs={"num_shards": 8, "resize_shorter": 256},
        rounds=1,
        iterations=1,
    )
    assert info["beam_over_local_wall"] <= TARGET, info


def test_table_40_columns(benchmark, table_40, tmp_path):
    info = benchmark.pedantic(
        compare,
        args=(benchmark, table_40[0], str(tmp_path)),
        kwargs={"num_shards": 8, "label": "label"},
        rounds=1,
        iterations=1,
    )
    assert info["beam_over_local_wall"] <= TARGET, info

"""What the resumable order costs against the shuffle buffer's order, in paired rounds.

Run (about 6 minutes on 2 cores; the data is made once and kept in TFPIPE_BENCH_DATA):
  TFPIPE_BENCH_DATA=/tmp/tfpipe-bench python -m pytest benchmarks/test_resume_speed.py \
      -q -s -o addopts=""

The decision it informs: `order="resumable"` is the training default
(tfpipe/pipeline/config.py, DEFAULT_TRAINING_ORDER) when it costs at most 5% throughput
against `order="shuffle_buffer"`, the order before it. Both orders run the same records,
preset and settings (the defaults: cache="auto" caches these datasets in memory, both orders
do), and again with cache="none", as data larger than the RAM budget is read. Each row is a
throughput ratio (resumable / shuffle_buffer, the geometric mean of same-round pairs with its
95% interval) next to CPU ms per example of both (benchmarks/paired.py).

Data: benchmarks/conftest.py's 800 ImageNet-like JPEGs in 8 shards at batch 128 (uint8, 224
px), and its 200k-row 40-column table at batch 1024.
"""

from __future__ import annotations

import os

import paired
import pytest

import tfpipe

pytest.importorskip("tensorflow")

SECONDS = float(os.environ.get("TFPIPE_BENCH_SECONDS", "5"))
WARMUP = float(os.environ.get("TFPIPE_BENCH_WARMUP", "2"))
RUNS = int(os.environ.get("TFPIPE_BENCH_RUNS", "6"))
GOAL = 0.95  # at most 5% slower
COMMAND = 'TFPIPE_BENCH_DATA={} python -m pytest benchmarks/test_resume_speed.py -q -s -o addopts="" -k {}'


def contenders(data: str, batch: int) -> dict:
    def make(order: str, cache: str):
        return lambda: tfpipe.build(data, batch_size=batch, seed=1, order=order, cache=cache)

    return {
        "shuffle_buffer": make("shuffle_buffer", "auto"),
        "resumable": make("resumable", "auto"),
        "shuffle_buffer, cache=none": make("shuffle_buffer", "none"),
        "resumable, cache=none": make("resumable", "none"),
    }


def run(benchmark, name: str, data: str, batch: int) -> None:
    from test_pipeline_speed import publish

    results = benchmark.pedantic(
        paired.rounds,
        args=(contenders(data, batch),),
        kwargs={
            "examples_per_element": batch,
            "n_rounds": RUNS,
            "seconds": SECONDS,
            "warmup": WARMUP,
            "on_window": paired.print_window,
        },
        rounds=1,
        iterations=1,
    )
    command = COMMAND.format(os.environ.get("TFPIPE_BENCH_DATA", "<dir>"), name)
    rows = [
        paired.row(
            results,
            "resumable",
            "shuffle_buffer",
            target=f"{name}: resumable vs shuffle_buffer order, defaults (cache=auto), >= {GOAL}x",
            goal=GOAL,
            command=command,
        ),
        paired.row(
            results,
            "resumable, cache=none",
            "shuffle_buffer, cache=none",
            target=f"{name}: resumable vs shuffle_buffer order, cache=none, >= {GOAL}x",
            goal=GOAL,
            command=command,
        ),
    ]
    publish(benchmark, f"resume-{name}", rows, results)


def test_resumable_order_cost_imagenet(benchmark, imagenet_shards):
    run(benchmark, "imagenet", imagenet_shards, 128)


def test_resumable_order_cost_tabular(benchmark, table_40):
    run(benchmark, "tabular", table_40[1], 1024)

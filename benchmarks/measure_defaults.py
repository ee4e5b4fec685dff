"""Measures the PipelineConfig / preset defaults that AUTOTUNE does not decide, in paired rounds.

Run: TFPIPE_BENCH_DATA=/tmp/tfpipe-bench python benchmarks/measure_defaults.py [SWEEP ...]
(SWEEP: threads, read, image, verify; none: all, about 8 minutes on 2 cores). It reuses the
datasets benchmarks/conftest.py makes (800 ImageNet-like JPEGs in 8 shards, batch 128,
image_size 224; a 200k-row 40-column table at batch 1024), making them when missing.

Each sweep times the default and every alternative once per round, alternating the order
(benchmarks/paired.py), and prints one table row per alternative: its throughput ratio to the
default with a 95% interval, cores busy and CPU ms per example of both. A ratio whose interval
holds 1.0 is "no difference measured". The figures are quoted in the comments of
tfpipe/pipeline/config.py and tfpipe/modalities/images/preset.py and in benchmarks/RESULTS.md.

The read sweep runs with cache="none": with the default cache the records are read from
memory after the first epoch, so read settings cannot matter there.
"""

from __future__ import annotations

import os
import sys
import tempfile

import paired

import tfpipe

SECONDS = float(os.environ.get("TFPIPE_BENCH_SECONDS", "4"))
WARMUP = float(os.environ.get("TFPIPE_BENCH_WARMUP", "2"))
RUNS = int(os.environ.get("TFPIPE_BENCH_RUNS", "4"))
COMMAND = "TFPIPE_BENCH_DATA={} python benchmarks/measure_defaults.py {}"

SWEEPS: dict[str, tuple[str, dict[str, dict]]] = {
    "threads": (
        "images",
        {
            "default": {},
            "max_intra_op_parallelism=0 (TF's)": {"max_intra_op_parallelism": 0},
            "private_threadpool_size=2": {"private_threadpool_size": 2},
            "private_threadpool_size=4": {"private_threadpool_size": 4},
            "deterministic=True": {"deterministic": True},
            "map_parallelism=2": {"map_parallelism": 2},
            "prefetch=2": {"prefetch": 2},
        },
    ),
    "read": (
        "images",
        {
            "default": {"cache": "none"},
            "cycle_length=4": {"cache": "none", "cycle_length": 4},
            "reader_buffer=256 KiB": {"cache": "none", "reader_buffer": 256 << 10},
            "block_length=4": {"cache": "none", "block_length": 4},
            "verify_shards=False": {"cache": "none", "verify_shards": False},
            "cache=auto (memory)": {},
        },
    ),
    "image": (
        "images",
        {
            "default": {},
            "resize_method=bicubic": {"resize_method": "bicubic"},
            "dtype=bfloat16": {"dtype": "bfloat16"},
            "dtype=float32": {"dtype": "float32"},
        },
    ),
    "verify": (
        "table",
        {
            "default": {},
            "verify_shards=False": {"verify_shards": False},
            "cache=none": {"cache": "none"},
        },
    ),
}


def sweep(name: str, data: str, batch: int, variants: dict[str, dict]) -> list[paired.Row]:
    print(f"\n{name} ({data}, batch {batch})", flush=True)
    makers = {
        label: (lambda kw=kw: tfpipe.build(data, batch_size=batch, **kw)) for label, kw in variants.items()
    }
    results = paired.rounds(
        makers,
        examples_per_element=batch,
        n_rounds=RUNS,
        seconds=SECONDS,
        warmup=WARMUP,
        on_window=paired.print_window,
    )
    base = "default" + (" (cache=none)" if name == "read" else "")
    return [
        paired.row(
            results,
            label,
            "default",
            target=f"{name}: {label} vs {base}",
            goal=None,
            command=COMMAND.format(os.environ.get("TFPIPE_BENCH_DATA", "<dir>"), name),
        )
        for label in variants
        if label != "default"
    ]


def main() -> None:
    root = os.environ.get("TFPIPE_BENCH_DATA") or tempfile.mkdtemp(prefix="tfpipe-bench-")
    sys.path.insert(0, os.path.dirname(__file__))
    import conftest  # the benchmark datasets

    data = {
        "images": (
            conftest._convert(
                _images(root, conftest), os.path.join(root, "imagenet"), format="imagenet", num_shards=8
            ),
            128,
        ),
        "table": (_table(root, conftest)[1], 1024),
    }
    wanted = sys.argv[1:] or list(SWEEPS)
    rows: list[paired.Row] = []
    for name in wanted:
        kind, variants = SWEEPS[name]
        rows += sweep(name, *data[kind], variants)
    print("\n" + paired.table(rows))


def _images(root: str, conftest) -> str:
    src = os.path.join(root, "images")
    if not os.path.isdir(src):
        from tfpipe.testing import fake_data

        fake_data.write_image_folder(src, classes=10, per_class=conftest.N_IMAGES // 10, workers=2)
    return src


def _table(root: str, conftest) -> tuple[str, str]:
    from tfpipe.testing import fake_data

    csv = os.path.join(root, "table40.csv")
    if not os.path.exists(csv):
        fake_data.write_table(fake_data.make_table(conftest.N_ROWS, columns=39, label_classes=2), csv)
    return csv, conftest._convert(csv, os.path.join(root, "table40"), label="label", num_shards=8)


if __name__ == "__main__":
    main()

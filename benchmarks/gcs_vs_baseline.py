"""build() against the baseline pipeline, both reading gs:// without a cache, paired: on 5 MB
shards and on shards of convert's default size, on the local GCS twin unshaped and shaped like
GCS; and the first epoch of a cached build() against the baseline's.

Run: TFPIPE_BENCH_DATA=/tmp/tfpipe-bench python benchmarks/gcs_vs_baseline.py [DATASET ...]
(DATASET: small, default; none: both, about 20 minutes on 2 cores, most of it making and
converting 3,400 images the first time).
Tiny check: TFPIPE_BENCH_DATA=/tmp/tiny TFPIPE_BENCH_IMAGES=40 TFPIPE_GCS_DEFAULT_IMAGES=60 \
    TFPIPE_GCS_DEFAULT_SHARD=2MiB TFPIPE_BENCH_BATCH=16 TFPIPE_BENCH_SECONDS=0.5 \
    TFPIPE_BENCH_WARMUP=0.2 TFPIPE_BENCH_RUNS=2 python benchmarks/gcs_vs_baseline.py

Datasets, each converted straight to the twin by `tfpipe.convert` (as a user converts to gs://,
so each split has its commit marker, tfpipe/commit_markers.py):
- small: TFPIPE_BENCH_IMAGES (800) ImageNet-like JPEGs in TFPIPE_GCS_SHARDS (16) shards of ~5.4 MB;
- default: TFPIPE_GCS_DEFAULT_IMAGES (2,600) JPEGs at convert's default shard size
  (TFPIPE_GCS_DEFAULT_SHARD, default 128MiB): 3 shards of ~94 MB, each two of TensorFlow's
  64 MiB read requests.
The small dataset is also copied object by object without its marker ("small, no marker"):
what a dataset copied to gs:// by another tool costs, whose checks read tfpipe.json.

Contenders, per dataset and twin shaping (TFPIPE_GCS_SHAPINGS, "unshaped,like_gcs"):
- steady state (benchmarks/paired.py windows: TFPIPE_BENCH_WARMUP 2 s, then
  TFPIPE_BENCH_SECONDS 4 s, TFPIPE_BENCH_RUNS 4 rounds): the baseline (tfpipe/bench/recipe.py,
  unchanged, repeated) and `tfpipe.build(data, cache="none")`, whose every epoch reads gs://;
- first epoch: a fresh pipeline from `iter()` to its first epoch's last batch, the baseline and
  `tfpipe.build(data, cache="memory")` (which loads every record once, then orders from memory).
Ratios are tfpipe / baseline, examples/s and CPU ms per example of the reading process (the
twin runs in processes of its own; its CPU is printed per sweep).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gcs_twin
import measure_defaults
import paired

from tfpipe import storage
from tfpipe.manifest import MANIFEST_NAME, Manifest
from tfpipe.testing.gcs import LIKE_GCS, Shaping

SMALL_SHARDS = int(os.environ.get("TFPIPE_GCS_SHARDS", "16"))
DEFAULT_IMAGES = int(os.environ.get("TFPIPE_GCS_DEFAULT_IMAGES", "2600"))
DEFAULT_SHARD = os.environ.get("TFPIPE_GCS_DEFAULT_SHARD", "128MiB")
BATCH = int(os.environ.get("TFPIPE_BENCH_BATCH", "128"))
SHAPINGS = {"unshaped": Shaping(), "like_gcs": LIKE_GCS}
COMMAND = "TFPIPE_BENCH_DATA={} python benchmarks/gcs_vs_baseline.py {}"


def image_folder(root: str, name: str, n: int, seed: int) -> str:
    from tfpipe.testing import fake_data

    src = os.path.join(root, name)
    if not os.path.isdir(src):
        fake_data.write_image_folder(src, classes=10, per_class=n // 10, seed=seed, workers=2)
    return src


def datasets(root: str, bucket: str, which: list[str]) -> dict[str, str]:
    """The datasets on the twin by name (see the module doc), converted or copied now."""
    import conftest

    import tfpipe

    out = {}
    if "small" in which:
        src = image_folder(root, "images", conftest.N_IMAGES, seed=0)
        out["small"] = f"{bucket}/small"
        tfpipe.convert(src, out["small"], format="imagenet", num_shards=SMALL_SHARDS, workers=2)
        out["small, no marker"] = copy_without_marker(out["small"], f"{bucket}/small-copy")
    if "default" in which:
        src = image_folder(root, f"images-{DEFAULT_IMAGES}", DEFAULT_IMAGES, seed=5)
        out["default"] = f"{bucket}/default"
        tfpipe.convert(src, out["default"], format="imagenet", shard_size=DEFAULT_SHARD, workers=2)
    return out


def copy_without_marker(data: str, dest: str) -> str:
    manifest = Manifest.load(data)
    for name in [MANIFEST_NAME, *(s.name for s in manifest.splits["train"].shards)]:
        storage.write_atomic(storage.join(dest, name), storage.read_bytes(storage.join(data, name)))
    return dest


def first_epoch(make, steps: int) -> paired.Window:
    """One window: a fresh pipeline from `iter()` to its first epoch's last batch."""
    ds = make()
    cpu0, t0 = time.process_time(), time.monotonic()
    it = iter(ds)
    for _ in range(steps):
        next(it)
    wall, cpu = time.monotonic() - t0, time.process_time() - cpu0
    return paired.Window(steps * BATCH / wall, cpu * 1e3 / (steps * BATCH), cpu / wall)


def first_epoch_rounds(makers: dict, steps: int) -> dict[str, list[paired.Window]]:
    """paired.rounds for first epochs: every contender once per round, the order alternating."""
    names = list(makers)
    out: dict[str, list[paired.Window]] = {name: [] for name in names}
    for r in range(measure_defaults.RUNS):
        for name in names if r % 2 == 0 else reversed(names):
            out[name].append(first_epoch(makers[name], steps))
            paired.print_window(r, name, out[name][-1])
    return out


def sweep(gcs, name: str, data: str, shaping: str) -> list[paired.Row]:
    import tfpipe
    from tfpipe.bench.recipe import recipe_dataset

    manifest = Manifest.load(data)
    files, split = manifest.shard_paths("train"), manifest.splits["train"]
    steps = split.examples // BATCH
    command = COMMAND.format(os.environ.get("TFPIPE_BENCH_DATA", "<dir>"), name.split(",")[0])
    where = f"{name} ({len(files)} shards of {split.bytes / len(files) / 1e6:.1f} MB), {shaping}"
    print(f"\n{where}", flush=True)
    steady = {
        "baseline": lambda: recipe_dataset(files, batch_size=BATCH).repeat(),
        "tfpipe cache=none": lambda: tfpipe.build(data, batch_size=BATCH, cache="none"),
    }
    with gcs_twin.TwinCpu(gcs) as twin:
        results = paired.rounds(
            steady,
            examples_per_element=BATCH,
            n_rounds=measure_defaults.RUNS,
            seconds=measure_defaults.SECONDS,
            warmup=measure_defaults.WARMUP,
            on_window=paired.print_window,
        )
        rows = [
            paired.row(
                results,
                "tfpipe cache=none",
                "baseline",
                target=f"{where}: uncached",
                goal=1.0,
                command=command,
            )
        ]
        if "no marker" not in name:
            epochs = first_epoch_rounds(
                {
                    "baseline, first epoch": lambda: recipe_dataset(files, batch_size=BATCH),
                    "tfpipe cache=memory, first epoch": lambda: tfpipe.build(
                        data, batch_size=BATCH, cache="memory"
                    ),
                },
                steps,
            )
            rows.append(
                paired.row(
                    epochs,
                    "tfpipe cache=memory, first epoch",
                    "baseline, first epoch",
                    target=f"{where}: first epoch, cached",
                    goal=1.0,
                    command=command,
                )
            )
    print(
        f"  the twin kept {twin.cores:.2f} cores busy (proxy {twin.proxy_s:.1f} s, emulator {twin.emulator_s:.1f} s)"
    )
    return rows


def main() -> None:
    root = os.environ.get("TFPIPE_BENCH_DATA") or tempfile.mkdtemp(prefix="tfpipe-bench-")
    which = sys.argv[1:] or ["small", "default"]
    if set(which) - {"small", "default"}:
        raise SystemExit(f"unknown dataset in {which}: expected small, default")
    gcs = gcs_twin.start()
    rows: list[paired.Row] = []
    try:
        data = datasets(root, gcs.create_bucket("bench"), which)
        for shaping in os.environ.get("TFPIPE_GCS_SHAPINGS", "unshaped,like_gcs").split(","):
            gcs.shape(**SHAPINGS[shaping.strip()].to_json())
            for name, path in data.items():
                rows += sweep(gcs, name, path, shaping.strip())
    finally:
        gcs.stop()
    print(f"\nbatch {BATCH}; load average {os.getloadavg()[0]:.2f}\n")
    print(paired.table(rows))


if __name__ == "__main__":
    main()

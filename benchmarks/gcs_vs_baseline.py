"""build() against the baseline pipeline, both reading gs:// without a cache, paired: on 5 MB
shards and on shards of convert's default size, on the local GCS twin unshaped and shaped like
GCS; and the first epoch of a cached build() against the baseline's.

Run: TFPIPE_BENCH_DATA=/tmp/tfpipe-bench python benchmarks/gcs_vs_baseline.py [DATASET ...]
(DATASET: small, default; none: both, about 20 minutes on 2 cores, plus a few minutes making
and converting 3,400 images the first time).
Tiny check: TFPIPE_BENCH_DATA=/tmp/tiny TFPIPE_BENCH_IMAGES=40 TFPIPE_GCS_DEFAULT_IMAGES=60 \
    TFPIPE_GCS_DEFAULT_SHARD=2MiB TFPIPE_BENCH_BATCH=16 TFPIPE_BENCH_SECONDS=0.5 \
    TFPIPE_BENCH_WARMUP=0.2 TFPIPE_BENCH_RUNS=2 python benchmarks/gcs_vs_baseline.py

Datasets, each converted straight to the twin by `tfpipe.convert` (as a user converts to gs://,
so each split has its commit marker, tfpipe/format/commit_markers.py):
- small: TFPIPE_BENCH_IMAGES (800) ImageNet-like JPEGs in TFPIPE_GCS_SHARDS (16) shards of ~5.4 MB;
- default: TFPIPE_GCS_DEFAULT_IMAGES (2,600) JPEGs at convert's default shard size
  (TFPIPE_GCS_DEFAULT_SHARD, default 128MiB): 3 shards of ~94 MB, each two of TensorFlow's
  64 MiB read requests.
The small dataset is also copied object by object without its marker ("small, no marker"):
what a dataset copied to gs:// by another tool costs, whose checks read tfpipe.json.

Contenders, per dataset and twin shaping (TFPIPE_GCS_SHAPINGS, "unshaped,like_gcs"), each
round a fresh pipeline of each, the order alternating between rounds (TFPIPE_BENCH_RUNS, 4):
- the baseline (tfpipe/modalities/images/bench/recipe.py, unchanged, repeated) and `tfpipe.build(data,
  cache="none")`, whose every epoch reads gs://: the first epoch (from `iter()`, the start
  included), then TFPIPE_BENCH_EPOCHS (1) more, timed apart: the steady state. Windows are
  whole epochs: the resumable order reads a window of up to `shuffle_buffer` records whole,
  and the next one ahead, so a shorter window takes reads unevenly (on 3 shards of 93 MB, a
  4 s window after a 2 s warm-up took twice the baseline's reading);
- `tfpipe.build(data, cache="memory")`: its first epoch, which loads every record once
  (before its first batch), then orders from memory.
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
from tfpipe.format.manifest import MANIFEST_NAME, Manifest
from tfpipe.testing.gcs import LIKE_GCS, Shaping

SMALL_SHARDS = int(os.environ.get("TFPIPE_GCS_SHARDS", "16"))
DEFAULT_IMAGES = int(os.environ.get("TFPIPE_GCS_DEFAULT_IMAGES", "2600"))
DEFAULT_SHARD = os.environ.get("TFPIPE_GCS_DEFAULT_SHARD", "128MiB")
BATCH = int(os.environ.get("TFPIPE_BENCH_BATCH", "128"))
EPOCHS = int(os.environ.get("TFPIPE_BENCH_EPOCHS", "1"))
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


def epochs(make, steps: int, more: int) -> tuple[paired.Window, paired.Window | None]:
    """A fresh pipeline's first epoch (from `iter()`, its start included) and the `more`
    epochs after it (None if 0). Windows of whole epochs: a window shorter than an epoch
    would take the reading of a resumable-order window, read whole and ahead, unevenly."""
    ds = make()
    cpu0, t0 = time.process_time(), time.monotonic()
    it = iter(ds)
    for _ in range(steps):
        next(it)
    cpu1, t1 = time.process_time(), time.monotonic()
    for _ in range(more * steps):
        next(it)
    cpu2, t2 = time.process_time(), time.monotonic()
    n = steps * BATCH

    def window(cpu: float, wall: float, examples: int) -> paired.Window:
        return paired.Window(examples / wall, cpu * 1e3 / examples, cpu / wall)

    return window(cpu1 - cpu0, t1 - t0, n), (window(cpu2 - cpu1, t2 - t1, more * n) if more else None)


def epoch_rounds(makers: dict, steps: int) -> tuple[dict, dict]:
    """Every contender once per round, the order alternating (as benchmarks/paired.py): the
    first epochs of all, and the steady epochs of those `makers` gives a count of (make, more)."""
    names = list(makers)
    first: dict[str, list[paired.Window]] = {n: [] for n in names}
    steady: dict[str, list[paired.Window]] = {n: [] for n, (_, more) in makers.items() if more}
    for r in range(measure_defaults.RUNS):
        for name in names if r % 2 == 0 else reversed(names):
            make, more = makers[name]
            one, rest = epochs(make, steps, more)
            first[name].append(one)
            paired.print_window(r, f"{name}, epoch 1", one)
            if rest is not None:
                steady[name].append(rest)
                paired.print_window(r, f"{name}, epochs 2+", rest)
    return first, steady


def sweep(gcs, name: str, data: str, shaping: str) -> list[paired.Row]:
    import tfpipe
    from tfpipe.modalities.images.bench.recipe import recipe_dataset

    manifest = Manifest.load(data)
    files, split = manifest.shard_paths("train"), manifest.splits["train"]
    steps = split.examples // BATCH
    command = COMMAND.format(os.environ.get("TFPIPE_BENCH_DATA", "<dir>"), name.split(",")[0])
    where = f"{name} ({len(files)} shards of {split.bytes / len(files) / 1e6:.1f} MB), {shaping}"
    print(f"\n{where}", flush=True)
    makers = {
        "baseline": (lambda: recipe_dataset(files, batch_size=BATCH).repeat(), EPOCHS),
        "tfpipe cache=none": (lambda: tfpipe.build(data, batch_size=BATCH, cache="none"), EPOCHS),
    }
    if "no marker" not in name:
        makers["tfpipe cache=memory"] = (lambda: tfpipe.build(data, batch_size=BATCH, cache="memory"), 0)
    with gcs_twin.TwinCpu(gcs) as twin:
        first, steady = epoch_rounds(makers, steps)
    print(
        f"  the twin kept {twin.cores:.2f} cores busy (proxy {twin.proxy_s:.1f} s, emulator {twin.emulator_s:.1f} s)"
    )

    def row(results: dict, contender: str, what: str, goal: float | None) -> paired.Row:
        return paired.row(
            results, contender, "baseline", target=f"{where}: {what}", goal=goal, command=command
        )

    epochs_timed = "epoch 2" if EPOCHS == 1 else f"epochs 2-{EPOCHS + 1}"
    rows = [row(steady, "tfpipe cache=none", f"uncached, {epochs_timed}", 1.0)]
    if "tfpipe cache=memory" in first:
        rows.append(row(first, "tfpipe cache=memory", "first epoch, cache=memory", 1.0))
    rows.append(row(first, "tfpipe cache=none", "first epoch, cache=none", None))
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

"""tfpipe beside the loaders a user would pick instead (NVIDIA DALI on the CPU, Grain), the
baseline and the decode-only ceiling, on the same TFRecord shards, in paired rounds.

Run, in a venv with the peers (benchmarks/requirements-peers.txt):
    TFPIPE_BENCH_DATA=/tmp/tfpipe-bench /work/venv-perf/bin/python benchmarks/peers_compare.py
(about 10 minutes on 2 cores with the defaults, plus a minute or two making the data once).
Tiny check: TFPIPE_BENCH_DATA=/tmp/tiny TFPIPE_BENCH_IMAGES=80 TFPIPE_BENCH_BATCH=16 \
    TFPIPE_BENCH_SECONDS=0.5 TFPIPE_BENCH_WARMUP=0.5 TFPIPE_BENCH_RUNS=2 .../python benchmarks/peers_compare.py
Environment: TFPIPE_BENCH_DATA, TFPIPE_BENCH_IMAGES (800 ImageNet-like JPEGs, ~108 KB, in 8
shards), TFPIPE_BENCH_BATCH (128), TFPIPE_BENCH_SECONDS (5), TFPIPE_BENCH_WARMUP (3: it
covers Grain's worker start), TFPIPE_BENCH_RUNS (5), TFPIPE_PEERS (all: a comma list of the
contenders' names below).

The contenders (benchmarks/peers.py says how each peer is written, and why so):
- tfpipe uint8: `tfpipe.build(data, batch_size=128)`, its defaults (cache="auto": the records
  in memory after the first epoch); tfpipe uint8, cache=none: every epoch reads the files;
- baseline: tfpipe/modalities/images/bench/recipe.py, unchanged (float32, bicubic, no cache);
- ceiling: benchmarks/contenders.py decode_only (parse, crop window, decode_and_crop_jpeg);
- dali, grain: benchmarks/peers.py;
- keras: `keras.utils.image_dataset_from_directory` over the source JPEG folder, with a
  random flip: a different output (the whole image resized to 224x224, float32), reported
  beside the others, not as a like-for-like ratio.

Each window counts the CPU of the whole process tree (Grain decodes in child processes), from
psutil: CPU ms per example and cores busy. Contenders alternate order between rounds
(benchmarks/paired.py), and ratios are paired by round with 95% t intervals. The targets:
tfpipe >= 1.2x each peer's examples/s and <= 0.85x its CPU per example, the whole interval
clear of each.
"""

from __future__ import annotations

import contextlib
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import paired
import peers
import psutil

BATCH = int(os.environ.get("TFPIPE_BENCH_BATCH", "128"))
SECONDS = float(os.environ.get("TFPIPE_BENCH_SECONDS", "5"))
WARMUP = float(os.environ.get("TFPIPE_BENCH_WARMUP", "3"))
RUNS = int(os.environ.get("TFPIPE_BENCH_RUNS", "5"))
IMAGES = int(os.environ.get("TFPIPE_BENCH_IMAGES", "800"))
COMMAND = "TFPIPE_BENCH_DATA={} python benchmarks/peers_compare.py"
SPEED_GOAL, CPU_GOAL = 1.2, 0.85


def tree_cpu() -> float:
    """User + system CPU seconds of this process and its live descendants."""
    me = psutil.Process()
    total = 0.0
    for p in [me, *me.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def window(make: Callable[[], Any]) -> paired.Window:
    """One steady-state window: the first element and WARMUP seconds untimed, then SECONDS."""
    source = make()
    it = iter(source)
    try:
        next(it)
        end = time.monotonic() + WARMUP
        while time.monotonic() < end:
            next(it)
        n, cpu0, t0 = 0, tree_cpu(), time.monotonic()
        while time.monotonic() - t0 < SECONDS:
            next(it)
            n += 1
        wall, cpu = time.monotonic() - t0, tree_cpu() - cpu0
    finally:
        if hasattr(it, "close"):
            it.close()  # Grain's worker processes
    return paired.Window(n * BATCH / wall, cpu * 1e3 / (n * BATCH), cpu / wall)


def data(root: str) -> tuple[str, str]:
    """The JPEG folder and its conversion (8 shards), made once under `root`."""
    import tfpipe
    from tfpipe.testing import fake_data

    src = os.path.join(root, f"peers-images-{IMAGES}")
    if not os.path.isdir(src):
        fake_data.write_image_folder(src, classes=10, per_class=IMAGES // 10, workers=2)
    dest = os.path.join(root, f"peers-imagenet-{IMAGES}")
    if not os.path.exists(os.path.join(dest, "tfpipe.json")):
        tfpipe.convert(src, dest, format="imagenet", num_shards=8, overwrite=True)
    return src, dest


def contenders(src: str, dest: str) -> dict[str, Callable[[], Any]]:
    import contenders as ours

    import tfpipe
    from tfpipe._tf import tf
    from tfpipe.modalities.images.bench.recipe import recipe_dataset

    tf_ = tf()
    files = tfpipe.Manifest.load(dest).shard_paths("train")
    indexes = peers.dali_indexes(files, os.path.join(dest + "-dali-idx"))

    def keras() -> Any:
        ds = tf_.keras.utils.image_dataset_from_directory(
            src, image_size=(peers.IMAGE, peers.IMAGE), batch_size=BATCH, shuffle=True, seed=1, verbose=False
        )
        flip = tf_.keras.layers.RandomFlip("horizontal")
        ds = ds.map(lambda x, y: (flip(x, training=True), y), num_parallel_calls=tf_.data.AUTOTUNE)
        return ds.repeat().prefetch(tf_.data.AUTOTUNE)

    out = {
        "tfpipe uint8": lambda: tfpipe.build(dest, batch_size=BATCH),
        "tfpipe uint8, cache=none": lambda: tfpipe.build(dest, batch_size=BATCH, cache="none"),
        "baseline": lambda: recipe_dataset(files, batch_size=BATCH).repeat(),
        "ceiling": lambda: ours.decode_only(dest, BATCH),
        "dali": lambda: peers.DaliBatches(peers.dali_pipeline(files, indexes, BATCH)),
        "grain": lambda: peers.grain_loader(files, BATCH),
        "keras (whole-image resize)": keras,
    }
    wanted = os.environ.get("TFPIPE_PEERS")
    return {k: v for k, v in out.items() if not wanted or k in wanted.split(",")}


def rounds(makers: dict[str, Callable[[], Any]]) -> dict[str, list[paired.Window]]:
    names = list(makers)
    out: dict[str, list[paired.Window]] = {n: [] for n in names}
    for r in range(RUNS):
        for name in names if r % 2 == 0 else reversed(names):
            out[name].append(window(makers[name]))
            paired.print_window(r, name, out[name][-1])
    return out


def cpu_model() -> str:
    with open("/proc/cpuinfo") as f:
        info = f.read()
    name = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), "?")
    flags = next((ln.split(":", 1)[1].split() for ln in info.splitlines() if ln.startswith("flags")), [])
    simd = [f for f in flags if f.startswith(("avx512", "amx")) or f in ("avx2", "avx_vnni")]
    return f"{name}, {peers.cores()} cores ({platform.machine()}; {' '.join(simd)})"


def report(results: dict[str, list[paired.Window]], command: str) -> None:
    versions = []
    for module in ("tensorflow", "nvidia.dali", "grain", "cv2", "keras"):
        with contextlib.suppress(ImportError, AttributeError):
            versions.append(f"{module} {__import__(module, fromlist=['_']).__version__}")
    print(f"\n{cpu_model()}; {', '.join(versions)}; load average {os.getloadavg()[0]:.2f}\n")
    print("| contender | examples/s | CPU ms/example | cores busy |\n|---|---|---|---|")
    for name, med in paired.summary(results).items():
        print(
            f"| {name} | {med['examples_per_sec']:,.0f} | {med['cpu_ms_per_example']:.3f} | {med['cores_busy']:.2f} |"
        )
    ours = "tfpipe uint8"
    rows = [
        paired.row(
            results,
            name,
            peer,
            target=f"{name} vs {peer}",
            goal=SPEED_GOAL if peer in ("dali", "grain") else None,
            command=command,
        )
        for name in (ours, "tfpipe uint8, cache=none")
        for peer in ("dali", "grain", "baseline", "ceiling", "keras (whole-image resize)")
        if name in results and peer in results
    ]
    print()
    print(paired.table(rows))
    for r in rows:
        if r.goal is not None:
            cpu_ok = (
                "met" if r.cpu.high <= CPU_GOAL else ("met (mean)" if r.cpu.mean <= CPU_GOAL else "MISSED")
            )
            print(f"  {r.target}: CPU per example <= {CPU_GOAL}x: {cpu_ok} ({r.cpu})")


def main() -> None:
    root = os.environ.get("TFPIPE_BENCH_DATA") or tempfile.mkdtemp(prefix="tfpipe-bench-")
    src, dest = data(root)
    started = time.monotonic()
    results = rounds(contenders(src, dest))
    print(f"\n{RUNS} rounds in {time.monotonic() - started:.0f} s")
    report(results, COMMAND.format(os.environ.get("TFPIPE_BENCH_DATA", "<dir>")))


if __name__ == "__main__":
    main()

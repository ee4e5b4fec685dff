"""What a fresh pipeline costs before its first batch: build(), iter() and the first batch,
CPU seconds of this process each, tfpipe (cache="none" and "memory") against the baseline
recipe, in alternating rounds on local shards (no network: the start-up alone).

Run: TFPIPE_BENCH_DATA=/tmp/tfpipe-bench python benchmarks/startup_cost.py
(about 2 minutes on 2 cores; makes TFPIPE_BENCH_IMAGES (800) JPEGs in TFPIPE_GCS_SHARDS (16)
shards the first time). TFPIPE_STARTUP_PERF=1 instead runs only tfpipe's starts, repeatedly,
for `perf record -g -p <pid>` (the pid is printed) to say where their CPU goes.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


ROUNDS = int(os.environ.get("TFPIPE_STARTUP_ROUNDS", "6"))
BATCH = int(os.environ.get("TFPIPE_BENCH_BATCH", "128"))
SHARDS = int(os.environ.get("TFPIPE_GCS_SHARDS", "16"))


def local_data(root: str) -> str:
    import conftest

    import tfpipe
    from tfpipe.testing import fake_data

    src, out = os.path.join(root, "images"), os.path.join(root, "startup-local")
    if not os.path.isdir(src):
        fake_data.write_image_folder(src, classes=10, per_class=conftest.N_IMAGES // 10, seed=0, workers=2)
    if not os.path.isdir(out):
        tfpipe.convert(src, out, format="imagenet", num_shards=SHARDS, workers=2)
    return out


def phases(make) -> tuple[float, float, float]:
    """CPU seconds of make() (the dataset), iter() and the first batch."""
    c0 = time.process_time()
    ds = make()
    c1 = time.process_time()
    it = iter(ds)
    c2 = time.process_time()
    next(it)
    c3 = time.process_time()
    return c1 - c0, c2 - c1, c3 - c2


def main() -> None:
    import tfpipe
    from tfpipe.bench.recipe import recipe_dataset
    from tfpipe.manifest import Manifest

    data = local_data(os.environ.get("TFPIPE_BENCH_DATA") or tempfile.mkdtemp(prefix="tfpipe-bench-"))
    files = Manifest.load(data).shard_paths("train")
    makers = {
        "baseline": lambda: recipe_dataset(files, batch_size=BATCH).repeat(),
        "tfpipe cache=none": lambda: tfpipe.build(data, batch_size=BATCH, cache="none"),
        "tfpipe cache=memory": lambda: tfpipe.build(data, batch_size=BATCH, cache="memory"),
    }
    for make in makers.values():  # first calls trace and import: not what a start costs
        phases(make)
    if os.environ.get("TFPIPE_STARTUP_PERF"):
        print(f"pid {os.getpid()}", flush=True)
        while True:
            phases(makers["tfpipe cache=none"])
    got: dict[str, list[tuple[float, float, float]]] = {n: [] for n in makers}
    names = list(makers)
    for r in range(ROUNDS):
        for name in names if r % 2 == 0 else reversed(names):
            got[name].append(phases(makers[name]))
    print(f"\nCPU seconds before the first batch of {BATCH}, median of {ROUNDS} rounds [min, max]:")
    print(f"{'':22} {'dataset':>18} {'iter()':>18} {'first batch':>18} {'total':>18}")
    for name, runs in got.items():
        cols = [*zip(*runs, strict=True), [sum(r) for r in runs]]
        cells = [f"{statistics.median(c):.3f} [{min(c):.2f}, {max(c):.2f}]" for c in cols]
        print(f"{name:22} " + " ".join(f"{c:>18}" for c in cells))
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

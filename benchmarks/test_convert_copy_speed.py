"""`convert --check header` (a header-checked copy) against a cold raw read of the same files.

Run: python -m pytest benchmarks/test_convert_copy_speed.py -s -p no:randomly
 or: python benchmarks/test_convert_copy_speed.py
Environment: TFPIPE_BENCH_IMAGES (1600), TFPIPE_BENCH_ROUNDS (5), and TFPIPE_BENCH_DATA=<dir>
to keep the generated images there between runs (e.g. to compare two checkouts on one folder).

Every contender starts cold: the source files are evicted from the page cache one by one with
posix_fadvise(POSIX_FADV_DONTNEED) (checked with `fincore`: 0 pages resident afterwards).
`echo 1 > /proc/sys/vm/drop_caches` works in this container too, but it empties the cache of
the whole machine, which other people's measurements share, so it is not used.

The machine is shared, so each round times every contender back to back, the order
alternating between rounds, and reports per contender the wall time and the CPU seconds per
file (this process and its reaped children: user + system); the ratio raw-read time / copy
time is summarised over rounds as a geometric mean with a 95% interval (benchmarks/paired.py).
CPU per file barely moves when a neighbour takes a core; wall time does.
Target: the copy reaches at least 0.7 of the cold raw read's speed.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from paired import ratio

import tfpipe
from tfpipe.testing import fake_data

N_IMAGES = int(os.environ.get("TFPIPE_BENCH_IMAGES", "1600"))  # ~170 MB
N_ROUNDS = int(os.environ.get("TFPIPE_BENCH_ROUNDS", "5"))
TARGET = 0.7


def evict(paths: list[str]) -> None:
    """Drops the files from the page cache, so the next read comes from the disk."""
    os.sync()
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def raw_read(paths: list[str]) -> None:
    for p in paths:
        with open(p, "rb") as f:
            f.read()


def timed(fn: Callable[[], object], paths: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of `fn`, started with `paths` cold."""
    evict(paths)
    wall, cpu = time.perf_counter(), cpu_seconds()
    fn()
    return time.perf_counter() - wall, cpu_seconds() - cpu


def measure(src: str, paths: list[str], out: str, rounds: int, workers: tuple[int, ...]) -> dict:
    def convert(w: int) -> Callable[[], object]:
        def run() -> object:
            dest = os.path.join(out, f"copy_w{w}")
            shutil.rmtree(dest, ignore_errors=True)
            return tfpipe.convert(src, dest, num_shards=8, workers=w, check="header")
        return run

    contenders = {"raw_read": lambda: raw_read(paths), **{f"copy_w{w}": convert(w) for w in workers}}
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in contenders}
    names = list(contenders)
    for r in range(rounds):
        for name in names if r % 2 == 0 else reversed(names):
            times[name].append(timed(contenders[name], paths))
    n = len(paths)
    report = {name: {"wall_s": round(statistics.median(w for w, _ in t), 3),
                     "files_per_s": round(n / statistics.median(w for w, _ in t), 1),
                     "cpu_ms_per_file": round(1000 * statistics.median(c for _, c in t) / n, 3)}
              for name, t in times.items()}
    for w in workers:
        # speed ratio = raw-read time / copy time, paired by round
        interval = ratio([t for t, _ in times["raw_read"]], [t for t, _ in times[f"copy_w{w}"]])
        report[f"copy_w{w}"]["vs_raw_read"] = interval.to_json()
    return report


def make_folder(root: str) -> tuple[str, list[str]]:
    """N_IMAGES ImageNet-like JPEGs (~108 KB, RGB baseline) in 8 class folders, made once per root."""
    src = os.path.join(root, "train")
    done = os.path.join(root, f".made-{N_IMAGES}")
    if os.path.exists(done):
        return src, sorted(os.path.join(src, c, n) for c in os.listdir(src)
                           for n in os.listdir(os.path.join(src, c)))
    shutil.rmtree(src, ignore_errors=True)
    paths = fake_data.write_image_folder(src, classes=8, per_class=N_IMAGES // 8, workers=os.cpu_count() or 1)
    open(done, "w").close()
    return src, paths


def run(root: str) -> dict:
    src, paths = make_folder(root)
    workers = tuple(sorted({1, os.cpu_count() or 1}))
    report = measure(src, paths, os.path.join(root, "out"), N_ROUNDS, workers)
    report["files"] = len(paths)
    report["mean_kb"] = round(sum(os.path.getsize(p) for p in paths) / len(paths) / 1e3, 1)
    report["cores"] = os.cpu_count()
    report["load_avg_1m"] = round(os.getloadavg()[0], 2)
    return report


def test_header_checked_copy_vs_cold_raw_read(tmp_path):
    report = run(os.environ.get("TFPIPE_BENCH_DATA") or str(tmp_path))
    print()
    print(json.dumps(report, indent=1))
    best = max(v["vs_raw_read"]["mean"] for k, v in report.items() if k.startswith("copy_w"))
    print(f"copy at {best:.3f} of the cold raw read's speed (target >= {TARGET})")


if __name__ == "__main__":
    if os.environ.get("TFPIPE_BENCH_DATA"):
        print(json.dumps(run(os.environ["TFPIPE_BENCH_DATA"]), indent=1))
    else:
        with tempfile.TemporaryDirectory(prefix="tfpipe-copy-bench-") as root:
            print(json.dumps(run(root), indent=1))

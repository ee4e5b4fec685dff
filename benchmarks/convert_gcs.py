"""`tfpipe convert` to gs:// on the shaped local GCS twin, against the unshaped twin.

Run: TFPIPE_BENCH_DATA=/tmp/tfpipe-bench python benchmarks/convert_gcs.py
Tiny check: TFPIPE_BENCH_DATA=/tmp/tiny TFPIPE_BENCH_IMAGES=40 TFPIPE_BENCH_ROUNDS=1 \
    TFPIPE_CONVERT_SHARDS=4 python benchmarks/convert_gcs.py
Environment: TFPIPE_BENCH_DATA (the image folder is made there when missing, ~108 KB a
JPEG, and kept), TFPIPE_BENCH_IMAGES (800), TFPIPE_BENCH_ROUNDS (4), TFPIPE_CONVERT_SHARDS
(16), TFPIPE_CONVERT_WORKERS (all cores).

Each round converts the same folder once per contender, each to a fresh destination on one
twin whose shaping changes between contenders, the order alternating between rounds
(benchmarks/paired.py):
- unshaped: loopback, as fast as the twin goes;
- like_gcs: `LIKE_GCS` (30 ms to the first byte, 150 MB/s a connection, 5000 requests/s,
  1000 writes/s);
- like_gcs, 20 MB/s a stream: a slower link, to show whether the uploads share one stream;
- like_gcs, 2 writes/s: far below GCS's initial 1000, so writes get 429s that convert
  retries with backoff and counts (the manifest's `retries`, the CLI summary).
Per contender: wall seconds, shards/s, MB/s of shard bytes, images/s, the requests the twin
answered (writes among them, throttled among them), the retries convert counted (in the
manifest: before its commit; in the run: all, as the CLI summary prints), and the twin's own
CPU in cores; then each contender's time over the unshaped one's, paired by round
(geometric mean, 95% interval).

What to expect: a shard costs convert a handful of requests (its upload, a done-record, and
their latency), so 30 ms each is small next to the upload itself; but the local engine
commits shards one at a time from one process, so one stream's bandwidth bounds its MB/s.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import dataclasses

import gcs_twin
from paired import ratio

import tfpipe
from tfpipe import storage
from tfpipe.testing.gcs import LIKE_GCS, Shaping

N_IMAGES = int(os.environ.get("TFPIPE_BENCH_IMAGES", "800"))
ROUNDS = int(os.environ.get("TFPIPE_BENCH_ROUNDS", "4"))
SHARDS = int(os.environ.get("TFPIPE_CONVERT_SHARDS", "16"))
WORKERS = int(os.environ.get("TFPIPE_CONVERT_WORKERS", str(os.cpu_count() or 1)))
COMMAND = "TFPIPE_BENCH_DATA={} python benchmarks/convert_gcs.py"

CONTENDERS = {
    "unshaped": Shaping(),
    "like_gcs": LIKE_GCS,
    "like_gcs, 20 MB/s a stream": dataclasses.replace(LIKE_GCS, mbps_per_stream=20.0),
    "like_gcs, 2 writes/s": dataclasses.replace(LIKE_GCS, max_writes_per_s=2.0),
}


def images(root: str) -> str:
    from tfpipe.testing import fake_data

    src = os.path.join(root, "images")
    if not os.path.isdir(src):
        fake_data.write_image_folder(src, classes=10, per_class=max(1, N_IMAGES // 10), workers=2)
    return src


def convert_once(gcs, src: str, dest: str, shaping: Shaping) -> dict[str, float]:
    gcs.shape(**dataclasses.asdict(shaping))
    retried = storage.retries()
    try:
        with gcs.recording() as rec, gcs_twin.TwinCpu(gcs) as twin:
            start = time.monotonic()
            manifest = tfpipe.convert(src, dest, num_shards=SHARDS, workers=WORKERS)
            wall = time.monotonic() - start
    finally:
        gcs.shape(**dataclasses.asdict(Shaping()))
    retried_run = sum(storage.retries().values()) - sum(retried.values())
    split = manifest.splits["train"]
    return {
        "seconds": wall,
        "shards/s": len(split.shards) / wall,
        "MB/s": split.bytes / 1e6 / wall,
        "images/s": split.examples / wall,
        "requests": len(rec),
        "writes": sum(r.method in ("POST", "PUT", "PATCH", "DELETE") for r in rec),
        "throttled": sum(r.throttled for r in rec),
        "retries (manifest)": sum((split.retries or {}).values()),
        "retries (run)": retried_run,
        "twin cores": twin.cores,
    }


def main() -> None:
    root = os.environ.get("TFPIPE_BENCH_DATA") or "/tmp/tfpipe-bench"
    src = images(root)
    gcs = gcs_twin.start()
    try:
        bucket = gcs.create_bucket("convert-bench")
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in CONTENDERS}
        names = list(CONTENDERS)
        for r in range(ROUNDS):
            for name in names if r % 2 == 0 else reversed(names):
                dest = f"{bucket}/r{r}-{names.index(name)}"
                result = convert_once(gcs, src, dest, CONTENDERS[name])
                runs[name].append(result)
                print(
                    f"  round {r}: {name:<28} {result['seconds']:6.2f} s {result['MB/s']:7.1f} MB/s "
                    f"{result['throttled']:3} throttled {result['retries (run)']:3} retries",
                    flush=True,
                )
    finally:
        gcs.stop()
    print(table(runs))


def table(runs: dict[str, list[dict[str, float]]]) -> str:
    keys = list(next(iter(runs.values()))[0])
    lines = [
        f"\n{N_IMAGES} images into {SHARDS} shards, {WORKERS} workers, {ROUNDS} rounds; medians "
        f"(load average {os.getloadavg()[0]:.2f}). `{COMMAND.format(os.environ.get('TFPIPE_BENCH_DATA', '<dir>'))}`",
        "",
        "| contender | " + " | ".join(keys) + " | time vs unshaped (95% interval) |",
        "|---|" + "---|" * (len(keys) + 1),
    ]
    base = [r["seconds"] for r in runs["unshaped"]]
    for name, rs in runs.items():
        cells = [f"{statistics.median(r[k] for r in rs):.2f}" for k in keys]
        vs = "-" if name == "unshaped" else str(ratio([r["seconds"] for r in rs], base))
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {vs} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()

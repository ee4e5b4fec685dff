"""What each way of checking a gs:// dataset's generation costs in TensorFlow's graph: CPU per
check in the reading process, the twin's requests and bytes per check.

Run: python benchmarks/gcs_check_cost.py   (about a minute on 2 cores)
Environment: TFPIPE_CHECK_CALLS (50 checks per op), TFPIPE_CHECK_OBJECTS ("16,1024": objects
beside the manifest, a dataset of that many shards), TFPIPE_GCS_SHAPED ("0,1": unshaped, and
shaped `like_gcs()`).

The ops, each run TFPIPE_CHECK_CALLS times inside one tf.data map (graph code, as the reader
runs it), after one call that is not timed:
- `read_file tfpipe.json`: what the reader did before issue 27: TensorFlow's gs:// reader
  fills a GCS_READ_CACHE_BLOCK_SIZE_MB block (64 MiB) for every file it opens, however small;
- `1-byte read`: FixedLengthRecordDataset of the manifest's first byte (the same block);
- `matching_files <dir>/<marker>`: a listing for a marker object beside the shards. TensorFlow
  lists every object under the pattern's folder (recursively) and matches the names itself, so
  its cost grows with the shards beside the marker;
- `matching_files <dir>/<sub>/<marker>`: the same with the marker alone in a sub-folder;
- `empty map`: the map with a constant, the floor every figure includes.
The twin is two processes of its own, so its CPU is not in the reader's figure. TensorFlow's
GCS_* variables are its defaults (the benchmark twin), as in training.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gcs_twin

from tfpipe.testing.gcs import LIKE_GCS, Shaping

CALLS = int(os.environ.get("TFPIPE_CHECK_CALLS", "50"))
OBJECTS = [int(n) for n in os.environ.get("TFPIPE_CHECK_OBJECTS", "16,1024").split(",")]
SHAPED = [s.strip() == "1" for s in os.environ.get("TFPIPE_CHECK_SHAPED", "0,1").split(",")]
MARKER = ".tfpipe-commit-train-0123456789abcdef"


def populate(bucket: str, n: int) -> str:
    """A folder of `n` small shards, a 4 KB manifest, a marker beside them and one in `sub/`."""
    from tfpipe import storage

    root = f"{bucket}/ds{n}"
    storage.write_atomic(f"{root}/tfpipe.json", json.dumps({"pad": "x" * 4000}).encode())
    for name in [MARKER, f"sub/{MARKER}"] + [f"train-{i:05d}-of-{n:05d}" for i in range(n)]:
        storage.write_atomic(f"{root}/{name}", b"m")
    return root


def ops(tf, root: str) -> dict:
    """Each op as a function of a path (a dataset element, as in the reader: a constant path
    would be folded by TensorFlow's graph optimizer and read once)."""

    def first_byte(path):
        return tf.data.FixedLengthRecordDataset(path, 1).take(1).get_single_element()

    return {
        "empty map": (root, lambda p: tf.strings.length(p)),
        "read_file tfpipe.json": (f"{root}/tfpipe.json", lambda p: tf.strings.length(tf.io.read_file(p))),
        "1-byte read of tfpipe.json": (f"{root}/tfpipe.json", lambda p: tf.strings.length(first_byte(p))),
        "matching_files <dir>/<marker>": (f"{root}/{MARKER}", lambda p: tf.size(tf.io.matching_files(p))),
        "matching_files <dir>/sub/<marker>": (
            f"{root}/sub/{MARKER}",
            lambda p: tf.size(tf.io.matching_files(p)),
        ),
    }


def measure(gcs, tf, path: str, fn) -> tuple[float, float, float, float]:
    """CPU ms and wall ms per call, requests and response kB per call."""
    for _ in tf.data.Dataset.from_tensors(path).map(fn):  # the first call: connections
        pass
    ds = tf.data.Dataset.from_tensors(path).repeat(CALLS).map(fn, num_parallel_calls=1)
    cpu0, wall0 = time.process_time(), time.monotonic()
    with gcs.recording() as log:
        for _ in ds:
            pass
    cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    return (
        cpu / CALLS * 1e3,
        wall / CALLS * 1e3,
        len(log) / CALLS,
        sum(r.bytes_out for r in log) / CALLS / 1e3,
    )


def main() -> None:
    gcs = gcs_twin.start()
    bucket = gcs.create_bucket("checks")
    roots = {n: populate(bucket, n) for n in OBJECTS}
    from tfpipe._tf import tf

    tf_ = tf()
    print(
        f"{CALLS} checks per op; CPU ms per check in the reading process\n\n"
        "| twin | objects in the folder | op | CPU ms | wall ms | requests | response kB |\n"
        "|---|---|---|---|---|---|---|",
        flush=True,
    )
    try:
        for shaped in SHAPED:
            gcs.shape(**dataclasses.asdict(LIKE_GCS if shaped else Shaping()))
            for n, root in roots.items():
                for name, (path, fn) in ops(tf_, root).items():
                    cpu, wall, requests, kb = measure(gcs, tf_, path, fn)
                    twin = "like_gcs" if shaped else "unshaped"
                    print(
                        f"| {twin} | {n} | {name} | {cpu:.2f} | {wall:.1f} | {requests:.1f} | {kb:.1f} |",
                        flush=True,
                    )
    finally:
        gcs.stop()
    print(f"\n(load average {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()

"""The local GCS twin's own cost: CPU ms per MB moved, and the MB/s one stream reaches unshaped.

Run: python benchmarks/twin_cpu.py
Environment: TFPIPE_TWIN_MB (64, the object size), TFPIPE_TWIN_REPEATS (5).

The twin (tfpipe.testing.gcs.LocalGCS) is two Python processes, the TLS proxy and
gcp-storage-emulator. Whatever CPU they use per MB is taken from the pipeline under test on
the same cores, so it bounds what any measurement through the twin can show. For each route
(google-cloud-storage over plain HTTP; TensorFlow's gs:// code through the TLS tunnel) and
direction, the object is moved TFPIPE_TWIN_REPEATS times, one stream, unshaped, and the
table gives per MB: the proxy's and the emulator's CPU (their own rusage, psutil) and this
process's, and the wall-clock MB/s of the one stream. One more row reads through TF with the
`LIKE_GCS` shaping: the pacing's own CPU, and whether one stream reaches its 150 MB/s. CPU per MB barely moves with a
neighbour's load; MB/s does, so take MB/s from a quiet machine.
"""

from __future__ import annotations

import dataclasses
import os
import resource
import sys
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gcs_twin

from tfpipe import storage
from tfpipe.testing.gcs import LIKE_GCS, Shaping

SIZE = int(float(os.environ.get("TFPIPE_TWIN_MB", "64")) * 1e6)
REPEATS = int(os.environ.get("TFPIPE_TWIN_REPEATS", "5"))


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


UNSHAPED = Shaping()


def measure(gcs, name: str, move: Callable[[int], object], shaping: Shaping = UNSHAPED) -> dict[str, float]:
    move(-1)  # warm: connections, TF's filesystem, the emulator's first object
    client = own_cpu()
    with gcs.shaped(**dataclasses.asdict(shaping)), gcs_twin.TwinCpu(gcs) as twin:
        for i in range(REPEATS):
            move(i)
    client = own_cpu() - client
    mb = SIZE * REPEATS / 1e6
    return {
        "route": name,
        "MB/s": mb / twin.wall_s,
        "proxy CPU ms/MB": 1000 * twin.proxy_s / mb,
        "emulator CPU ms/MB": 1000 * twin.emulator_s / mb,
        "client CPU ms/MB": 1000 * client / mb,
    }


def main() -> None:
    gcs = gcs_twin.start()
    try:
        from tfpipe._tf import tf as load

        tf = load()
        bucket = gcs.create_bucket("twin-cpu")
        data = os.urandom(SIZE)
        path = f"{bucket}/object"
        storage.write_atomic(path, data)

        def tf_read(_: int) -> None:
            with tf.io.gfile.GFile(path, "rb") as f:
                assert len(f.read()) == SIZE

        def tf_write(i: int) -> None:
            with tf.io.gfile.GFile(f"{bucket}/tf-{i}", "wb") as f:
                f.write(data)

        rows = [
            measure(gcs, "download, google-cloud-storage", lambda _: storage.read_bytes(path)),
            measure(gcs, "download, TF gs:// (TLS)", tf_read),
            measure(gcs, "download, TF gs:// (TLS), like_gcs", tf_read, LIKE_GCS),
            measure(
                gcs,
                "upload, google-cloud-storage",
                lambda i: storage.write_atomic(f"{bucket}/gcs-{i}", data, overwrite=True),
            ),
            measure(gcs, "upload, TF gs:// (TLS)", tf_write),
        ]
    finally:
        gcs.stop()
    keys = list(rows[0])
    print(f"\nobject {SIZE / 1e6:.0f} MB x {REPEATS}, one stream (load average {os.getloadavg()[0]:.2f})")
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for r in rows:
        print("| " + " | ".join(r[k] if isinstance(r[k], str) else f"{r[k]:.1f}" for k in keys) + " |")


if __name__ == "__main__":
    start = time.monotonic()
    main()
    print(f"({time.monotonic() - start:.0f} s)")

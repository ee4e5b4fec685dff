"""What TensorFlow's gs:// read block costs: CPU per image of tfpipe's read prefix, tfpipe's
whole pipeline (cache="none") and the baseline pipeline, reading from the local GCS twin,
under TensorFlow's default block (64 MiB) and a smaller one.

Run: TFPIPE_BENCH_DATA=/tmp/tfpipe-bench python benchmarks/gcs_read_block.py
Environment: TFPIPE_BENCH_DATA (the dataset `<DATA>/imagenet-gcs16` that
measure_defaults_gcs.py makes is used; run that first), TFPIPE_BLOCK_MB ("64,8"),
TFPIPE_BLOCK_EPOCHS (3).

TensorFlow reads GCS_READ_CACHE_BLOCK_SIZE_MB once, at import, so each block size runs in its
own process (one after another, each contender three epochs after a first batch). For every
file it opens on gs://, TensorFlow allocates and zeroes one block, whatever the file's size: a
read of a 4 KB file costs about as much CPU as a 5 MB shard (`perf` puts it in memset and
page faults). The table gives CPU ms per image (process CPU over the epochs) and the requests
the twin answered. Single runs, unshaped twin: read CPU per image, not throughput.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def measure(root: str, epochs: int) -> None:
    sys.path.insert(0, HERE)
    import gcs_twin

    gcs = gcs_twin.start()
    gcs.create_bucket("block")
    dest = gcs_twin.upload_dataset(root, "gs://block/ds")

    import tfpipe
    from tfpipe.format.manifest import Manifest
    from tfpipe.modalities.images.bench.recipe import recipe_dataset
    from tfpipe.pipeline import plan

    split = Manifest.load(root).splits["train"]
    n, batch = split.examples, 100
    files = [f"{dest}/{s.name}" for s in split.shards]
    contenders = {
        "tfpipe read prefix": lambda: (
            plan(dest, batch_size=batch, cache="none", seed=1).dataset(upto="repeat").batch(batch)
        ),
        "tfpipe whole, cache=none": lambda: tfpipe.build(dest, batch_size=batch, cache="none", seed=1),
        "baseline": lambda: recipe_dataset(files, batch_size=batch).repeat(),
    }
    block = os.environ.get("GCS_READ_CACHE_BLOCK_SIZE_MB", "64")
    for name, make in contenders.items():
        it = iter(make())
        next(it)
        steps = epochs * n // batch
        cpu0 = time.process_time()
        with gcs.recording() as log:
            for _ in range(steps):
                next(it)
        ms = (time.process_time() - cpu0) / (steps * batch) * 1000
        print(f"| {block} MiB | {name} | {ms:.3f} | {len(log)} |", flush=True)
    gcs.stop()


def main() -> None:
    root = os.path.join(os.environ.get("TFPIPE_BENCH_DATA", "/tmp/tfpipe-bench"), "imagenet-gcs16")
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        measure(root, int(os.environ.get("TFPIPE_BLOCK_EPOCHS", "3")))
        return
    if not os.path.exists(os.path.join(root, "tfpipe.json")):
        sys.exit(f"{root} holds no dataset: run benchmarks/measure_defaults_gcs.py first")
    print("| block | contender | CPU ms/image | requests |\n|---|---|---|---|", flush=True)
    for mb in os.environ.get("TFPIPE_BLOCK_MB", "64,8").split(","):
        env = os.environ | {"GCS_READ_CACHE_BLOCK_SIZE_MB": mb.strip(), "TF_CPP_MIN_LOG_LEVEL": "2"}
        subprocess.run([sys.executable, __file__, "--one"], env=env, check=True)
    print(f"(load average {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()

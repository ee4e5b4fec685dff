"""The read defaults measured on the shaped local GCS twin, in paired rounds; and build()
against the baseline pipeline, both reading from the twin.

Run: TFPIPE_BENCH_DATA=/tmp/tfpipe-bench python benchmarks/measure_defaults_gcs.py [SWEEP ...]
(SWEEP: train-read, eval-read, train, eval, vs-baseline, train-parallel; none: the first five,
about 15 minutes on 2 cores).
Tiny check: TFPIPE_BENCH_DATA=/tmp/tiny TFPIPE_BENCH_IMAGES=40 TFPIPE_GCS_SHARDS=4 \
    TFPIPE_BENCH_BATCH=16 TFPIPE_BENCH_SECONDS=0.5 TFPIPE_BENCH_WARMUP=0.2 TFPIPE_BENCH_RUNS=2 \
    python benchmarks/measure_defaults_gcs.py

Environment, besides measure_defaults.py's (TFPIPE_BENCH_SECONDS 4, _WARMUP 2, _RUNS 4,
_IMAGES 800, _DATA):
- TFPIPE_BENCH_BATCH (128);
- TFPIPE_GCS_SHARDS (16): the images are converted into this many shards (kept in
  TFPIPE_BENCH_DATA/imagenet-gcs<N>) and copied to the twin;
- TFPIPE_GCS_FIRST_BYTE_MS (30), TFPIPE_GCS_MBPS (150, or "none"): the twin's shaping, by
  default `LIKE_GCS`; its request-rate limits are never reached here. A slower stream
  (TFPIPE_GCS_MBPS=20) shows what the read settings do when one stream cannot feed the decode.

Sweeps (each contender against "default", paired, order alternating, cache="none" so every
epoch reads the twin):
- train-read, eval-read: the read prefix alone (list_files .. repeat: records, no parse or
  decode), timed through 256-record batches, so the storage is what is measured; the rows
  give records/s ratios and the footer MB/s. eval-read also times the training read prefix
  (16 files in parallel) as a reference for eval's one file at a time (with two opened ahead).
- train, eval: the whole imagenet pipeline (uint8).
- train-parallel: the whole training pipeline, cache="none", at read_parallelism AUTOTUNE
  (the default), 4, 8 and 16, with the baseline for reference (not in the default run).
- vs-baseline: build() (its default cache="auto", and cache="none") against
  tfpipe/modalities/images/bench/recipe.py, unchanged, on the same gs:// shards.

What TensorFlow does under these knobs (TF 2.21, seen in the twin's request log): its gs://
reader fetches GCS_READ_CACHE_BLOCK_SIZE_MB (64 MiB, read when TF is imported) per request
whatever TFRecordDataset's buffer_size (`reader_buffer`) is, so reader_buffer changes no
request; a shard of up to 64 MiB is one GET (plus a metadata GET to open it).

The twin's own CPU (proxy and emulator, in cores) is printed per sweep: it runs on the same
cores as the pipeline (benchmarks/twin_cpu.py gives it per MB).
"""

from __future__ import annotations

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gcs_twin
import measure_defaults
import paired

import tfpipe
from tfpipe.testing.gcs import LIKE_GCS

SHARDS = int(os.environ.get("TFPIPE_GCS_SHARDS", "16"))
FIRST_BYTE_MS = float(os.environ.get("TFPIPE_GCS_FIRST_BYTE_MS", str(LIKE_GCS.first_byte_ms)))
_mbps = os.environ.get("TFPIPE_GCS_MBPS", str(LIKE_GCS.mbps_per_stream))
MBPS = None if _mbps.lower() == "none" else float(_mbps)
BATCH = int(os.environ.get("TFPIPE_BENCH_BATCH", "128"))
COMMAND = "TFPIPE_BENCH_DATA={} python benchmarks/measure_defaults_gcs.py {}"

TRAIN = {
    "default": {},
    "cycle_length=4": {"cycle_length": 4},
    "cycle_length=8": {"cycle_length": 8},
    "read_parallelism=1": {"read_parallelism": 1},
    "read_parallelism=4": {"read_parallelism": 4},
    "reader_buffer=256 KiB": {"reader_buffer": 256 << 10},
    "reader_buffer=32 MiB": {"reader_buffer": 32 << 20},
    "block_length=4": {"block_length": 4},
}
EVAL = {
    "default": {},
    "reader_buffer=256 KiB": {"reader_buffer": 256 << 10},
    "reader_buffer=32 MiB": {"reader_buffer": 32 << 20},
}


def read_prefix(data: str, training: bool, **options: object):
    """The read stages of build()'s pipeline (records), repeated, in 256-record batches."""
    from tfpipe.bench.measure.producer import transport
    from tfpipe.pipeline import plan

    pipeline = plan(data, batch_size=BATCH, training=training, cache="none", **options)
    return transport(pipeline.dataset(upto="repeat").repeat())


def makers(data: str, sweep: str) -> tuple[dict, int]:
    """The contenders of a sweep, and the examples in one element."""
    if sweep == "train-read":
        return {k: (lambda kw=kw: read_prefix(data, True, **kw)) for k, kw in TRAIN.items()}, 256
    if sweep == "eval-read":
        out = {k: (lambda kw=kw: read_prefix(data, False, **kw)) for k, kw in EVAL.items()}
        out["training read (reference)"] = lambda: read_prefix(data, True)
        return out, 256
    if sweep in ("train", "eval"):
        training, variants = (True, TRAIN) if sweep == "train" else (False, EVAL)
        return {
            k: (
                lambda kw=kw: tfpipe.build(
                    data, batch_size=BATCH, training=training, cache="none", **kw
                ).repeat()
            )
            for k, kw in variants.items()
        }, BATCH
    from tfpipe.modalities.images.bench.recipe import recipe_dataset

    files = tfpipe.Manifest.load(data).shard_paths("train")
    if sweep == "train-parallel":
        out = {
            k: (lambda n=n: tfpipe.build(data, batch_size=BATCH, cache="none", read_parallelism=n))
            for k, n in (
                ("default", -1),
                ("read_parallelism=4", 4),
                ("read_parallelism=8", 8),
                ("read_parallelism=16", 16),
            )
        }
        out["baseline"] = lambda: recipe_dataset(files, batch_size=BATCH).repeat()
        return out, BATCH
    return {
        "baseline": lambda: recipe_dataset(files, batch_size=BATCH).repeat(),
        "tfpipe uint8 (cache=auto)": lambda: tfpipe.build(data, batch_size=BATCH),
        "tfpipe uint8, cache=none": lambda: tfpipe.build(data, batch_size=BATCH, cache="none"),
    }, BATCH


SWEEPS = ("train-read", "eval-read", "train", "eval", "vs-baseline")
EXTRA_SWEEPS = ("train-parallel",)


def run_sweep(gcs, data: str, sweep: str, record_mb: float) -> list[paired.Row]:
    contenders, per_element = makers(data, sweep)
    print(f"\n{sweep} (gs:// twin: {gcs.shaping})", flush=True)
    with gcs_twin.TwinCpu(gcs) as twin:
        results = paired.rounds(
            contenders,
            examples_per_element=per_element,
            n_rounds=measure_defaults.RUNS,
            seconds=measure_defaults.SECONDS,
            warmup=measure_defaults.WARMUP,
            on_window=paired.print_window,
        )
    command = COMMAND.format(os.environ.get("TFPIPE_BENCH_DATA", "<dir>"), sweep)
    base = "baseline" if sweep == "vs-baseline" else "default"
    rows = [
        paired.row(results, name, base, target=f"{sweep}: {name} vs {base}", goal=None, command=command)
        for name in contenders
        if name != base
    ]
    medians = paired.summary(results)
    if sweep.endswith("-read"):
        print(
            "  MB/s read: "
            + ", ".join(f"{k} {v['examples_per_sec'] * record_mb:.1f}" for k, v in medians.items())
        )
    print(
        f"  the twin kept {twin.cores:.2f} cores busy over the sweep (proxy {twin.proxy_s:.1f} s, "
        f"emulator {twin.emulator_s:.1f} s of CPU in {twin.wall_s:.0f} s)"
    )
    return rows


def main() -> None:
    root = os.environ.get("TFPIPE_BENCH_DATA") or tempfile.mkdtemp(prefix="tfpipe-bench-")
    import conftest  # the benchmark datasets

    local = conftest._convert(
        measure_defaults._images(root, conftest),
        os.path.join(root, f"imagenet-gcs{SHARDS}"),
        format="imagenet",
        num_shards=SHARDS,
    )
    gcs = gcs_twin.start()
    try:
        data = gcs_twin.upload_dataset(local, gcs.create_bucket("bench") + "/imagenet")
        split = tfpipe.Manifest.load(data).splits["train"]
        record_mb = split.bytes / split.examples / 1e6
        gcs.shape(first_byte_ms=FIRST_BYTE_MS, mbps_per_stream=MBPS)
        rows: list[paired.Row] = []
        for sweep in sys.argv[1:] or SWEEPS:
            if sweep not in SWEEPS + EXTRA_SWEEPS:
                known = ", ".join(SWEEPS + EXTRA_SWEEPS)
                raise SystemExit(f"unknown sweep {sweep!r}: expected one of {known}")
            rows += run_sweep(gcs, data, sweep, record_mb)
    finally:
        gcs.stop()
    print(
        f"\n{split.examples} images in {SHARDS} shards of {split.bytes / SHARDS / 1e6:.1f} MB on the twin "
        f"(first byte {FIRST_BYTE_MS:g} ms, {MBPS} MB/s a stream); load average {os.getloadavg()[0]:.2f}\n"
    )
    print(paired.table(rows))


if __name__ == "__main__":
    main()

"""Measures the PipelineConfig / preset defaults that AUTOTUNE does not decide.

Run: TFPIPE_BENCH_DATA=/tmp/tfpipe-bench python benchmarks/measure_defaults.py
(reuses the datasets benchmarks/conftest.py makes; run the benchmarks once first, or this
script makes them). Prints one line per setting: examples/s, best of 2 runs, each a 6 s
window after 2 s warm-up, measured with tfpipe.bench.producer.measure.

Results on the project machine (2 cores, local disk, 800 ImageNet-like JPEGs in 8 shards,
batch 128, image_size 224; a 200k-row 40-column table at batch 1024) are quoted in the
comments of tfpipe/pipeline/config.py, tfpipe/pipeline/corrupt.py and
tfpipe/presets/imagenet.py. The run they quote (2026-11-22; the machine was shared, so
expect +-20% between runs):

  cycle_length 2/4/8/16             627 / 478 / 533 / 483 img/s
  reader_buffer 256K/1M/8M/32M      675 / 637 / 653 / 611 img/s
  max_intra_op_parallelism 1 / TF   536 / 447 img/s
  private_threadpool_size 2 / 4     543 / 565 img/s (shared pool: 536)
  uint8 bilinear / uint8 bicubic    575 / 385 img/s
  float32 / bfloat16 normalised     339 / 478 img/s
  table verify_shards on / off      72k / 137k rows/s (alternating re-runs: 37-91k / 56-151k)
"""

from __future__ import annotations

import os
import sys
import tempfile

import tfpipe
from tfpipe.bench.producer import measure

SECONDS, WARMUP, RUNS = 6.0, 2.0, 2


def rate(make, per_element: int) -> float:
    return max(measure(make, examples_per_element=per_element, seconds=SECONDS, warmup=WARMUP).examples_per_sec
               for _ in range(RUNS))


def sweep(title: str, data: str, batch: int, variants: dict[str, dict]) -> None:
    print(f"\n{title}")
    for name, kwargs in variants.items():
        value = rate(lambda kwargs=kwargs: tfpipe.build(data, batch_size=batch, **kwargs), batch)
        print(f"  {name:<34} {value:>10,.0f} /s", flush=True)


def main() -> None:
    root = os.environ.get("TFPIPE_BENCH_DATA") or tempfile.mkdtemp(prefix="tfpipe-bench-")
    sys.path.insert(0, os.path.dirname(__file__))
    import conftest  # the benchmark datasets

    images = conftest._convert(_images(root, conftest), os.path.join(root, "imagenet"),
                               format="imagenet", num_shards=8)
    _, table = _table(root, conftest)
    only = set(sys.argv[1:])

    def want(name: str) -> bool:
        return not only or name in only

    if want("cycle_length"):
        sweep("cycle_length (imagenet, 8 shards)", images, 128,
              {f"cycle_length={c}": {"cycle_length": c} for c in (2, 4, 8, 16)})
    if want("reader_buffer"):
        sweep("reader_buffer (imagenet)", images, 128,
              {f"reader_buffer={b >> 10} KiB": {"reader_buffer": b} for b in (256 << 10, 1 << 20, 8 << 20, 32 << 20)})
    if want("threads"):
        sweep("threading (imagenet)", images, 128, {
            "max_intra_op_parallelism=1": {"max_intra_op_parallelism": 1},
            "max_intra_op_parallelism=0 (TF)": {"max_intra_op_parallelism": 0},
            "private_threadpool_size=2": {"private_threadpool_size": 2},
            "private_threadpool_size=4": {"private_threadpool_size": 4},
        })
    if want("image"):
        sweep("image output (imagenet)", images, 128, {
            "uint8 bilinear (default)": {},
            "uint8 bicubic": {"resize_method": "bicubic"},
            "float32 normalized": {"dtype": "float32"},
            "bfloat16 normalized": {"dtype": "bfloat16"},
            "deterministic=True": {"deterministic": True},
        })
    if want("verify"):
        sweep("verify_shards (table, batch 1024)", table, 1024, {
            "verify_shards=True": {"verify_shards": True},
            "verify_shards=False": {"verify_shards": False},
            "cache=none": {"cache": "none"},
        })


def _images(root: str, conftest) -> str:
    src = os.path.join(root, "images")
    if not os.path.isdir(src):
        from tfpipe.testing import fake_data

        fake_data.write_image_folder(src, classes=10, per_class=conftest.N_IMAGES // 10, workers=2)
    return src


def _table(root: str, conftest) -> tuple[str, str]:
    from tfpipe.testing import fake_data

    csv = os.path.join(root, "table40.csv")
    if not os.path.exists(csv):
        fake_data.write_table(fake_data.make_table(conftest.N_ROWS, columns=39, label_classes=2), csv)
    return csv, conftest._convert(csv, os.path.join(root, "table40"), label="label", num_shards=8)


if __name__ == "__main__":
    main()

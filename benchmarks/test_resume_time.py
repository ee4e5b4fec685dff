"""Resume cost: checkpoint size and seconds to the first batch against the step K, local and
gs://, for tfpipe's resumable order against `tf.train.Checkpoint(iterator=...)`.

Run (about 5 minutes on 2 cores; the data is made once and kept in TFPIPE_BENCH_DATA):
  TFPIPE_BENCH_DATA=/tmp/tfpipe-bench python -m pytest benchmarks/test_resume_time.py \
      -q -s -o addopts=""

benchmarks/conftest.py's 800 ImageNet-like JPEGs in 8 shards, batch 32 (25 steps an epoch),
image_size 224, uint8, seed 1. For each K (0, a quarter, half and 90% of an epoch, 1.5 epochs):

- tfpipe: `build(..., start_step=K)` and its first batch (cache="none": the shards of the
  start's group are read, the rest not; cache="auto", which caches these 85 MB in memory:
  every record is loaded before the first batch). The state to keep is a `Position` in a
  `tf.train.Checkpoint`: its size is reported.
- without resume: a fresh run's time to its batch K (decoding K batches first).
- tf.train.Checkpoint(iterator=...) on the shuffle buffer's order (the pipeline before the
  resumable order): saved after K batches; its size, and restore + first batch. TensorFlow
  saves what the iterator holds: the shuffle buffer, the memory cache, prefetched batches.
  With cache="none" it cannot save tfpipe's pipeline at all (the verified shard read holds a
  `reduce`, "ReduceDataset is stateful"): that is reported as the error.

gs:// is tfpipe.testing's LocalGCS (an emulator behind a TLS proxy on loopback): request
handling is real, latency and bandwidth are not GCS's. Each figure is the median of REPEATS.
The table is printed, and written as Markdown and JSON to TFPIPE_BENCH_RESULTS when set.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import statistics
import tempfile
import time

import pytest

import tfpipe
from tfpipe import storage

tf = pytest.importorskip("tensorflow")

BATCH = 32
REPEATS = int(os.environ.get("TFPIPE_BENCH_REPEATS", "3"))
KW = {"batch_size": BATCH, "seed": 1}


def median_seconds(fn) -> float:
    times = []
    for _ in range(REPEATS):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def size_of(prefix_dir: str) -> int:
    if storage.is_gcs(prefix_dir):
        return sum(
            size for _, is_dir, size, *_ in storage.gcs_entries(prefix_dir, recursive=True) if not is_dir
        )
    return sum(p.stat().st_size for p in pathlib.Path(prefix_dir).iterdir())


def save(checkpoint, where: str) -> str:
    """`checkpoint.save` under `where`. On gs:// it is written locally and uploaded: TF's save
    creates a directory-marker object with an empty upload, which the emulator behind LocalGCS
    cannot take (/work/shared/GCS_TESTING.md); restores read it from gs:// as TF does."""
    if not storage.is_gcs(where):
        return checkpoint.save(storage.join(where, "ckpt"))
    local = tempfile.mkdtemp()
    path = checkpoint.save(os.path.join(local, "ckpt"))
    for name in os.listdir(local):
        storage.write_atomic(storage.join(where, name), pathlib.Path(local, name).read_bytes())
    return storage.join(where, os.path.basename(path))


def iterator_checkpoint(data: str, k: int, where: str, cache: str) -> dict:
    """tf.train.Checkpoint(iterator=...) of the shuffle buffer's order after k batches."""
    options = KW | {"order": "shuffle_buffer", "cache": cache}
    it = iter(tfpipe.build(data, **options))
    for _ in range(k):
        next(it)

    def restore() -> None:
        fresh = iter(tfpipe.build(data, **options))
        tf.train.Checkpoint(iterator=fresh).restore(path)
        next(fresh)

    try:
        path = save(tf.train.Checkpoint(iterator=it), where)
        return {"bytes": size_of(where), "restore_first_batch_s": round(median_seconds(restore), 3)}
    except tf.errors.OpError as e:  # reported: TensorFlow refused to save the iterator
        message = re.sub(r"\{\{.*?\}\}|\[Op:.*", "", e.message.splitlines()[0]).strip()
        return {"error": f"{type(e).__name__}: {message[:160]}"}


def resumable(data: str, k: int, where: str) -> dict:
    position = tfpipe.resume.Position(k)
    out = {}
    for cache in ("none", "auto"):

        def first(cache: str = cache) -> None:
            next(iter(tfpipe.build(data, start_step=k, cache=cache, **KW)))

        out[f"first_batch_s_cache_{cache}"] = round(median_seconds(first), 3)
    tfpipe.build(data, start_step=position, **KW)  # binds what a step means
    save(tf.train.Checkpoint(input=position), where)
    out["checkpoint_bytes"] = size_of(where)
    return out


def without_resume(data: str, k: int) -> float:
    def to_k() -> None:
        it = iter(tfpipe.build(data, cache="none", **KW))
        for _ in range(k + 1):
            next(it)

    return round(median_seconds(to_k), 3)


def measure(data: str, scratch: str, steps: int) -> list[dict]:
    rows = []
    for k in (0, steps // 4, steps // 2, steps * 9 // 10, steps * 3 // 2):
        row = {"k": k, "data": data}
        row["tfpipe"] = resumable(data, k, storage.join(scratch, f"pos-{k}"))
        row["decode_k_batches_s"] = without_resume(data, k)
        for cache in ("auto", "none"):
            row[f"iterator_ckpt_cache_{cache}"] = iterator_checkpoint(
                data, k, storage.join(scratch, f"it-{cache}-{k}"), cache
            )
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def table(rows: list[dict], where: str) -> str:
    lines = [
        f"| {where}: K | tfpipe first batch, cache=none / auto (s) | tfpipe checkpoint (bytes) "
        "| fresh run to batch K (s) | iterator checkpoint, cache=auto: bytes, restore + first batch (s) "
        "| iterator checkpoint, cache=none |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        t, auto, none = r["tfpipe"], r["iterator_ckpt_cache_auto"], r["iterator_ckpt_cache_none"]
        auto_text = auto.get("error") or f"{auto['bytes']:,}, {auto['restore_first_batch_s']}"
        none_text = none.get("error") or f"{none['bytes']:,}, {none['restore_first_batch_s']}"
        lines.append(
            f"| {r['k']} | {t['first_batch_s_cache_none']} / {t['first_batch_s_cache_auto']} "
            f"| {t['checkpoint_bytes']:,} | {r['decode_k_batches_s']} | {auto_text} | {none_text} |"
        )
    return "\n".join(lines)


def test_resume_time_and_checkpoint_size(benchmark, imagenet_shards, tmp_path):
    from tfpipe.testing.gcs import TF_GCS_TEST_ENV, LocalGCS

    steps = tfpipe.steps_per_epoch(imagenet_shards, BATCH)

    def both() -> dict:
        out = {"local": measure(imagenet_shards, str(tmp_path), steps)}
        with LocalGCS() as gcs, gcs.activate(**{k: os.environ.get(k, v) for k, v in TF_GCS_TEST_ENV.items()}):
            bucket = gcs.create_bucket("tfpipe-resume-bench")
            data = storage.join(bucket, "imagenet")
            for name in os.listdir(imagenet_shards):
                storage.write_atomic(
                    storage.join(data, name), pathlib.Path(imagenet_shards, name).read_bytes()
                )
            out["gs"] = measure(data, storage.join(bucket, "scratch"), steps)
        return out

    results = benchmark.pedantic(both, rounds=1, iterations=1)
    text = table(results["local"], "local") + "\n\n" + table(results["gs"], "gs:// (LocalGCS)")
    print("\n" + text)
    benchmark.extra_info.update(results)
    out = os.environ.get("TFPIPE_BENCH_RESULTS")
    if out:
        os.makedirs(out, exist_ok=True)
        pathlib.Path(out, "resume-time.md").write_text(text + "\n")
        pathlib.Path(out, "resume-time.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":  # pragma: no cover - run through pytest, see the module doc
    raise SystemExit(
        pytest.main([__file__, "-q", "-s", "-o", "addopts=", f"--basetemp={tempfile.mkdtemp()}"])
    )

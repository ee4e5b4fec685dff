"""Text resume time: seconds and CPU-seconds from `build(..., start_step=K)` to its first batch,
before and after the lengths file (issue 23), K in epoch 0, 1 and 5, local and on the GCS twin.

- before: the dataset as tfpipe wrote it without a lengths file (the same shards, the manifest
  without its `text.lengths` entry): the count of the rows before K reads and parses every
  record before K, across every earlier epoch.
- after: the dataset as converted now: the count reads the lengths file (4 bytes a document)
  and applies the order to the lengths; no shard is opened for it.

Text: the standard library's docstrings (`tfpipe.synthetic.text`) 8 times (~52k documents), converted
with a byte-level BPE (vocabulary 8000) into 8 shards. build(): batch 32, L = 512, first_fit,
seed 1, cache="none" (streamed: a large corpus on gs://). K = (e + 1/2) * tokens / (L * 32):
mid-epoch e at full fill, inside epoch e at any fill above 0.9.

Paired, alternating rounds (benchmarks/paired.py's ratio): in each round, before and after at
the same K back to back, their order alternating. Reported per (place, K): the median seconds
and CPU-seconds (the process's user + system time: every TensorFlow thread counts) of each,
and before/after as a geometric mean with a 95% interval. Then the count's CPU-seconds per
earlier epoch, (CPU at K in epoch 5 - CPU at K in epoch 0) / 5, and per document of an epoch;
and the count alone (lengths file, order, rows of each chunk) timed over 1 and 9 epochs.

gs:// is tfpipe.testing's LocalGCS (an emulator behind a TLS proxy on loopback): its request
handling is real, its latency and bandwidth are not GCS's.

Run (about 10 minutes on 2 cores; the data is made once into --data):
  python benchmarks/text_resume_time.py --rounds 3 --data /tmp/tfpipe-text-resume [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import statistics
import time
from typing import Any

from paired import ratio

BATCH, L, EPOCHS = 32, 512, (0, 1, 5)
COPIES = 8  # the docstrings 8 times: ~52k documents, ~3.7M tokens, so an epoch's count shows
KW = {"batch_size": BATCH, "sequence_length": L, "seed": 1, "cache": "none"}


def dataset(data: str) -> tuple[str, str]:
    """(after, before): the corpus converted (made once under `data`), and its copy without
    the lengths file, as tfpipe wrote datasets before it."""
    import tfpipe
    from tfpipe.synthetic import text

    after, before = os.path.join(data, "after"), os.path.join(data, "before")
    if not os.path.exists(os.path.join(after, "tfpipe.json")):
        text.write_corpus(os.path.join(data, "corpus"), text.documents() * COPIES, "jsonl", files=8)
        tfpipe.convert(
            os.path.join(data, "corpus"), after, train_tokenizer="bpe", vocab_size=8000, num_shards=8
        )
    os.makedirs(before, exist_ok=True)
    for name in os.listdir(after):
        if name.startswith(".") or name.startswith("lengths."):
            continue
        data_bytes = pathlib.Path(after, name).read_bytes()
        if name == "tfpipe.json":
            obj = json.loads(data_bytes)
            del obj["splits"]["train"]["text"]["lengths"]
            data_bytes = json.dumps(obj, indent=1).encode()
        pathlib.Path(before, name).write_bytes(data_bytes)
    return after, before


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def first_batch(root: str, k: int) -> tuple[float, float]:
    """(seconds, CPU-seconds) from build(..., start_step=k) to its first batch."""
    import tfpipe

    wall, cpu = time.perf_counter(), cpu_seconds()
    next(iter(tfpipe.build(root, start_step=k, **KW)))
    return time.perf_counter() - wall, cpu_seconds() - cpu


def measure(place: str, after: str, before: str, steps: float, rounds: int) -> list[dict[str, Any]]:
    """One row per K: each contender's median seconds and CPU-seconds, and before/after."""
    rows = []
    for epoch in EPOCHS:
        k = int((epoch + 0.5) * steps)
        runs: dict[str, list[tuple[float, float]]] = {"before": [], "after": []}
        for r in range(rounds):
            for name in ("before", "after") if r % 2 == 0 else ("after", "before"):
                runs[name].append(first_batch(before if name == "before" else after, k))
        row = {"place": place, "epoch": epoch, "k": k}
        for name, times in runs.items():
            row[f"{name}_s"] = round(statistics.median(t for t, _ in times), 3)
            row[f"{name}_cpu_s"] = round(statistics.median(c for _, c in times), 3)
        row["before/after seconds"] = ratio([t for t, _ in runs["before"]], [t for t, _ in runs["after"]])
        row["before/after CPU"] = ratio([c for _, c in runs["before"]], [c for _, c in runs["after"]])
        print(json.dumps(row, default=str), flush=True)
        rows.append(row)
    return rows


def per_epoch(rows: list[dict[str, Any]], documents: int) -> dict[str, float]:
    """CPU-seconds each earlier epoch adds to the count, before and after (and per document)."""
    first, last = rows[0], rows[-1]
    span = last["epoch"] - first["epoch"]
    out = {}
    for name in ("before", "after"):
        cpu = (last[f"{name}_cpu_s"] - first[f"{name}_cpu_s"]) / span
        out[f"{name}_cpu_s_per_epoch"] = round(cpu, 3)
        out[f"{name}_cpu_us_per_document"] = round(1e6 * cpu / documents, 2)
    return out


def count_cpu(root: str, epochs: tuple[int, int] = (1, 9), repeats: int = 3) -> dict[str, float]:
    """The count alone (the lengths file read, ordered, each chunk's rows placed), over the
    chunks of epochs[0] and of epochs[1] epochs, `repeats` times: CPU-seconds per epoch from the
    difference of the medians."""
    import tensorflow as tf

    from tfpipe.modalities.text import lengths as text_lengths
    from tfpipe.modalities.text import stages as text_stages
    from tfpipe.pipeline import plan

    p = plan(root, start_step=1, **KW)
    spec, pack = p.plan.order, p.plan.decoder.packing
    size = text_stages.chunk_size(pack)
    cpus: dict[int, list[float]] = {n: [] for n in epochs}
    for _ in range(repeats):
        for n in epochs:
            counts = text_lengths.ordered_lengths(spec, text_lengths.lengths_file(p.plan.source), size)
            counts = counts.take(n * spec.examples // size).map(lambda c, _: text_stages.rows_of(pack, c))
            cpu = cpu_seconds()
            counts.reduce(tf.constant(0, tf.int64), lambda a, b: a + b).numpy()
            cpus[n].append(cpu_seconds() - cpu)
    low, high = (statistics.median(cpus[n]) for n in epochs)
    per_epoch = (high - low) / (epochs[1] - epochs[0])
    records = records_cpu(p, size)
    return {
        "chunk_documents": size,
        "count_cpu_s_per_epoch": round(per_epoch, 3),
        "count_cpu_us_per_document": round(1e6 * per_epoch / spec.examples, 2),
        "old_count_read_parse_cpu_s_per_epoch": round(records, 3),
        "old_count_read_parse_cpu_us_per_document": round(1e6 * records / spec.examples, 2),
    }


def records_cpu(p: Any, size: int, epochs: int = 3) -> float:
    """What the count without a lengths file does at least, per epoch: every record read and
    its lengths parsed (in file order, without the order's permutations), in CPU-seconds."""
    import tensorflow as tf

    from tfpipe.modalities.text import stages as text_stages

    spec = {text_stages.TOKENS: p.plan.decoder.spec[text_stages.TOKENS]}
    files = p.plan.order.files
    ds = tf.data.TFRecordDataset(list(files), compression_type=p.plan.source.manifest.tf_compression)
    ds = ds.repeat(epochs).batch(size).map(lambda r: tf.reduce_sum(text_stages.record_lengths(tf, r, spec)))
    cpu = cpu_seconds()
    ds.reduce(tf.constant(0, tf.int64), lambda a, b: a + b).numpy()
    return (cpu_seconds() - cpu) / epochs


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| place | K (epoch) | before: s, CPU-s | after: s, CPU-s | before/after s [95%] | before/after CPU [95%] |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['place']} | {r['k']} ({r['epoch']}) | {r['before_s']}, {r['before_cpu_s']} "
            f"| {r['after_s']}, {r['after_cpu_s']} | {r['before/after seconds']} | {r['before/after CPU']} |"
        )
    return "\n".join(lines)


def on_twin(after: str, before: str, steps: float, rounds: int) -> list[dict[str, Any]]:
    from tfpipe import storage
    from tfpipe.testing.gcs import TF_GCS_TEST_ENV, LocalGCS

    with LocalGCS() as gcs, gcs.activate(**{k: os.environ.get(k, v) for k, v in TF_GCS_TEST_ENV.items()}):
        bucket = gcs.create_bucket("tfpipe-text-resume-bench")
        roots = []
        for local in (after, before):
            root = storage.join(bucket, os.path.basename(local))
            for name in os.listdir(local):
                storage.write_atomic(storage.join(root, name), pathlib.Path(local, name).read_bytes())
            roots.append(root)
        return measure("gs:// (twin)", *roots, steps, rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data", default="/tmp/tfpipe-text-resume")
    parser.add_argument("--json", default=None)
    parser.add_argument("--local-only", action="store_true")
    args = parser.parse_args()
    import tfpipe

    after, before = dataset(args.data)
    text = tfpipe.Manifest.load(after).split("train").text
    steps = text.tokens / (L * BATCH)
    print(f"{text.documents:,} documents, {text.tokens:,} tokens: K = (e + 1/2) * {steps:.1f}", flush=True)
    print(f"the count alone: {count_cpu(after)}", flush=True)
    rows = measure("local", after, before, steps, args.rounds)
    results = {"local": rows, "local_per_epoch": per_epoch(rows, text.documents)}
    if not args.local_only:
        results["gs"] = on_twin(after, before, steps, args.rounds)
        results["gs_per_epoch"] = per_epoch(results["gs"], text.documents)
        rows = rows + results["gs"]
    print("\n" + table(rows))
    for key in ("local_per_epoch", "gs_per_epoch"):
        if key in results:
            print(f"{key}: {results[key]}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()

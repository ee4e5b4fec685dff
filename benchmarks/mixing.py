"""How well the training orders mix a class-sorted source: label runs and classes per batch.

Run (deterministic, not a timing; about 4 minutes on 2 cores at the default size, most of it
converting the table once):
  TFPIPE_BENCH_DATA=/tmp/tfpipe-bench python benchmarks/mixing.py [--rows-per-class N]

A table sorted by label (ImageNet's geometry by default: 1,000 classes of 1,281 rows in 1,024
shards, so a shard holds one or two classes) is converted as it is: `tfpipe convert` keeps a
table's row order, so the shards are class-sorted, the worst case for an input order. Each
order then yields one epoch at ImageNet's training settings (batch 1,024, shuffle_buffer
10,000, cycle_length 16), and the labels are measured:

- run: the mean length of runs of equal labels in the record stream (a uniform permutation:
  about 1.001);
- classes/batch: distinct labels per batch (mean and the worst batch; a uniform permutation
  of 1,000 balanced classes: about 641 in a batch of 1,024);
- top share: the largest share of one label in a batch (mean).

Orders: the shuffle buffer's (files shuffled, 16 interleaved, a 10,000-record buffer; with
deterministic=True so the figures repeat), the resumable order at its defaults (groups of 64
files, windows of 10,000 records), with fewer or more files per group and larger windows
(what moves its mixing), and a uniform permutation of the epoch (numpy) as the ideal.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile

import numpy as np

import tfpipe
from tfpipe.format.manifest import MANIFEST_NAME

CLASSES, SHARDS, BATCH = 1000, 1024, 1024
ORDERS: dict[str, dict] = {
    "shuffle_buffer (today's: 16 files)": {"order": "shuffle_buffer", "deterministic": True},
    "resumable (default: 64 files a group)": {"order": "resumable"},
    "resumable, cycle_length=16": {"order": "resumable", "cycle_length": 16},
    "resumable, cycle_length=128": {"order": "resumable", "cycle_length": 128},
    "resumable, shuffle_buffer=20000": {"order": "resumable", "shuffle_buffer": 20_000},
    "shuffle_buffer, cycle_length=64": {"order": "shuffle_buffer", "deterministic": True, "cycle_length": 64},
}


def class_sorted_table(root: str, rows_per_class: int) -> str:
    """The converted table (label-sorted rows), made once under `root`."""
    dest = os.path.join(root, f"mixing-{rows_per_class}")
    if not os.path.exists(os.path.join(dest, MANIFEST_NAME)):
        import pandas as pd

        n = CLASSES * rows_per_class
        csv = os.path.join(root, f"mixing-{rows_per_class}.csv")
        pd.DataFrame({"row": np.arange(n), "label": np.repeat(np.arange(CLASSES), rows_per_class)}).to_csv(
            csv, index=False
        )
        tfpipe.convert(csv, dest, label="label", num_shards=SHARDS, overwrite=True)
    return dest


def measure(labels: np.ndarray, batch: int) -> dict[str, float]:
    """Label runs and per-batch class counts of one epoch's label stream."""
    runs = 1 + int(np.count_nonzero(labels[1:] != labels[:-1]))
    batches = labels[: len(labels) // batch * batch].reshape(-1, batch)
    distinct = np.array([len(np.unique(b)) for b in batches])
    top = np.array([np.bincount(b).max() / batch for b in batches])
    return {
        "mean_run": round(len(labels) / runs, 3),
        "classes_per_batch_mean": round(float(distinct.mean()), 1),
        "classes_per_batch_min": int(distinct.min()),
        "top_share_mean": round(float(top.mean()), 4),
    }


def epoch_labels(data: str, examples: int, **options) -> np.ndarray:
    ds = tfpipe.build(data, batch_size=BATCH, seed=1, features=["row"], **options)
    steps = examples // BATCH
    return np.concatenate([y.numpy() for _, y in ds.take(steps)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows-per-class", type=int, default=1281)
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args()
    root = os.environ.get("TFPIPE_BENCH_DATA") or tempfile.mkdtemp(prefix="tfpipe-mixing-")
    os.makedirs(root, exist_ok=True)
    data = class_sorted_table(root, args.rows_per_class)
    examples = tfpipe.Manifest.load(data).splits["train"].examples
    results = {}
    for name, options in ORDERS.items():
        results[name] = measure(epoch_labels(data, examples, **options), BATCH)
        print(name, json.dumps(results[name]), flush=True)
    ideal = np.random.default_rng(1).permutation(np.repeat(np.arange(CLASSES), args.rows_per_class))
    results["uniform permutation (ideal)"] = measure(ideal, BATCH)
    print("\n| order | mean label run | classes per batch (mean, worst) | top class share |")
    print("|---|---|---|---|")
    for name, r in results.items():
        print(
            f"| {name} | {r['mean_run']} | {r['classes_per_batch_mean']}, {r['classes_per_batch_min']} "
            f"| {r['top_share_mean']:.1%} |"
        )
    command = f"TFPIPE_BENCH_DATA={root} python benchmarks/mixing.py --rows-per-class {args.rows_per_class}"
    print(f"\n{examples:,} rows, {CLASSES} classes sorted, {SHARDS} shards, batch {BATCH}; `{command}`")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results, "examples": examples, "command": command}, f, indent=1)


if __name__ == "__main__":
    main()

"""What a pipeline costs to start, against the plain tf.data recipe (issue 31's targets), in
CPU seconds of this process (every TensorFlow thread counts; noise barely moves them), paired
by round with the contenders' order alternating, ratios as geometric means with 95% intervals
(benchmarks/paired.py):

1. images, from making the dataset to its first batch of TFPIPE_BENCH_BATCH (128): the baseline
   recipe (tfpipe/modalities/images/bench/recipe.py), tfpipe training with cache="none", with the default cache,
   and eval (training=False); target <= 1.5x;
2. images, `iter()` and the first batch again on an existing dataset (what Keras does for
   `validation_data` every epoch): the baseline, tfpipe training (default cache) and eval;
   target <= 1.5x;
3. text at L=512, batches of 32 rows: a plain tf.data read -> parse -> padded_batch of the same
   records against tfpipe's default build(); target <= 2x. Also the plain recipe batching a
   whole chunk of documents, the records tfpipe's first batch packs;
4. the first epoch, start included (from making the dataset), default cache, local shards and
   (unless TFPIPE_STARTUP_TWIN=0) the GCS twin unshaped: CPU ms per example <= 1.0x the
   baseline's, examples/s >= 1.0x.

Run: PYTHONPATH=. TFPIPE_BENCH_DATA=/tmp/tfpipe-bench python benchmarks/startup_cost.py
(from a worktree: without PYTHONPATH the installed tfpipe is measured, not the tree's)
(about 5 minutes on 2 quiet cores; makes TFPIPE_BENCH_IMAGES (800) JPEGs in TFPIPE_GCS_SHARDS
(16) shards, and a text corpus (the stdlib's docstrings, a byte-level BPE of 8,000), the first
time). TFPIPE_STARTUP_ROUNDS (6) rounds. The first build of each contender is not timed (it
imports and traces for the first time: not what a start costs). TFPIPE_STARTUP_PERF=1 instead
runs only tfpipe's starts (cache="none"), repeatedly, for `perf record -g -p <pid>` (the pid is
printed) to say where their CPU goes.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import paired

ROUNDS = int(os.environ.get("TFPIPE_STARTUP_ROUNDS", "6"))
BATCH = int(os.environ.get("TFPIPE_BENCH_BATCH", "128"))
SHARDS = int(os.environ.get("TFPIPE_GCS_SHARDS", "16"))
TEXT_BATCH, TEXT_L = 32, 512


def local_data(root: str) -> str:
    import conftest

    import tfpipe
    from tfpipe.testing import fake_data

    src, out = os.path.join(root, "images"), os.path.join(root, "startup-local")
    if not os.path.isdir(src):
        fake_data.write_image_folder(src, classes=10, per_class=conftest.N_IMAGES // 10, seed=0, workers=2)
    if not os.path.isdir(out):
        tfpipe.convert(src, out, format="imagenet", num_shards=SHARDS, workers=2)
    return out


def text_data(root: str) -> str:
    import tfpipe
    from tfpipe.synthetic import text

    out = os.path.join(root, "startup-text")
    if not os.path.exists(os.path.join(out, "tfpipe.json")):
        corpus = os.path.join(root, "startup-text-corpus")
        text.write_corpus(corpus, text.documents(), "jsonl", files=8)
        tfpipe.convert(corpus, out, train_tokenizer="bpe", vocab_size=8000, num_shards=8)
    return out


def phases(make) -> tuple[float, float, float]:
    """CPU seconds of make() (the dataset), iter() and the first batch."""
    c0 = time.process_time()
    ds = make()
    c1 = time.process_time()
    it = iter(ds)
    c2 = time.process_time()
    next(it)
    c3 = time.process_time()
    return c1 - c0, c2 - c1, c3 - c2


def again(ds):
    """A maker for iter() on an existing dataset: the dataset is made once, outside the timing."""
    return lambda: ds


def start_rounds(makers: dict) -> dict[str, list[tuple[float, float, float]]]:
    """Every contender's start once per round, the order alternating."""
    for make in makers.values():  # first calls trace and import: not what a start costs
        phases(make)
    got: dict[str, list[tuple[float, float, float]]] = {n: [] for n in makers}
    names = list(makers)
    for r in range(ROUNDS):
        for name in names if r % 2 == 0 else reversed(names):
            got[name].append(phases(makers[name]))
    return got


def report(title: str, got: dict, baseline: str, goal: float) -> None:
    print(f"\n{title}: CPU seconds, median of {ROUNDS} rounds [min, max]; total / {baseline}'s, paired")
    print(
        f"{'':26} {'dataset':>17} {'iter()':>17} {'first batch':>17} {'total':>17}  ratio (goal <= {goal}x)"
    )
    totals = {name: [sum(r) for r in runs] for name, runs in got.items()}
    for name, runs in got.items():
        cols = [*zip(*runs, strict=True), totals[name]]
        cells = " ".join(f"{statistics.median(c):.3f} [{min(c):.2f}, {max(c):.2f}]" for c in cols)
        ratio = "" if name == baseline else str(paired.ratio(totals[name], totals[baseline]))
        print(f"{name:26} {cells}  {ratio}")


def plain_text(files: list[str], batch: int = TEXT_BATCH):
    """The plain recipe for text: read -> parse -> padded_batch of the same records, `batch`
    documents a batch."""
    from tfpipe._tf import tf

    tf_ = tf()
    spec = {"tokens": tf_.io.RaggedFeature(tf_.int64)}
    ds = tf_.data.TFRecordDataset(files).map(
        lambda r: tf_.io.parse_single_example(r, spec)["tokens"][:TEXT_L],
        num_parallel_calls=tf_.data.AUTOTUNE,
    )
    return ds.padded_batch(batch, padded_shapes=[TEXT_L]).prefetch(tf_.data.AUTOTUNE)


def first_epochs(data: str, where: str) -> None:
    """The first epoch, start included, default cache, against the baseline's: examples/s and
    CPU ms per example (benchmarks/gcs_vs_baseline.py's paired whole-epoch windows)."""
    import gcs_vs_baseline

    import tfpipe
    from tfpipe.format.manifest import Manifest
    from tfpipe.modalities.images.bench.recipe import recipe_dataset

    manifest = Manifest.load(data)
    files, steps = manifest.shard_paths("train"), manifest.splits["train"].examples // BATCH
    makers = {
        "baseline": (lambda: recipe_dataset(files, batch_size=BATCH).repeat(), 0),
        "tfpipe default cache": (lambda: tfpipe.build(data, batch_size=BATCH), 0),
    }
    first, _ = gcs_vs_baseline.epoch_rounds(makers, steps)
    speed = paired.speed_ratio(first, "tfpipe default cache", "baseline")
    cpu = paired.cpu_ratio(first, "tfpipe default cache", "baseline")
    ms = {n: statistics.median(w.cpu_ms_per_example for w in first[n]) for n in first}
    print(
        f"\nfirst epoch, start included, {where} ({steps} batches of {BATCH}): tfpipe / baseline "
        f"examples/s {speed} (goal >= 1.0x), CPU per example {cpu} (goal <= 1.0x); CPU ms per "
        f"example {ms['tfpipe default cache']:.2f} (baseline {ms['baseline']:.2f})"
    )


def main() -> None:
    root = os.environ.get("TFPIPE_BENCH_DATA") or tempfile.mkdtemp(prefix="tfpipe-bench-")
    twin = os.environ.get("TFPIPE_STARTUP_TWIN", "1") != "0" and not os.environ.get("TFPIPE_STARTUP_PERF")
    gcs = None
    if twin:  # before TensorFlow is imported: it reads GCS_* at import
        import gcs_twin

        gcs = gcs_twin.start()
    try:
        run(root, gcs)
    finally:
        if gcs is not None:
            gcs.stop()
    print(f"\nload average {os.getloadavg()[0]:.2f}")


def run(root: str, gcs) -> None:
    import tfpipe
    from tfpipe.format.manifest import Manifest
    from tfpipe.modalities.images.bench.recipe import recipe_dataset
    from tfpipe.modalities.text import stages as text_stages

    data = local_data(root)
    files = Manifest.load(data).shard_paths("train")
    images = {
        "baseline": lambda: recipe_dataset(files, batch_size=BATCH).repeat(),
        "tfpipe cache=none": lambda: tfpipe.build(data, batch_size=BATCH, cache="none"),
        "tfpipe default cache": lambda: tfpipe.build(data, batch_size=BATCH),
        "tfpipe eval": lambda: tfpipe.build(data, batch_size=BATCH, training=False),
    }
    if os.environ.get("TFPIPE_STARTUP_PERF"):
        phases(images["tfpipe cache=none"])
        print(f"pid {os.getpid()}", flush=True)
        while True:
            phases(images["tfpipe cache=none"])
    report(f"images, a new dataset to its first batch of {BATCH}", start_rounds(images), "baseline", 1.5)
    existing = {name: again(images[name]()) for name in ("baseline", "tfpipe default cache", "tfpipe eval")}
    report("images, iter() again on an existing dataset", start_rounds(existing), "baseline", 1.5)
    text = text_data(root)
    text_files = Manifest.load(text).shard_paths("train")
    pipe = tfpipe.pipeline.plan(text, batch_size=TEXT_BATCH, sequence_length=TEXT_L)
    chunk = text_stages.chunk_size(pipe.plan.decoder.packing)
    texts = {
        "plain padded_batch": lambda: plain_text(text_files),
        # tfpipe's first batch packs a whole chunk: the plain recipe over the same documents.
        f"plain, a batch of {chunk}": lambda: plain_text(text_files, chunk),
        "tfpipe text default cache": lambda: tfpipe.build(
            text, batch_size=TEXT_BATCH, sequence_length=TEXT_L
        ),
    }
    report(f"text, L={TEXT_L}, batches of {TEXT_BATCH}", start_rounds(texts), "plain padded_batch", 2.0)
    first_epochs(data, "local shards")
    if gcs is not None:
        import gcs_twin

        bucket = gcs.create_bucket("startup")
        first_epochs(gcs_twin.upload_dataset(data, f"{bucket}/startup"), "the GCS twin, unshaped")


if __name__ == "__main__":
    main()

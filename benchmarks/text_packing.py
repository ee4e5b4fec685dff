"""Text packing: tfpipe's fill and speed against seqio's `trim_and_pack_dataset` and Grain's
`FirstFitPackIterDataset`, on real English text.

Text: the standard library's docstrings and pydoc's topics (`tfpipe.synthetic.text`: every
CPython has them), written as a JSON Lines corpus and converted by `tfpipe convert` with a 32k
byte-level BPE trained on it, in 8 shards.

Fill (real tokens / slots) at L = 128, 512, 2048:
- tfpipe first_fit, none, concat: measured on build()'s batches over two epochs of the training
  order, beside `predict_fill` from the manifest's histogram;
- seqio: trim_and_pack_dataset over one epoch (its one open row: next fit). It also trims each
  document to L, and counts a length by non-zero ids: "kept" says which share of the tokens
  it keeps;
- Grain: FirstFitPackIterDataset with 64 bins over one epoch (it takes no document longer than
  L: each is trimmed to L first, as seqio trims).

Speed, in paired alternating rounds (benchmarks/paired.py): real tokens per CPU-second of the
whole pipeline at L = 512 and 2048, each contender fed the same documents:
- tfpipe: `tfpipe.build(data, batch_size=B, sequence_length=L)` as a user calls it (read from
  the records cached in memory, parse, pack, batch);
- seqio: the records cached in memory, a batched parse, trim_and_pack_dataset, batch;
- Grain: the documents already parsed, as NumPy arrays in memory (no read or parse cost: the
  most favourable case for Grain), `ReadOptions(num_threads=0)`, FirstFitPackIterDataset with 64
  bins, batch.
A contender's real tokens per CPU-second is its slots per CPU-second times its fill. Ratios are
paired by round: geometric mean and 95% interval.

Run in a venv that has TensorFlow, tfpipe, seqio and grain (they are benchmark contenders only,
never tfpipe's dependencies; seqio needs tensorflow-text):

    python -m venv /work/venv-textpeers
    /work/venv-textpeers/bin/pip install "tensorflow==2.21.*" "tensorflow-text==2.21.*" seqio grain tokenizers
    /work/venv-textpeers/bin/pip install -e .
    /work/venv-textpeers/bin/python benchmarks/text_packing.py [--rounds 6] [--seconds 3]

A contender that is not installed is left out and said so.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE]

import paired  # noqa: E402

FILL_LENGTHS = (128, 512, 2048)
SPEED_LENGTHS = (512, 2048)
BATCH = 32
GRAIN_BINS = 64


def dataset(tmp: str, vocab: int = 32_000) -> tuple[str, list[list[int]]]:
    """The corpus converted by `tfpipe convert` (a BPE trained on it); (path, token ids)."""
    import tfpipe
    from tfpipe.modalities.text.convert import tokenizers
    from tfpipe.synthetic import text

    docs = text.documents()
    text.write_corpus(os.path.join(tmp, "corpus"), docs, "jsonl", files=8)
    root = os.path.join(tmp, "text")
    manifest = tfpipe.convert(
        os.path.join(tmp, "corpus"), root, train_tokenizer="bpe", vocab_size=vocab, num_shards=8
    )
    tok = tokenizers.load_stored(os.path.join(root, manifest.tokenizer.file), manifest.tokenizer.fingerprint)
    return root, tok.encode(docs)


def tfpipe_fill(root: str, L: int, mode: str, documents: int, tokens: int) -> float:
    import tfpipe

    rows = 2 * (tokens // L + (documents if mode == "none" else 0))  # about two epochs
    ds = tfpipe.build(root, batch_size=BATCH, sequence_length=L, packing=mode, seed=1, cache="memory")
    real = slots = 0
    for batch in ds.take(max(1, rows // BATCH)):
        real += int((batch["segment_ids"].numpy() > 0).sum())
        slots += BATCH * L
    return real / slots


def seqio_dataset(files: list[str], L: int, *, epochs: int | None) -> Any:
    import seqio
    import tensorflow as tf

    spec = {"tokens": tf.io.RaggedFeature(tf.int64)}
    ds = tf.data.TFRecordDataset(files).cache().repeat(epochs)
    ds = ds.batch(1024).map(lambda r: tf.io.parse_example(r, spec)["tokens"]).unbatch()
    ds = ds.map(lambda t: {"targets": tf.cast(t, tf.int32)})
    ds = seqio.utils.trim_and_pack_dataset(ds, {"targets": L})
    return ds.batch(BATCH, drop_remainder=epochs is None).prefetch(tf.data.AUTOTUNE)


def seqio_fill(files: list[str], L: int, tokens: int) -> tuple[float, float]:
    real = slots = 0
    for batch in seqio_dataset(files, L, epochs=1):
        seg = batch["targets_segment_ids"].numpy()
        real += int((seg > 0).sum())
        slots += seg.size
    return real / slots, real / tokens


def grain_dataset(ids: list[list[int]], L: int, *, epochs: int | None) -> Any:
    import grain
    import grain.experimental as ge

    source = [{"tokens": np.asarray(d, np.int32)} for d in ids]
    # Grain's packer takes no document longer than L: trimmed to L, as seqio trims.
    ds = grain.MapDataset.source(source).repeat(epochs).map(lambda x: {"tokens": x["tokens"][:L]})
    ds = ds.to_iter_dataset(grain.ReadOptions(num_threads=0))
    ds = ge.FirstFitPackIterDataset(ds, length_struct={"tokens": L}, num_packing_bins=GRAIN_BINS, seed=1)
    return ds.batch(BATCH, drop_remainder=epochs is None)


def grain_fill(ids: list[list[int]], L: int, tokens: int) -> tuple[float, float]:
    real = slots = 0
    for batch in grain_dataset(ids, L, epochs=1):
        seg = np.asarray(batch["tokens_segment_ids"])
        real += int((seg > 0).sum())
        slots += seg.size
    return real / slots, real / tokens


def available(name: str) -> bool:
    try:
        __import__(name)
    except ImportError as e:
        print(f"{name} is not installed here ({e}): left out.", file=sys.stderr)
        return False
    return True


def fills(root: str, files: list[str], ids: list[list[int]]) -> list[dict[str, Any]]:
    import tfpipe
    from tfpipe.packing.fill import predict_fill

    text = tfpipe.Manifest.load(root).split("train").text
    out = []
    for L in FILL_LENGTHS:
        row: dict[str, Any] = {"L": L}
        for mode in ("first_fit", "none", "concat"):
            row[mode] = tfpipe_fill(root, L, mode, text.documents, text.tokens)
            row[f"{mode}_predicted"] = predict_fill(text.length_histogram, L, mode)
        if available("seqio"):
            row["seqio"], row["seqio_kept"] = seqio_fill(files, L, text.tokens)
        if available("grain"):
            row["grain"], row["grain_kept"] = grain_fill(ids, L, text.tokens)
        print(json.dumps(row), flush=True)
        out.append(row)
    return out


def speed(
    root: str, files: list[str], ids: list[list[int]], fill: dict[int, dict[str, Any]], args: Any
) -> list[Any]:
    import tfpipe

    rows = []
    for L in SPEED_LENGTHS:
        makers = {"tfpipe": lambda L=L: tfpipe.build(root, batch_size=BATCH, sequence_length=L, seed=1)}
        fills_of = {"tfpipe": fill[L]["first_fit"]}
        if available("seqio"):
            makers["seqio"] = lambda L=L: seqio_dataset(files, L, epochs=None)
            fills_of["seqio"] = fill[L]["seqio"]
        if available("grain"):
            makers["grain"] = lambda L=L: grain_dataset(ids, L, epochs=None)
            fills_of["grain"] = fill[L]["grain"]
        results = paired.rounds(
            makers,
            examples_per_element=BATCH * L,  # slots; real tokens = slots x fill
            n_rounds=args.rounds,
            seconds=args.seconds,
            warmup=args.warmup,
            on_window=lambda r, name, w, L=L: print(
                f"  L={L} round {r} {name}: {w}", file=sys.stderr, flush=True
            ),
        )
        per_cpu = {
            name: [fills_of[name] * 1000 / w.cpu_ms_per_example for w in ws] for name, ws in results.items()
        }
        for peer, goal in (("seqio", 10.0), ("grain", 3.0)):
            if peer not in results:
                continue
            rows.append(
                {
                    "L": L,
                    "peer": peer,
                    "goal": goal,
                    "real_tokens_per_cpu_second": {
                        k: round(statistics.median(v)) for k, v in per_cpu.items()
                    },
                    "ratio": paired.ratio(per_cpu["tfpipe"], per_cpu[peer]).to_json(),
                    "throughput_ratio": paired.ratio(
                        [fills_of["tfpipe"] * w.examples_per_sec for w in results["tfpipe"]],
                        [fills_of[peer] * w.examples_per_sec for w in results[peer]],
                    ).to_json(),
                    "cores_busy": {
                        k: round(statistics.median(w.cores_busy for w in ws), 2) for k, ws in results.items()
                    },
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    import tfpipe

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--fill-only", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root, ids = dataset(tmp)
        files = tfpipe.Manifest.load(root).shard_paths("train")
        print(f"corpus: {len(ids)} documents, {sum(map(len, ids))} tokens", flush=True)
        fill = {row["L"]: row for row in fills(root, files, ids)}
        speeds = [] if args.fill_only else speed(root, files, ids, fill, args)
    print(json.dumps({"fill": list(fill.values()), "speed": speeds}, indent=1))


if __name__ == "__main__":
    main()

"""How a text record holds its token ids: bytes on disk and parse cost, paired rounds.

Run: python benchmarks/text_layout.py [--rounds 6] [--vocab-size 32000] [--batch 256]

The documents are real English every CPython has (`tfpipe.synthetic.text`), tokenized by a
byte-level BPE trained here (`--vocab-size`). Each layout holds the same ids in a
`tf.train.Example` feature `tokens`:
- int64_list: an Int64List (protobuf varints: 1 byte below 128, 2 below 16,384, 3 below 2**21);
  parsed batched with `tf.io.parse_example` and a `tf.io.RaggedFeature(tf.int64)`;
- uint16_bytes / int32_bytes: one BytesList value of little-endian uint16 or int32; parsed
  batched with a FixedLenFeature string, then one `tf.io.decode_raw` of the batch's bytes
  joined, split back into documents by their lengths (a RaggedTensor).

Reported per layout: bytes a token on disk (each record framed as a TFRecord: 16 bytes), and
millions of tokens parsed per CPU second, over the whole corpus in memory, repeated to a few
seconds a window. Layouts are timed back to back in each round, the order alternating; ratios
are paired by round (`paired.ratio`, 95% interval). CPU time comes from the process's rusage
(every TensorFlow thread), so load on the machine barely moves it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np
from paired import ratio

from tfpipe.format.codec import encode_example
from tfpipe.format.schema import VARIABLE, Field, Schema
from tfpipe.modalities.text.convert import tokenizers, tokenizertrain
from tfpipe.synthetic import text

LAYOUTS = ("int64_list", "uint16_bytes", "int32_bytes")


def records(ids: list[list[int]], layout: str) -> list[bytes]:
    if layout == "int64_list":
        schema = Schema((Field("tokens", "int64", VARIABLE),))
        return [encode_example({"tokens": np.asarray(t, np.int64)}, schema) for t in ids]
    dtype = "<u2" if layout == "uint16_bytes" else "<i4"
    schema = Schema((Field("tokens", "bytes"),))
    return [encode_example({"tokens": np.asarray(t, dtype).tobytes()}, schema) for t in ids]


def parser(layout: str):
    from tfpipe._tf import tf as load

    tf = load()
    if layout == "int64_list":
        spec = {"tokens": tf.io.RaggedFeature(tf.int64)}
        return lambda batch: tf.io.parse_example(batch, spec)["tokens"]
    width, dtype = (2, tf.uint16) if layout == "uint16_bytes" else (4, tf.int32)
    spec = {"tokens": tf.io.FixedLenFeature([], tf.string)}

    def parse(batch):
        raw = tf.io.parse_example(batch, spec)["tokens"]
        flat = tf.io.decode_raw(tf.strings.reduce_join(raw), dtype)
        return tf.RaggedTensor.from_row_lengths(tf.cast(flat, tf.int64), tf.strings.length(raw) // width)

    return parse


def window(layout: str, recs: list[bytes], batch: int, seconds: float) -> float:
    """Millions of tokens parsed per CPU second, over whole passes of the corpus."""
    from tfpipe._tf import tf as load

    tf = load()
    ds = tf.data.Dataset.from_tensor_slices(recs).batch(batch).map(parser(layout), num_parallel_calls=1)
    ds = ds.map(lambda r: tf.size(r.flat_values, out_type=tf.int64))
    for _ in ds.take(2):  # warm up: traced and running
        pass
    tokens, cpu, start = 0, time.process_time(), time.perf_counter()
    while time.perf_counter() - start < seconds:
        tokens += int(sum(n.numpy() for n in ds))
    return tokens / (time.process_time() - cpu) / 1e6


def main() -> None:
    parser_ = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser_.add_argument("--rounds", type=int, default=6)
    parser_.add_argument("--vocab-size", type=int, default=32000)
    parser_.add_argument("--batch", type=int, default=256)
    parser_.add_argument("--seconds", type=float, default=3.0)
    args = parser_.parse_args()
    docs = text.documents()
    tok = tokenizers.load(tokenizertrain.train("bpe", args.vocab_size, tokenizertrain.documents_of(docs)))
    ids = [t for t in tok.encode(docs) if t]
    n_tokens = sum(map(len, ids))
    print(f"{len(ids):,} documents, {n_tokens:,} tokens; byte-level BPE of {tok.vocab_size:,} ids")
    recs = {layout: records(ids, layout) for layout in LAYOUTS}
    for layout, rs in recs.items():
        size = sum(len(r) + 16 for r in rs)
        print(f"  {layout}: {size / n_tokens:.3f} bytes a token on disk ({size / 1e6:.2f} MB)")
    rates: dict[str, list[float]] = {layout: [] for layout in LAYOUTS}
    for r in range(args.rounds):
        for layout in LAYOUTS if r % 2 == 0 else reversed(LAYOUTS):
            rates[layout].append(window(layout, recs[layout], args.batch, args.seconds))
        print(f"  round {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f}" for k, v in rates.items()), flush=True)
    for layout, got in rates.items():
        print(f"{layout}: {statistics.median(got):.2f} M tokens per CPU second (median of {len(got)})")
    for layout in LAYOUTS[1:]:
        print(f"int64_list / {layout}, tokens per CPU second: {ratio(rates['int64_list'], rates[layout])}")


if __name__ == "__main__":
    main()

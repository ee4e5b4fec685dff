"""What a weighted mixture costs (issue 35 A): CPU per token of a two-source text mixture against
its largest source alone, and the CPU from build() to the first batch of each, paired by round
with the order alternating (benchmarks/paired.py); target <= 1.10x CPU per token.

The data: the standard library's docstrings and pydoc's topics (`tfpipe.synthetic.text`),
split into a large source (the first 4,000 documents) and a small one (the rest), tokenized by
one byte-level BPE of 8,000 trained on the large one; batches of 32 rows of 512 tokens, the
mixture 70/30 in tokens. CPU per token is per slot token (rows x L), the unit both fill alike.

Run: TFPIPE_BENCH_DATA=/tmp/tfpipe-bench python benchmarks/mixture_cost.py
(TFPIPE_MIX_ROUNDS rounds, default 6; windows of TFPIPE_MIX_SECONDS, default 8 s).
"""

from __future__ import annotations

import os
import resource
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import paired

ROUNDS = int(os.environ.get("TFPIPE_MIX_ROUNDS", "6"))
SECONDS = float(os.environ.get("TFPIPE_MIX_SECONDS", "8"))
B, L = 32, 512
WEIGHTS = {"large": 0.7, "small": 0.3}


def make_data(root: str) -> dict[str, str]:
    """The two sources, converted once into `root`."""
    import tfpipe
    from tfpipe.format.manifest import Manifest
    from tfpipe.synthetic import text

    out = {"large": os.path.join(root, "mix-large"), "small": os.path.join(root, "mix-small")}
    if all(os.path.exists(os.path.join(p, "tfpipe.json")) for p in out.values()):
        return out
    docs = text.documents()
    text.write_corpus(os.path.join(root, "mix-large-corpus"), docs[:4000], "jsonl", files=4)
    text.write_corpus(os.path.join(root, "mix-small-corpus"), docs[4000:], "jsonl", files=2)
    tfpipe.convert(
        os.path.join(root, "mix-large-corpus"),
        out["large"],
        train_tokenizer="bpe",
        vocab_size=8000,
        num_shards=4,
    )
    tok = os.path.join(out["large"], Manifest.load(out["large"]).tokenizer.file)
    tfpipe.convert(os.path.join(root, "mix-small-corpus"), out["small"], tokenizer=tok, num_shards=2)
    return out


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def startup(make) -> float:
    """CPU seconds from making the dataset to its first batch."""
    before = cpu_seconds()
    next(iter(make()))
    return cpu_seconds() - before


def main() -> None:
    import tfpipe

    root = os.environ.get("TFPIPE_BENCH_DATA") or tempfile.mkdtemp()
    data = make_data(root)
    kw = {"batch_size": B, "sequence_length": L, "seed": 1}
    makers = {
        "largest": lambda: tfpipe.build(data["large"], **kw),
        "mixture": lambda: tfpipe.build(data, weights=WEIGHTS, **kw),
    }
    for make in makers.values():
        startup(make)  # the first build imports and traces: not what a start costs
    starts: dict[str, list[float]] = {name: [] for name in makers}
    for r in range(ROUNDS):
        for name in makers if r % 2 == 0 else reversed(list(makers)):
            starts[name].append(startup(makers[name]))
    results = paired.rounds(
        makers,
        examples_per_element=B * L,
        n_rounds=ROUNDS,
        seconds=SECONDS,
        warmup=3.0,
        on_window=paired.print_window,
    )
    summary = paired.summary(results)
    cpu = paired.cpu_ratio(results, "mixture", "largest")
    print(f"CPU per slot token, mixture / largest alone: {cpu} (target <= 1.10)")
    print(f"tokens/s, mixture / largest alone: {paired.speed_ratio(results, 'mixture', 'largest')}")
    print(f"start-up CPU s, mixture / largest alone: {paired.ratio(starts['mixture'], starts['largest'])}")
    for name in makers:
        s = summary[name]
        ns = 1e6 * statistics.median(w.cpu_ms_per_example for w in results[name])
        print(
            f"  {name}: {s['examples_per_sec']:,.0f} slot tokens/s, {ns:.0f} CPU ns a token, "
            f"{s['cores_busy']} cores busy, start-up {statistics.median(starts[name]):.2f} CPU s"
        )
    print("command: TFPIPE_BENCH_DATA=... python benchmarks/mixture_cost.py")


if __name__ == "__main__":
    main()

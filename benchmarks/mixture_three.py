"""Issue 45's benchmark: a mixture of three real corpora of unlike lengths at L=2048, batches of
4, weights 0.2 / 0.5 / 0.3 in tokens, one SentencePiece model (benchmarks/mixture_corpora.py:
KJV chapters ~830 tokens, documentation sections ~510, whole standard-library files ~6,500).

1. Windows (exact for the data and seed, load does not move them): each source's share of the
   real tokens in every window of 100 consecutive batches among the first TFPIPE_MIX_BATCHES
   (1,000), seeds 1-3; the worst |share - weight| in points (target 0.5), from the rows' own
   count by source (bench's, mixshare.window_shares).
2. Fill: the mixture's measured fill over those batches, beside its prediction from the mix and
   beside each source's alone (measured over TFPIPE_MIX_ALONE (300) batches of each source
   built alone) combined by the weights, `sum(w) / sum(w / fill)`: what the same tokens fill
   when each source packs alone (target: within 1 point).
3. CPU per slot token of the mixture against its largest source alone ("code", by tokens),
   paired by round with the order alternating (benchmarks/paired.py; target <= 1.10x), and
   against its sources alone combined as the mixture's rows hold them (each source's CPU per
   slot token alone, weighted by its share of the mixture's rows, w / fill): what mixing adds
   over packing the same documents alone. Each source costs what its documents cost (short
   documents more per token), so the first ratio also measures the sources' unlike documents.
   And the CPU from build() to the first batch (issue 45's start-up target <= 1.2x).

Run: PYTHONPATH=. TFPIPE_BENCH_DATA=/tmp/tfpipe-bench python benchmarks/mixture_three.py
(TFPIPE_MIX_ROUNDS rounds, default 6; windows of TFPIPE_MIX_SECONDS, default 8 s). The first
run converts the corpora (~40 s; the KJV from Debian's bible-kjv packages, see
mixture_corpora.py).
"""

from __future__ import annotations

import os
import resource
import statistics
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mixture_corpora
import paired

ROUNDS = int(os.environ.get("TFPIPE_MIX_ROUNDS", "6"))
SECONDS = float(os.environ.get("TFPIPE_MIX_SECONDS", "8"))
BATCHES = int(os.environ.get("TFPIPE_MIX_BATCHES", "1000"))
ALONE = int(os.environ.get("TFPIPE_MIX_ALONE", "300"))
B, L = 4, 2048
WEIGHTS = {"bible": 0.2, "docs": 0.5, "code": 0.3}
LARGEST = "code"


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def windows(data: dict[str, str]) -> tuple[list[list[float]], float, float]:
    """Each seed's worst window per source (points), the mixture's fill over seed 1's batches
    and its prediction from the mix."""
    import tfpipe
    from tfpipe.modalities.text.bench import mixshare
    from tfpipe.modalities.text.mixture import pack as mixture_pack

    worst, fill, predicted = [], 0.0, 0.0
    for seed in (1, 2, 3):
        pipe = tfpipe.plan(data, weights=WEIGHTS, batch_size=B, sequence_length=L, seed=seed)
        per_batch = np.array(
            [mixshare.by_source(r) for r in mixture_pack.counting(pipe).take(BATCHES)], np.int64
        )
        worst.append(mixshare.worst_windows(per_batch, list(WEIGHTS.values()), 100).tolist())
        if seed == 1:
            fill, predicted = per_batch.sum() / (BATCHES * B * L), pipe.predicted_fill()
    return worst, fill, predicted


def alone_fill(path: str) -> float:
    """The fill of one source built alone, measured over ALONE batches."""
    import tfpipe

    ds = tfpipe.build(path, batch_size=B, sequence_length=L, seed=1)
    real = sum(int((b["segment_ids"].numpy() != 0).sum()) for b in ds.take(ALONE))
    return real / (ALONE * B * L)


def startup(make) -> float:
    """CPU seconds from making the dataset to its first batch."""
    before = cpu_seconds()
    next(iter(make()))
    return cpu_seconds() - before


def main() -> None:
    import tfpipe

    root = os.environ.get("TFPIPE_BENCH_DATA") or tempfile.mkdtemp()
    data = mixture_corpora.make(root)
    worst, fill, predicted = windows(data)
    print(
        f"three sources at L={L}, B={B}, weights {WEIGHTS}; windows of 100 batches over the first {BATCHES:,}"
    )
    for seed, w in zip((1, 2, 3), worst, strict=True):
        told = ", ".join(f"{n} {x:.2f}" for n, x in zip(WEIGHTS, w, strict=True))
        print(f"  seed {seed}: worst window (points off the weight): {told}")
    print(f"worst window, every source and seed: {max(max(w) for w in worst):.2f} points (target <= 0.5)")
    alone = {n: alone_fill(p) for n, p in data.items()}
    combined = sum(WEIGHTS.values()) / sum(w / alone[n] for n, w in WEIGHTS.items())
    print(
        f"fill: mixture {fill:.2%} measured, {predicted:.2%} predicted from the mix; each source alone "
        + ", ".join(f"{n} {f:.2%}" for n, f in alone.items())
        + f", combined by the weights {combined:.2%}: {100 * (fill - combined):+.2f} points (target within 1)"
    )
    kw = {"batch_size": B, "sequence_length": L, "seed": 1}
    makers = {
        "largest": lambda: tfpipe.build(data[LARGEST], **kw),
        "mixture": lambda: tfpipe.build(data, weights=WEIGHTS, **kw),
        **{n: (lambda n=n: tfpipe.build(data[n], **kw)) for n in WEIGHTS if n != LARGEST},
    }
    for make in makers.values():
        startup(make)  # the first build imports and traces: not what a start costs
    starts: dict[str, list[float]] = {name: [] for name in makers}
    for r in range(ROUNDS):
        for name in ("largest", "mixture") if r % 2 == 0 else ("mixture", "largest"):
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
    print(f"CPU per slot token, mixture / {LARGEST} alone: {cpu} (target <= 1.10)")
    rows = {n: w / alone[n] for n, w in WEIGHTS.items()}
    each = {
        n: statistics.median(w.cpu_ms_per_example for w in results["largest" if n == LARGEST else n])
        for n in WEIGHTS
    }
    combined_cpu = sum(rows[n] * each[n] for n in WEIGHTS) / sum(rows.values())
    mixture_cpu = statistics.median(w.cpu_ms_per_example for w in results["mixture"])
    print(
        f"CPU per slot token, mixture / its sources alone combined by its rows: {mixture_cpu / combined_cpu:.3f}x "
        "(medians; each alone: " + ", ".join(f"{n} {1e6 * c:.0f} ns" for n, c in each.items()) + ")"
    )
    print(f"slot tokens/s, mixture / {LARGEST} alone: {paired.speed_ratio(results, 'mixture', 'largest')}")
    start = paired.ratio(starts["mixture"], starts["largest"])
    print(f"start-up CPU s, mixture / {LARGEST} alone: {start} (target <= 1.2)")
    for name in ("largest", "mixture"):
        s = summary[name]
        ns = 1e6 * statistics.median(w.cpu_ms_per_example for w in results[name])
        print(
            f"  {name}: {s['examples_per_sec']:,.0f} slot tokens/s, {ns:.0f} CPU ns a token, "
            f"{s['cores_busy']} cores busy, start-up {statistics.median(starts[name]):.2f} CPU s"
        )
    print("command: PYTHONPATH=. TFPIPE_BENCH_DATA=... python benchmarks/mixture_three.py")


if __name__ == "__main__":
    main()

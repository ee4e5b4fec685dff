"""How far a real text mixture's token shares stray from its weights over windows of batches:
`tfpipe.build()`'s own mixture (not a simulation, as mixture_shares.py is), its rows counted by
source as `tfpipe bench` counts them (modalities/text/bench/mixshare.py, every row checked
against the pipeline's).

For each seed: each source's share of the real tokens in every window of WINDOW consecutive
batches among the first BATCHES (every start, windows overlapping), and the worst and the mean
|share - weight| in points. The figures are exact for the data, tokenizer and seed (the order is
a function of them), not timings: load does not move them.

Run, on docs/guides/text.md's two corpora (its "Mixtures" section makes data/topics):

    PYTHONPATH=. python benchmarks/mixture_windows.py docs=data/corpus topics=data/topics \
        --weights docs=0.7,topics=0.3 --batch-size 8 --sequence-length 128 --seeds 1,2,3
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np

import tfpipe
from tfpipe.modalities.text.bench import mixshare


@dataclasses.dataclass(frozen=True)
class Stray:
    """One source's shares over the windows of one seed, in points off its weight."""

    name: str
    weight: float
    worst: float
    mean: float


def strays(
    data: dict[str, str],
    weights: dict[str, float],
    *,
    batch_size: int,
    sequence_length: int,
    seed: int,
    batches: int = 1000,
    window: int = 100,
) -> list[Stray]:
    """Each source's worst and mean |share - weight| (points) over the windows of one seed."""
    pipe = tfpipe.plan(
        data, weights=weights, batch_size=batch_size, sequence_length=sequence_length, seed=seed
    )
    shares = mixshare.window_shares(pipe, batches=batches, window=window)
    mix = pipe.mixture
    off = np.abs(shares - np.array(mix.weights)) * 100
    return [
        Stray(name, w, float(off[:, s].max()), float(off[:, s].mean()))
        for s, (name, w) in enumerate(zip(mix.names, mix.weights, strict=True))
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", nargs="+", metavar="NAME=PATH")
    parser.add_argument("--weights", required=True, metavar="NAME=W,...")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--batches", type=int, default=1000)
    parser.add_argument("--window", type=int, default=100)
    args = parser.parse_args()
    data = dict(item.split("=", 1) for item in args.data)
    weights = {k: float(v) for k, v in (item.split("=", 1) for item in args.weights.split(","))}
    print(
        f"{', '.join(args.data)}; weights {args.weights}; B={args.batch_size} L={args.sequence_length}; "
        f"windows of {args.window} batches over the first {args.batches:,}"
    )
    for seed in map(int, args.seeds.split(",")):
        found = strays(
            data,
            weights,
            batch_size=args.batch_size,
            sequence_length=args.sequence_length,
            seed=seed,
            batches=args.batches,
            window=args.window,
        )
        told = "; ".join(
            f"{s.name} ({s.weight:.2f}): worst {s.worst:.1f} points, mean {s.mean:.1f}" for s in found
        )
        print(f"  seed {seed}: {told}")


if __name__ == "__main__":
    main()

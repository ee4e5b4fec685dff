"""Start-up CPU of two source trees of tfpipe, paired by round: before and after a change.

Each round runs one child process per tree (the order alternating between rounds); a child
imports tfpipe from its tree, builds each contender once untimed (first imports and traces),
then times STARTS starts of each (CPU seconds from making the dataset to its first batch, as
benchmarks/startup_cost.py) and prints their medians. Ratios are after / before per contender,
geometric means over rounds with 95% intervals (benchmarks/paired.py).

Run: TFPIPE_BENCH_DATA=/tmp/tfpipe-bench python benchmarks/startup_trees.py BEFORE_TREE AFTER_TREE
(e.g. /work/main .; the data of benchmarks/startup_cost.py, made by it the first time; about
4 minutes on 2 cores with TFPIPE_STARTUP_ROUNDS=4).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import paired

ROUNDS = int(os.environ.get("TFPIPE_STARTUP_ROUNDS", "4"))
STARTS = 3
CHILD = r"""
import json, os, statistics, sys, time
import tfpipe
data, text, starts = sys.argv[1], sys.argv[2], int(sys.argv[3])
makers = {
    "images cache=none": lambda: tfpipe.build(data, batch_size=128, cache="none", seed=1),
    "images default cache": lambda: tfpipe.build(data, batch_size=128, seed=1),
    "images eval": lambda: tfpipe.build(data, batch_size=128, training=False),
    "text default cache": lambda: tfpipe.build(text, batch_size=32, sequence_length=512, seed=1),
}
def start(make):
    c = time.process_time(); next(iter(make())); return time.process_time() - c
out = {}
for name, make in makers.items():
    start(make)
    out[name] = statistics.median(start(make) for _ in range(starts))
ds = makers["images default cache"]()
next(iter(ds))
out["images iter() again"] = statistics.median(
    (lambda c: (next(iter(ds)), time.process_time() - c)[1])(time.process_time()) for _ in range(starts)
)
print(json.dumps(out))
"""


def child(tree: str, data: str, text: str) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    run = subprocess.run(
        [sys.executable, "-c", CHILD, data, text, str(STARTS)],
        env=env,
        cwd=os.path.abspath(tree),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> None:
    import startup_cost

    before, after = sys.argv[1:3]
    root = os.environ.get("TFPIPE_BENCH_DATA") or "/tmp/tfpipe-bench"
    data, text = startup_cost.local_data(root), startup_cost.text_data(root)
    got: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    for r in range(ROUNDS):
        for name, tree in (("before", before), ("after", after))[:: 1 if r % 2 == 0 else -1]:
            got[name].append(child(tree, data, text))
            print(f"round {r} {name}: {got[name][-1]}", flush=True)
    print(f"\nCPU seconds to the first batch, median over rounds (before {before}, after {after}):")
    for contender in got["before"][0]:
        b = [g[contender] for g in got["before"]]
        a = [g[contender] for g in got["after"]]
        median = sorted(a)[len(a) // 2], sorted(b)[len(b) // 2]
        print(f"  {contender:22} {median[1]:.3f} -> {median[0]:.3f}  after/before {paired.ratio(a, b)}")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

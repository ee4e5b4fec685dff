"""How long the test suite takes: the fast lane and the full run, one process or two workers.

    python benchmarks/suite_time.py                 # fast and fast-n2, 3 rounds
    python benchmarks/suite_time.py full full-n2 --rounds 2

Each lane is a `python -m pytest` command run to its end; the lanes run back to back in each
round, in alternating order (A B, then B A, ...), as benchmarks/paired.py times contenders. Per
lane: the wall seconds and the CPU seconds of the whole process tree (pytest, its xdist workers
and every process the tests start, from RUSAGE_CHILDREN), with the median over rounds; per pair
of lanes, the wall-time ratio paired by round with its 95% interval. CPU seconds barely move
when a neighbour takes cores; wall seconds do, so a figure taken on a loaded machine says so.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import time

from paired import ratio  # benchmarks/ is on the path when this script runs

ROOT = pathlib.Path(__file__).resolve().parents[1]
LANES = {
    "fast": ["-m", "not slow"],
    "fast-n2": ["-m", "not slow", "-n", "2", "--dist", "loadfile"],
    "full": [],
    "full-n2": ["-n", "2", "--dist", "loadfile"],
}


def run(lane: str) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of the process tree, pytest's exit code) of one lane."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    code = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *LANES[lane]],
        cwd=ROOT,
        env=os.environ | {"PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ).returncode
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, code


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("lanes", nargs="*", default=["fast", "fast-n2"], choices=sorted(LANES))
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    walls: dict[str, list[float]] = {lane: [] for lane in args.lanes}
    cpus: dict[str, list[float]] = {lane: [] for lane in args.lanes}
    for r in range(args.rounds):
        for lane in args.lanes if r % 2 == 0 else reversed(args.lanes):
            wall, cpu, code = run(lane)
            walls[lane].append(wall)
            cpus[lane].append(cpu)
            print(f"round {r + 1} {lane:8s} wall {wall:7.1f} s  cpu {cpu:7.1f} s  exit {code}", flush=True)
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for lane in args.lanes:
        print(
            f"{lane:8s} median wall {statistics.median(walls[lane]):7.1f} s, cpu {statistics.median(cpus[lane]):7.1f} s"
        )
    base = args.lanes[0]
    for lane in args.lanes[1:]:
        print(f"{lane} / {base} wall: {ratio(walls[lane], walls[base])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

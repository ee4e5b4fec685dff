"""How long the test suite takes: the fast lane and the full run, one process or two workers.

    python benchmarks/suite_time.py                 # fast and fast-n2, 3 rounds
    python benchmarks/suite_time.py full full-n2 --rounds 2
    python benchmarks/suite_time.py full-n2 --rounds 1 --record   # also tests/test_seconds.json

With --record, each run also reports its slowest tests, and the last run of the first lane, when
it is a full one, is written to tests/test_seconds.json: every test's seconds (setup + call +
teardown, from pytest's --durations), by which tests/support/file_order.py sends the files out longest
first. Record on a quiet machine.

Each lane is a `python -m pytest` command run to its end; the lanes run back to back in each
round, in alternating order (A B, then B A, ...), as benchmarks/paired.py times contenders. Per
lane: the wall seconds and the CPU seconds of the whole process tree (pytest, its xdist workers
and every process the tests start, from RUSAGE_CHILDREN), with the median over rounds; per pair
of lanes, the wall-time ratio paired by round with its 95% interval. CPU seconds barely move
when a neighbour takes cores; wall seconds do, so a figure taken on a loaded machine says so.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import pathlib
import platform
import re
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


SECONDS_FILE = ROOT / "tests" / "test_seconds.json"
# pytest's --durations lines: "12.34s call     tests/x/test_y.py::test_z[p]".
DURATION = re.compile(r"^\s*(\d+\.\d+)s (setup|call|teardown)\s+(\S.*)$")
# Tests shorter than this are left out of the recording (tests/support/file_order.py's default covers them).
RECORD_MIN_SECONDS = 0.1


def run(lane: str, record: bool = False) -> tuple[float, float, int, dict[str, float]]:
    """(wall seconds, CPU seconds of the process tree, pytest's exit code, {test: seconds} when
    `record`) of one lane."""
    durations = ["--durations=0", f"--durations-min={RECORD_MIN_SECONDS / 3}"] if record else []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *LANES[lane], *durations],
        cwd=ROOT,
        env=os.environ | {"PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE if record else subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode, tests_seconds(done.stdout or "")


def tests_seconds(output: str) -> dict[str, float]:
    """{test id: setup + call + teardown seconds} from pytest's --durations report."""
    seconds: dict[str, float] = collections.defaultdict(float)
    for line in output.splitlines():
        m = DURATION.match(line)
        if m:
            seconds[m.group(3).strip()] += float(m.group(1))
    return dict(seconds)


def write_seconds(seconds: dict[str, float], lane: str, wall: float) -> None:
    """tests/test_seconds.json: the tests of at least RECORD_MIN_SECONDS, by id."""
    kept = {k: round(v, 1) for k, v in sorted(seconds.items()) if v >= RECORD_MIN_SECONDS}
    made = {
        "recorded": (
            f"python benchmarks/suite_time.py {lane} --record: {datetime.date.today()}, "
            f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, wall {wall:.0f} s, "
            f"load average {os.getloadavg()[0]:.1f} at the end"
        ),
        "seconds": kept,
    }
    SECONDS_FILE.write_text(json.dumps(made, indent=0) + "\n")


def slowest(seconds: dict[str, float], n: int = 25) -> list[str]:
    return [f"  {v:7.1f} s  {k}" for k, v in sorted(seconds.items(), key=lambda kv: -kv[1])[:n]]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("lanes", nargs="*", default=["fast", "fast-n2"], choices=sorted(LANES))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--record",
        action="store_true",
        help="print each run's slowest tests; write the first lane's last run to tests/test_seconds.json",
    )
    args = parser.parse_args()
    walls: dict[str, list[float]] = {lane: [] for lane in args.lanes}
    cpus: dict[str, list[float]] = {lane: [] for lane in args.lanes}
    for r in range(args.rounds):
        for lane in args.lanes if r % 2 == 0 else reversed(args.lanes):
            wall, cpu, code, seconds = run(lane, args.record)
            walls[lane].append(wall)
            cpus[lane].append(cpu)
            print(f"round {r + 1} {lane:8s} wall {wall:7.1f} s  cpu {cpu:7.1f} s  exit {code}", flush=True)
            if args.record:
                print("\n".join(slowest(seconds)), flush=True)
                if lane == args.lanes[0] and lane.startswith("full"):  # a fast lane knows no slow test
                    write_seconds(seconds, lane, wall)
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

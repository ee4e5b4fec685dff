"""The host's load beside a measurement: the CPU time other processes and the hypervisor took
from the cores this process may run on, against the wall clock.

A shared host moves a rate more than anything tfpipe does (issue 41: the full pipeline ran at
423/s and at 831/s in two windows of one process while a neighbour took 0.85 cores), so each
timed window records what else ran beside it, and the report says when that makes its
figures unreliable. Linux only: the kernel's per-CPU counters in /proc/stat (busy and stolen
time of each CPU) less this process's own CPU time. Elsewhere nothing is measured (None).
"""

from __future__ import annotations

import dataclasses
import os
import time

from tfpipe.bench.results import HostLoad

_STAT = "/proc/stat"
# /proc/stat's columns after the CPU's name: user nice system idle iowait irq softirq steal ...
_BUSY = (0, 1, 2, 5, 6)  # user, nice, system, irq, softirq (guest time is inside user)
_STEAL = 7


@dataclasses.dataclass(frozen=True, slots=True)
class Sample:
    """The counters at one moment: wall seconds, this process's CPU seconds, and the busy and
    stolen CPU seconds of the cores it may run on."""

    wall: float
    own: float
    busy: float
    steal: float
    cores: int


def cores() -> tuple[int, ...]:
    """The CPUs this process may run on."""
    try:
        return tuple(sorted(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return tuple(range(os.cpu_count() or 1))


def sample() -> Sample | None:
    """The counters now; None where /proc/stat cannot be read."""
    allowed = {f"cpu{c}" for c in cores()}
    try:
        with open(_STAT, encoding="ascii") as f:
            lines = [line.split() for line in f if line.startswith("cpu") and not line.startswith("cpu ")]
    except OSError:
        return None
    tick = os.sysconf("SC_CLK_TCK")
    busy = steal = 0.0
    for name, *values in lines:
        if name in allowed and len(values) > _STEAL:
            busy += sum(int(values[i]) for i in _BUSY) / tick
            steal += int(values[_STEAL]) / tick
    return Sample(time.perf_counter(), time.process_time(), busy, steal, len(allowed))


def since(start: Sample | None) -> HostLoad | None:
    """What else ran on this process's cores from `start` until now; None without a start or
    over no time."""
    end = sample()
    if start is None or end is None or end.wall <= start.wall:
        return None
    wall = end.wall - start.wall
    # The kernel counts in ticks (10 ms) and this process in nanoseconds: a quiet host can
    # read a hair below zero.
    others = max(0.0, (end.busy - start.busy) - (end.own - start.own))
    return HostLoad(start.cores, others / wall, max(0.0, end.steal - start.steal) / wall, wall)


def load_average() -> float | None:
    """The host's 1-minute load average (runnable threads, this process's own included); None
    where the platform has none."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None

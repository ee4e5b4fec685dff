"""Whether the host's load makes a bench's figures unreliable, in numbers and in words.

The rates bench measures are this host's under whatever else ran on it. A neighbour that takes
a share of the cores takes about that share of a CPU-bound producer's rate, and moves it as its
own work comes and goes, so a busy host's verdict cannot stand for a quiet host's (nor for the
same host a minute later). Pure: the load is measured beside each window (measure/host.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from tfpipe.bench.results import HostLoad

# Others may take at most this share of the cores while the producer is timed for the figures
# to count as a quiet host's: 5 points of the moderately input-bound band are ~7% of the rate,
# and a neighbour's share of the cores costs a CPU-bound producer about that share of its rate.
# Quiet, the kernel's own threads read 0.01-0.06 of 2 cores here (issue 41).
BUSY_SHARE = 0.10


@dataclasses.dataclass(frozen=True, slots=True)
class HostFigures:
    """The host's load over a bench.

    Attributes:
      producer: what else ran on this process's cores over the producer's windows (the rate
        the verdict comes from).
      run: the same over every timed window of the bench (prefixes, scaling, storage).
      simulation: the same over --simulate's run, when it ran.
      load_average: the host's 1-minute load average as the bench started and as it ended
        (runnable threads, the bench's own included); None where the platform has none.
      busy: why the load makes the producer's figures unreliable; "" when it does not.
    """

    producer: HostLoad | None
    run: HostLoad | None
    simulation: HostLoad | None
    load_average: tuple[float | None, float | None]
    busy: str

    @property
    def simulation_busy(self) -> bool:
        """True when others took more than BUSY_SHARE of the cores during --simulate."""
        return is_busy(self.simulation)


def is_busy(load: HostLoad | None) -> bool:
    """True when others and the hypervisor took more than BUSY_SHARE of the cores."""
    return load is not None and load.taken_cores > BUSY_SHARE * load.cores


def figures(
    windows: Sequence[HostLoad | None],
    *,
    run: Sequence[HostLoad | None] = (),
    simulation: HostLoad | None = None,
    load_average: tuple[float | None, float | None] = (None, None),
) -> HostFigures:
    """The host's figures from the load beside the producer's windows and every timed window."""
    producer = HostLoad.combined(windows)
    return HostFigures(
        producer,
        HostLoad.combined([*run, *windows]),
        simulation,
        load_average,
        busy_reason(producer),
    )


def busy_reason(load: HostLoad | None) -> str:
    """Why the host makes the figures unreliable, in words for the verdict's line; ""."""
    if not is_busy(load):
        return ""
    assert load is not None
    return (
        f"the host was busy: other processes took {_taken(load)} while the producer was timed, "
        "so its rate is this host's under that load"
    )


def _taken(load: HostLoad) -> str:
    stolen = f" and the hypervisor {load.steal_cores:.2f}" if load.steal_cores >= 0.005 else ""
    return f"{load.others_cores:.2f} of {load.cores} cores{stolen}"


def sentence(h: HostFigures) -> str:
    """The report's line on the host: quiet or busy, with the figures it comes from."""
    if h.producer is None:
        return "not measured (the kernel's CPU counters, /proc/stat, are Linux's)"
    parts = [f"other processes took {_taken(h.producer)} while the producer was timed"]
    if h.run is not None:
        parts.append(f"{h.run.taken_cores:.2f} over every timed window")
    if h.simulation is not None:
        parts.append(f"{h.simulation.taken_cores:.2f} beside --simulate")
    start, end = h.load_average
    if start is not None and end is not None:
        parts.append(f"load average {start:.1f} at the start, {end:.1f} at the end")
    said = "; ".join(parts)
    if h.busy:
        return (
            f"BUSY: {said}. The rates are this host's under that load and move with it: the "
            "verdict cannot tell what a quiet host gives; re-run with nothing else running."
        )
    quiet = f"quiet: {said}"
    if h.simulation_busy:
        quiet += (
            ". Others took cores during --simulate: its measured wait is this host's at that "
            "load, not at the producer's"
        )
    return quiet

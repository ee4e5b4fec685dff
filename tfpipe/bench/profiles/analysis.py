"""What a profile says, as plain values: per-host steps from the Profiler, and the run's figures.

Pure arithmetic, no I/O and no xprof: the Profiler's per-step figures come in, the run's step
time and input share go out, with the rules written here once:
- A last step shorter than half the median of its host's steps is a partial step (the profile
  window ended mid-step) and is dropped, and said.
- Step time is the mean over the kept steps; the input share is the mean of the Profiler's
  per-step input shares, as its input-pipeline summary averages them.
- Across hosts of one run the slowest host decides a synchronous step, as xprof takes the
  slowest core: the run's step time and input share are the largest of its hosts'.
"""

from __future__ import annotations

import dataclasses
import math
import statistics

from tfpipe.bench.wait import Band, band
from tfpipe.errors import ProfileError

# A last step shorter than this share of the median step is partial: cut by the profile window.
PARTIAL_BELOW = 0.5


@dataclasses.dataclass(frozen=True, slots=True)
class Step:
    """One training step as the Profiler measured it.

    Attributes:
      number: the step's number (or name) in the profile.
      step_ms: its step time.
      input_ms: the time of it spent waiting for input.
      input_percent: the Profiler's share of the step spent waiting for input, 0..100.
    """

    number: str
    step_ms: float
    input_ms: float
    input_percent: float


@dataclasses.dataclass(frozen=True, slots=True)
class DroppedStep:
    """A partial last step left out of the figures."""

    host: str
    step: str
    step_ms: float
    median_ms: float


@dataclasses.dataclass(frozen=True, slots=True)
class HostAnalysis:
    """The Profiler's analysis of one host (or, for raw xplanes, of all hosts together).

    Attributes:
      host: the host's name (the file name before its suffix).
      files: the files read.
      format: what was read, e.g. "xplane, analysed by xprof 2.24.2" or "overview_page.pb".
      device: the device type the Profiler names, e.g. "TPU v2", "GPU"; "" when it does not.
      hardware: the Profiler's hardware type ("TPU", "GPU", "CPU_ONLY"); "" when absent.
      cores: accelerator cores it saw, if it says.
      host_count: hosts it saw, if it says.
      batch_size: the global batch it recorded, if it did (older TPU profiles do).
      steps: every step, in order.
      conclusion: the Profiler's own sentence about input.
    """

    host: str
    files: tuple[str, ...]
    format: str
    device: str
    hardware: str
    cores: int | None
    host_count: int | None
    batch_size: int | None
    steps: tuple[Step, ...]
    conclusion: str

    @property
    def cpu_only(self) -> bool:
        return self.hardware.upper().startswith("CPU") or self.device.upper().startswith("CPU")


def split_partial(host: str, steps: tuple[Step, ...]) -> tuple[tuple[Step, ...], DroppedStep | None]:
    """The steps to average, and the partial last step left out (None when there is none)."""
    if len(steps) < 2:
        return steps, None
    median = statistics.median(s.step_ms for s in steps)
    last = steps[-1]
    if last.step_ms < PARTIAL_BELOW * median:
        return steps[:-1], DroppedStep(host, last.number, last.step_ms, median)
    return steps, None


@dataclasses.dataclass(frozen=True, slots=True)
class Profile:
    """A profiled training run, as `tfpipe bench --from-profile` reads it.

    Attributes:
      path: the path given (log dir, run folder or file; local or gs://).
      run: the run folder read (`plugins/profile/<run>`), or None for a single file.
      runs: every run found beside it, oldest first.
      hosts: the Profiler's analysis per host (one for raw xplanes: xprof combines them).
      xprof_version: the xprof that analysed raw xplanes; None when pre-converted files were read.
      steps: steps analysed on every host, partial steps excluded.
      step_time_ms: mean step time (the slowest host's).
      step_time_std_ms, step_time_min_ms, step_time_max_ms: the spread of the kept steps.
      input_wait: the Profiler's share of each step spent waiting for input, 0..1 (the largest
        host's).
      dropped: partial last steps left out.
    """

    path: str
    run: str | None
    runs: tuple[str, ...]
    hosts: tuple[HostAnalysis, ...]
    xprof_version: str | None
    steps: int
    step_time_ms: float
    step_time_std_ms: float
    step_time_min_ms: float
    step_time_max_ms: float
    input_wait: float
    dropped: tuple[DroppedStep, ...]

    @property
    def gating(self) -> HostAnalysis:
        """The host whose figures the run takes (the slowest)."""
        return max(self.hosts, key=lambda h: _mean([s.step_ms for s in split_partial(h.host, h.steps)[0]]))

    @property
    def device(self) -> str:
        """The most specific name the hosts give ("TPU v2" over an input-pipeline file's "TPU")."""
        return max((h.device or h.hardware for h in self.hosts), key=len)

    @property
    def cores(self) -> int | None:
        counts = [h.cores for h in self.hosts if h.cores]
        return sum(counts) if counts else None

    @property
    def host_count(self) -> int:
        """Hosts in the profile: one file per host, or the Profiler's count when it says more."""
        said = max((h.host_count or 0) for h in self.hosts)
        return max(sum(len(h.files) for h in self.hosts), said)

    @property
    def batch_size(self) -> int | None:
        return next((h.batch_size for h in self.hosts if h.batch_size), None)

    @property
    def conclusion(self) -> str:
        return self.gating.conclusion

    @property
    def format(self) -> str:
        return self.hosts[0].format

    @property
    def verdict(self) -> Band:
        """tfpipe's band for the Profiler's input share, with the Profiler's thresholds."""
        return band(self.input_wait)

    @property
    def fed_step_time_ms(self) -> float:
        """The step without its input wait: what the accelerator takes when it is fed."""
        return self.step_time_ms * (1.0 - self.input_wait)


def summarize(
    path: str,
    run: str | None,
    runs: tuple[str, ...],
    hosts: tuple[HostAnalysis, ...],
    xprof_version: str | None,
) -> Profile:
    """Checks the hosts' analyses and combines them into the run's figures.

    Raises:
      ProfileError: a CPU-only profile, one with no training steps, or hosts that disagree.
    """
    where = _where(path, run)
    for h in hosts:
        if h.cpu_only:
            raise ProfileError(
                f"{where} is a CPU-only profile ({h.device or h.hardware}, host {h.host}): the Profiler "
                "measures no step time without a GPU or TPU, so it says nothing about an accelerator's "
                f"step. Profile the training run on its TPU or GPU. The Profiler says: {h.conclusion!r}"
            )
        if not h.steps:
            raise ProfileError(
                f"{where} holds no training steps (host {h.host}, {h.device or 'device unknown'}): an "
                "inference run, or a profile window that caught no step. Profile a few steps of the "
                "training run, e.g. Keras TensorBoard(profile_batch=(10, 15)). The Profiler says: "
                f"{h.conclusion!r}"
            )
    named = {h.device or h.hardware for h in hosts}
    # An input-pipeline file names only the kind ("TPU"), an overview page the model ("TPU v2").
    devices = sorted(d for d in named if not any(o != d and o.startswith(d) for o in named))
    if len(devices) > 1:
        raise ProfileError(f"{where}: its hosts name different devices, {devices}; expected one run")
    batches = sorted({h.batch_size for h in hosts if h.batch_size})
    if len(batches) > 1:
        raise ProfileError(f"{where}: its hosts record different global batches, {batches}")
    kept, dropped, means, waits = [], [], [], []
    for h in hosts:
        steps, partial = split_partial(h.host, h.steps)
        kept.append(steps)
        dropped += [partial] if partial else []
        means.append(_mean([s.step_ms for s in steps]))
        waits.append(_mean([s.input_percent for s in steps]) / 100.0)
    pooled = [s.step_ms for steps in kept for s in steps]
    return Profile(
        path=path,
        run=run,
        runs=runs,
        hosts=hosts,
        xprof_version=xprof_version,
        steps=min(len(s) for s in kept),
        step_time_ms=max(means),
        step_time_std_ms=statistics.pstdev(pooled) if len(pooled) > 1 else 0.0,
        step_time_min_ms=min(pooled),
        step_time_max_ms=max(pooled),
        input_wait=min(1.0, max(0.0, max(waits))),
        dropped=tuple(dropped),
    )


def _mean(values: list[float]) -> float:
    return math.fsum(values) / len(values)


def _where(path: str, run: str | None) -> str:
    return f"the profile {path!r}" + (f" (run {run})" if run else "")

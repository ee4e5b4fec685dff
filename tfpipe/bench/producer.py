"""Producer timing: steady-state throughput of the pipeline build() makes, prefix by prefix.

The timed window starts after a warm-up, so AUTOTUNE has settled and buffers have filled; the
first element's latency is reported apart. Elements are pulled inside a `tf.function` loop,
not one Python call each, so a fast prefix (reading records at tens of thousands per second)
is not capped by the interpreter.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tfpipe.bench.report import Rate, ScalingPoint, StageRate

if TYPE_CHECKING:
    from tfpipe.pipeline import Pipeline

# Each pull of the drain loop should last about this long: short enough for the window to
# end on time, long enough that the call overhead (~50 us) is well under 1%.
CHUNK_SECONDS = 0.1


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity), not the machine's total."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def core_counts(max_cores: int) -> list[int]:
    """The scaling curve's points: 1, 2, 4, ... doubling, and always `max_cores` itself."""
    if max_cores < 1:
        raise ValueError(f"max_cores must be >= 1. Received: {max_cores}")
    counts, c = [], 1
    while c < max_cores:
        counts.append(c)
        c *= 2
    counts.append(max_cores)
    return counts


def prefix_points(stages: Sequence[Any]) -> list[tuple[str, int, tuple[str, ...]]]:
    """Where to cut the stage list: after each run of stages of the same group.

    Returns:
      (group, number of stages applied, names of the stages this prefix adds) in order. A group
      that appears twice apart (rare) gets a `#2` suffix so names stay unique.
    """
    points: list[tuple[str, int, tuple[str, ...]]] = []
    seen: dict[str, int] = {}
    start = 0
    for i, stage in enumerate(stages):
        last = i + 1 == len(stages)
        if last or stages[i + 1].group != stage.group:
            n = seen[stage.group] = seen.get(stage.group, 0) + 1
            name = stage.group if n == 1 else f"{stage.group}#{n}"
            points.append((name, i + 1, tuple(s.name for s in stages[start : i + 1])))
            start = i + 1
    return points


class _Drain:
    """Pulls n elements from an iterator inside one tf.function call; returns how many came."""

    def __init__(self) -> None:
        from tfpipe._tf import tf

        tf_ = tf()

        @tf_.function
        def drain(iterator: Any, n: Any) -> Any:
            count = tf_.constant(0, tf_.int64)
            for _ in tf_.range(n):
                opt = iterator.get_next_as_optional()
                if not opt.has_value():
                    break
                count += 1
            return count

        self._fn = drain
        self._tf = tf_

    def __call__(self, iterator: Any, n: int) -> int:
        return int(self._fn(iterator, self._tf.constant(n, self._tf.int64)))


_drain: _Drain | None = None


def measure(
    make_dataset: Callable[[], Any],
    *,
    examples_per_element: int,
    seconds: float,
    warmup: float,
    on_window: Callable[[bool], None] | None = None,
) -> Rate:
    """Steady-state throughput of a dataset.

    Args:
      make_dataset: returns a fresh dataset (so every measurement starts cold the same way).
      examples_per_element: examples in one element (the batch size once batched).
      seconds: length of the timed window.
      warmup: seconds run before the window and excluded from it.
      on_window: called with True as the timed window starts and False as it ends, e.g. to
        start and stop the profiler over exactly that window.

    Returns:
      The Rate, with the first element's latency and the warm-up reported apart.
    """
    global _drain
    if _drain is None:
        _drain = _Drain()
    drain = _drain
    ds = make_dataset()
    t0 = time.perf_counter()
    it = iter(ds)
    got = drain(it, 1)
    first = time.perf_counter() - t0
    if got == 0:
        raise RuntimeError("The dataset produced no elements; check --data and --split.")
    # Warm-up: pull in chunks until `warmup` has passed, learning the chunk size on the way.
    chunk, exhausted = 1, False
    while time.perf_counter() - t0 < warmup and not exhausted:
        c0 = time.perf_counter()
        got = drain(it, chunk)
        exhausted = got < chunk
        elapsed = time.perf_counter() - c0
        if elapsed < CHUNK_SECONDS / 2:
            chunk *= 2
        elif elapsed > CHUNK_SECONDS * 2 and chunk > 1:
            chunk = max(1, chunk // 2)
    warm = time.perf_counter() - t0
    if on_window:
        on_window(True)
    w0 = time.perf_counter()
    elements = 0
    try:
        while not exhausted:
            got = drain(it, chunk)
            elements += got
            exhausted = got < chunk
            if time.perf_counter() - w0 >= seconds:
                break
    finally:
        window = time.perf_counter() - w0
        if on_window:
            on_window(False)
    if elements == 0:
        raise RuntimeError(
            f"The dataset ran out during warm-up ({warm:.1f} s); a training pipeline should repeat."
        )
    per_sec = elements / window
    return Rate(per_sec * examples_per_element, per_sec, elements, window, first, warm)


def measure_prefixes(
    pipeline: Pipeline,
    *,
    seconds: float,
    warmup: float,
    progress: Callable[[str], None] | None = None,
    profile_dir: str | None = None,
) -> list[StageRate]:
    """Times every prefix of `pipeline.stages` (the list build() applies), in order.

    The last prefix is the whole pipeline with its own options, which is the producer rate.
    With `profile_dir`, a TensorFlow profiler trace covers that last window.
    """
    points = prefix_points(pipeline.stages)
    out: list[StageRate] = []
    for k, (name, upto, added) in enumerate(points):
        if progress:
            progress(f"Timing prefix {k + 1}/{len(points)}: {name} ({', '.join(added)})")
        last = k + 1 == len(points)
        rate = measure(
            lambda upto=upto: pipeline.dataset(upto),
            examples_per_element=pipeline.examples_per_element(upto),
            seconds=seconds,
            warmup=warmup,
            on_window=_profiler(profile_dir) if (last and profile_dir) else None,
        )
        out.append(StageRate(name, added, upto, rate))
    return out


def measure_scaling(
    pipeline: Pipeline,
    cores: Sequence[int],
    *,
    seconds: float,
    warmup: float,
    known: dict[int, float] | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[ScalingPoint]:
    """The full pipeline with tf.data's private threadpool limited to each count in `cores`.

    Args:
      known: rates already measured for some core counts (e.g. the full pipeline at the
        default threadpool, which is all available cores); those are not measured again.
    """
    out: list[ScalingPoint] = []
    for c in cores:
        if known and c in known:
            out.append(ScalingPoint(c, known[c]))
            continue
        if progress:
            progress(f"Timing the full pipeline on {c} core{'s' if c > 1 else ''}")
        rate = measure(
            lambda c=c: pipeline.dataset(threadpool_size=c),
            examples_per_element=pipeline.examples_per_element(),
            seconds=seconds,
            warmup=warmup,
        )
        out.append(ScalingPoint(c, rate.examples_per_sec))
    return out


def _profiler(logdir: str) -> Callable[[bool], None]:
    def toggle(start: bool) -> None:
        from tfpipe._tf import tf

        if start:
            os.makedirs(logdir, exist_ok=True)
            tf().profiler.experimental.start(logdir)
        else:
            tf().profiler.experimental.stop()

    return toggle

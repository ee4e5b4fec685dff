"""Producer timing: steady-state throughput and CPU cost of the pipeline build() makes, prefix
by prefix.

The timed window starts after a warm-up, so AUTOTUNE has settled and buffers have filled; the
first element's latency is reported apart. Prefixes that end before the batch stage are
timed through a transport batch, so a fast prefix (reading records at tens of thousands per
second) is not capped by one Python call per record.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tfpipe import storage
from tfpipe._tf import Dataset, Nest, tf
from tfpipe.bench import wait
from tfpipe.bench.measure import host
from tfpipe.bench.results import HostLoad, Rate, ScalingPoint, StageRate
from tfpipe.errors import ConfigError, DataError, field_error

if TYPE_CHECKING:
    from tfpipe.pipeline import Pipeline
    from tfpipe.pipeline.stages.stage import Stage

# Pull elements in chunks lasting about this long, so the window ends within ~0.1 s of its
# length without checking the clock after every element.
CHUNK_SECONDS = 0.1
# The window's rate is also taken in pieces this long: their spread is the run's own
# uncertainty of the rate (see wait.rate_spread).
PIECE_SECONDS = 0.5


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity), not the machine's total."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def core_counts(max_cores: int) -> list[int]:
    """The scaling curve's points: 1, 2, 4, ... doubling, and always `max_cores` itself."""
    if max_cores < 1:
        raise field_error(ConfigError, "max_cores", "an integer >= 1", max_cores)
    counts, c = [], 1
    while c < max_cores:
        counts.append(c)
        c *= 2
    counts.append(max_cores)
    return counts


def prefix_points(stages: Sequence[Stage]) -> list[tuple[str, int, tuple[str, ...]]]:
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


# Unbatched prefixes are timed through a batch of this many elements, so the Python call per
# element (~100 us) does not cap a prefix that makes tens of thousands of records a second.
TRANSPORT_BATCH = 256


def transport(ds: Dataset) -> Dataset:
    """Batches single elements for timing: a plain batch when every shape is static, else a
    ragged batch (variable-size images, for example)."""
    tf_ = tf()
    static = all(
        getattr(spec, "shape", None) is not None and spec.shape.is_fully_defined()
        for spec in tf_.nest.flatten(ds.element_spec)
    )
    return ds.batch(TRANSPORT_BATCH) if static else ds.ragged_batch(TRANSPORT_BATCH)


def measure(
    make_dataset: Callable[[], Any],
    *,
    examples_per_element: float,
    seconds: float,
    warmup: float,
    on_window: Callable[[bool], None] | None = None,
) -> Rate:
    """Steady-state throughput of a dataset.

    Args:
      make_dataset: returns a fresh dataset (so every measurement starts cold the same way).
      examples_per_element: examples in one element (the batch size once batched; for a
        chunk of text documents, the sequences they pack into, a mean).
      seconds: length of the timed window.
      warmup: seconds run after the first element and before the window, excluded from it.
      on_window: called with True as the timed window starts and False as it ends, e.g. to
        start and stop the profiler over exactly that window.

    Returns:
      The Rate, with the first element's latency and the warm-up reported apart, the
      process's CPU time over the window as CPU ms per example and cores busy, and what else
      ran on its cores meanwhile.
    """
    ds = make_dataset()
    t0 = time.perf_counter()
    it = iter(ds)
    got = _pull(it, 1)
    first = time.perf_counter() - t0
    if got == 0:
        raise DataError(
            "The pipeline produced no elements: expected records in data (--data), "
            "split (--split). Received: an empty dataset"
        )
    chunk, exhausted, warm = _warm_up(it, warmup)
    if on_window:
        on_window(True)
    beside = host.sample()
    try:
        elements, window, cpu, pieces = _window(it, chunk, exhausted, seconds)
    finally:
        if on_window:
            on_window(False)
    load = host.since(beside)
    if elements == 0:
        raise DataError(
            f"The pipeline ran out during warm-up ({warm:.1f} s): expected a training pipeline "
            "that repeats its data. Received: a dataset that ended"
        )
    return _rate(elements, window, cpu, pieces, examples_per_element, first=first, warm=warm, load=load)


def _rate(
    elements: int,
    window: float,
    cpu: float,
    pieces: list[tuple[int, float]],
    examples_per_element: float,
    *,
    first: float,
    warm: float,
    load: HostLoad | None,
) -> Rate:
    """A window's Rate from what `_window` counted: elements, seconds, CPU seconds, pieces."""
    per_sec = elements / window
    rates = tuple(n * examples_per_element / sec for n, sec in pieces if sec > 0)
    return Rate(
        per_sec * examples_per_element,
        per_sec,
        elements,
        window,
        first,
        warm,
        cpu_ms_per_example=1000.0 * cpu / (elements * examples_per_element),
        cores_busy=cpu / window,
        spread=wait.spread_of(rates),
        pieces=rates,
        host=load,
    )


def pooled(windows: Sequence[Rate]) -> Rate:
    """Windows of the same pipeline as one rate: the examples of them all over their seconds,
    their CPU over their examples, the spread of all their pieces together (so a rate that
    moved between the windows widens it), and the first window's start-up figures."""
    if not windows:
        raise ValueError("pooled() needs at least one window")
    if len(windows) == 1:
        return windows[0]
    seconds = sum(w.window_sec for w in windows)
    examples = sum(w.examples_per_sec * w.window_sec for w in windows)
    cpu = sum(w.cores_busy * w.window_sec for w in windows)
    pieces = tuple(p for w in windows for p in w.pieces)
    first = windows[0]
    return Rate(
        examples / seconds,
        sum(w.elements for w in windows) / seconds,
        sum(w.elements for w in windows),
        seconds,
        first.first_element_sec,
        first.warmup_sec,
        cpu_ms_per_example=1000.0 * cpu / examples if examples else 0.0,
        cores_busy=cpu / seconds,
        spread=wait.spread_of(pieces),
        pieces=pieces,
        host=HostLoad.combined([w.host for w in windows]),
    )


def _warm_up(it: Iterator[Nest], warmup: float) -> tuple[int, bool, float]:
    """Pulls in chunks until `warmup` seconds have passed, learning the chunk size that takes
    about CHUNK_SECONDS (the first element, which may take seconds while shuffle buffers fill,
    is already out).

    Returns:
      (chunk size, whether the dataset ended, seconds spent).
    """
    t1 = time.perf_counter()
    chunk, exhausted = 1, False
    while time.perf_counter() - t1 < warmup and not exhausted:
        c0 = time.perf_counter()
        got = _pull(it, chunk)
        exhausted = got < chunk
        elapsed = time.perf_counter() - c0
        if elapsed < CHUNK_SECONDS / 2:
            chunk *= 2
        elif elapsed > CHUNK_SECONDS * 2 and chunk > 1:
            chunk = max(1, chunk // 2)
    return chunk, exhausted, time.perf_counter() - t1


def _window(
    it: Iterator[Nest], chunk: int, exhausted: bool, seconds: float
) -> tuple[int, float, float, list[tuple[int, float]]]:
    """The timed window: pulls chunks for `seconds` or until the dataset ends.

    Returns:
      (elements taken, seconds elapsed, CPU seconds the process spent meanwhile, and the
      window cut into pieces of at least PIECE_SECONDS: (elements, seconds) each).
    """
    c0, w0 = cpu_seconds(), time.perf_counter()
    elements = 0
    pieces: list[tuple[int, float]] = []
    p0, in_piece = w0, 0
    while not exhausted:
        got = _pull(it, chunk)
        elements += got
        in_piece += got
        exhausted = got < chunk
        now = time.perf_counter()
        if now - p0 >= PIECE_SECONDS:
            pieces.append((in_piece, now - p0))
            p0, in_piece = now, 0
        if now - w0 >= seconds:
            break
    return elements, time.perf_counter() - w0, cpu_seconds() - c0, pieces


def cpu_seconds() -> float:
    """User + system CPU seconds of this process so far, every thread (TensorFlow's) included:
    getrusage(RUSAGE_SELF)'s figure, on every platform."""
    return time.process_time()


def _pull(it: Iterator[Nest], n: int) -> int:
    """Takes up to n elements; returns how many there were."""
    for i in range(n):
        try:
            next(it)
        except StopIteration:
            return i
    return n


def measure_prefixes(
    pipeline: Pipeline,
    *,
    seconds: float,
    warmup: float,
    progress: Callable[[str], None] | None = None,
    profile_dir: str | None = None,
    units: Mapping[str, float] | None = None,
) -> list[StageRate]:
    """Times every prefix of `pipeline.stages` (the list build() applies), in order.

    The last prefix is the whole pipeline with its own options, which is the producer rate.
    With `profile_dir`, a TensorFlow profiler trace covers that last window. `units` gives the
    examples one element of a prefix holds, by prefix name, where the stages cannot say (a
    text prefix before packing yields chunks of documents: the sequences they pack into).
    """
    points = prefix_points(pipeline.stages)
    out: list[StageRate] = []
    for k, (name, upto, added) in enumerate(points):
        if progress:
            progress(f"Timing prefix {k + 1}/{len(points)}: {name} ({', '.join(added)})")
        last = k + 1 == len(points)
        rate = measure_prefix(
            pipeline,
            upto,
            seconds=seconds,
            warmup=warmup,
            on_window=_profiler(profile_dir) if (last and profile_dir) else None,
            examples_per_element=(units or {}).get(name),
        )
        out.append(StageRate(name, added, upto, rate))
    return out


def measure_prefix(
    pipeline: Pipeline,
    upto: int,
    *,
    seconds: float,
    warmup: float,
    on_window: Callable[[bool], None] | None = None,
    examples_per_element: float | None = None,
) -> Rate:
    """The steady-state rate of the first `upto` stages of `pipeline` (see `measure`).

    `examples_per_element`: examples one element holds when the stages cannot say (see
    `measure_prefixes`' units); such elements are timed one at a time, as they come.
    """
    if examples_per_element is not None:
        return measure(
            lambda: pipeline.dataset(upto),
            examples_per_element=examples_per_element,
            seconds=seconds,
            warmup=warmup,
            on_window=on_window,
        )
    per_element = pipeline.examples_per_element(upto)
    batched = per_element > 1 or any(s.group == "batch" for s in pipeline.stages[:upto])
    return measure(
        (lambda: pipeline.dataset(upto)) if batched else (lambda: transport(pipeline.dataset(upto))),
        examples_per_element=per_element if batched else TRANSPORT_BATCH,
        seconds=seconds,
        warmup=warmup,
        on_window=on_window,
    )


def measure_scaling(
    pipeline: Pipeline,
    cores: Sequence[int],
    *,
    seconds: float,
    warmup: float,
    known: dict[int, Rate] | None = None,
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
            out.append(ScalingPoint.of(c, known[c]))
            continue
        if progress:
            progress(f"Timing the full pipeline on {c} core{'s' if c > 1 else ''}")
        rate = measure(
            lambda c=c: pipeline.dataset(threadpool_size=c),
            examples_per_element=pipeline.examples_per_element(),
            seconds=seconds,
            warmup=warmup,
        )
        out.append(ScalingPoint.of(c, rate))
    return out


def _profiler(logdir: str) -> Callable[[bool], None]:
    def toggle(start: bool) -> None:
        if start:
            if not storage.is_gcs(logdir) and not os.path.isdir(logdir):
                os.mkdir(logdir)  # its parent was checked up front; tfpipe makes no parents
            tf().profiler.experimental.start(logdir)
        else:
            tf().profiler.experimental.stop()

    return toggle

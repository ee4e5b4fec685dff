"""`tfpipe.bench()`: plan the pipeline, time it, find the consumer, and conclude.

The order matters for honest numbers: every measurement runs alone (the host's cores are the
producer's), prefixes first, then the scaling curve and the storage, then the whole pipeline
again (the producer's second window), then the optional comparison and ground truth runs,
each with its own warm-up. The producer's rate pools its two windows, tens of seconds apart,
so a rate that moves between them (the host's load, the process's state) widens the verdict's
interval instead of passing for steady (issue 41).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import platform
import re
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from tfpipe._tf import tf
from tfpipe.bench import profiles, results
from tfpipe.bench.config import BenchConfig
from tfpipe.bench.judge.conclusion import conclude
from tfpipe.bench.judge.report import Report
from tfpipe.bench.measure import data, host, producer, reading
from tfpipe.bench.measure.simulate import fit_check, simulate
from tfpipe.bench.present import output
from tfpipe.errors import DataError
from tfpipe.pipeline import Hosts, Tuning, plan
from tfpipe.storage import is_gcs

if TYPE_CHECKING:
    from tfpipe.bench.measure.models import Device
    from tfpipe.bench.profiles import Profile
    from tfpipe.pipeline import Pipeline

# Called with a short description as each phase of a bench starts.
StatusCallback = Callable[[str], None]


def bench(
    config: BenchConfig | None = None, /, *, progress: StatusCallback | None = None, **options: Any
) -> Report:
    """Measures whether training on this pipeline would wait for input.

    Args:
      config: a BenchConfig; or pass its fields as keywords (they override `config`'s).
      progress: called with a short description as each phase starts. Nothing is printed.
      **options: BenchConfig fields, e.g. `pipeline="tabular"`, `step_time_ms=120`.

    Returns:
      The Report: producer and consumer rates, verdict, bottleneck, cores needed and advice.

    Raises:
      ConfigError: an option is invalid, or the batch is larger than the data.
      DataError: `data` does not exist, is raw data (a table, an image folder), or holds no
        such split; or `from_profile` cannot give a training step time (ProfileError: no
        profile there, corrupt, CPU-only, no training steps). All are raised before anything
        is timed; and data that breaks while it is timed (a corrupt shard), in the words
        build()'s pipeline says it in (the shard, and the way out).
      MissingExtraError: `from_profile` needs xprof (`pip install "tfpipe[profile]"`).

    Example:
      >>> report = tfpipe.bench(pipeline="imagenet", step_time_ms=80, batch_size=256)
      >>> report.verdict, report.predicted_input_wait
    """
    cfg = dataclasses.replace(config, **options) if config is not None else BenchConfig(**options)
    return _measure_and_conclude(cfg, progress or (lambda _msg: None), started=time.monotonic())


def _measure_and_conclude(cfg: BenchConfig, say: StatusCallback, *, started: float) -> Report:
    """Every measurement, in the order that keeps them honest (see the module doc), then the
    conclusion from them."""
    if cfg.profile:
        output.check_folder(cfg.profile, "profile (--profile)")
    cfg, profile = _read_profile(cfg, say)
    source = data.resolve(cfg, say)
    pipe = _plan(cfg, source, say)
    with _data_errors(source.info.path):
        return _measured(cfg, say, started, source, pipe, profile)


@contextlib.contextmanager
def _data_errors(where: str) -> Iterator[None]:
    """A TensorFlow error out of the pipeline while it is timed (a corrupt shard, a record that
    does not parse) as a DataError in its own words: what build() says of it, where it names
    the shard and the way out, and not a traceback."""
    try:
        yield
    except tf().errors.OpError as e:
        text = " ".join(str(e.message).split())
        said = re.search(r"assertion failed: \[(.*?)\](?: \[\[|$)", text)
        detail = said.group(1) if said else text[:500]
        raise DataError(
            f"{where}: the pipeline stopped while bench read it ({type(e).__name__}): {detail}"
        ) from None


def _measured(
    cfg: BenchConfig,
    say: StatusCallback,
    started: float,
    source: data.BenchData,
    pipe: Pipeline,
    profile: Profile | None,
) -> Report:
    """The measurements of a planned pipeline, and the conclusion from them."""
    # The consumer's measures (models, devices) load when a bench runs, not on `import tfpipe`.
    from tfpipe.bench.measure.consumer import resolve as resolve_consumer
    from tfpipe.bench.measure.models import outputs_for

    manifest = source.manifest
    num_classes = outputs_for(pipe) if cfg.model else 0
    load_start = host.load_average()
    measured = measure_producer(pipe, cfg, source, say)
    text, stages, scaling = measured.text, measured.stages, measured.scaling
    full = producer.pooled(measured.windows)

    say("Finding the consumer's rate")
    consumer, device = resolve_consumer(cfg, pipe, num_classes=num_classes, profile=profile)
    comparison = None
    if cfg.compare and cfg.modality.bench.baseline is not None:  # its baseline pipeline
        comparison = cfg.modality.bench.baseline(
            pipe, manifest, source.split, cfg, full.examples_per_sec, say
        )
    sim, fit = _ground_truth(pipe, cfg, consumer, device, num_classes, say)
    return conclude(
        pipeline=cfg.modality.preset.name,
        dataset=source.info,
        batch_size=cfg.global_batch,
        hosts=cfg.hosts,
        producer=full,
        consumer=consumer,
        stages=stages,
        scaling=scaling,
        worker_cores=cfg.worker_cores,
        simulation=sim,
        fit=fit,
        comparison=comparison,
        profile_dir=cfg.profile,
        environment=_environment(cfg, device),
        elapsed_sec=time.monotonic() - started,
        profile=profile,
        storage=_storage(pipe, source, measured.read, measured.first_epoch, consumer, cfg, text),
        text=text,
        windows=measured.windows,
        timed=_timed(measured),
        load_average=(load_start, host.load_average()),
    )


def _timed(measured: results.ProducerMeasurement) -> tuple[results.Rate, ...]:
    """Every timed window of a producer measurement but the producer's own."""
    uncached = (measured.read,) + ((measured.first_epoch,) if measured.first_epoch is not None else ())
    return tuple(s.rate for s in measured.stages[:-1]) + uncached


def measure_producer(
    pipe: Pipeline, cfg: BenchConfig, source: data.BenchData, say: StatusCallback
) -> results.ProducerMeasurement:
    """Every measurement of the producer a bench makes, in order: what the pipeline's modality
    measures first (`BenchHalf.measure`: a text pipeline's counts), the stage prefixes, the
    scaling curve, the storage (the read prefix uncached; the first epoch when the pipeline
    caches), then the whole pipeline again: the producer's second window, as far from its first
    as the bench allows.

    What it returns depends on the plan and the measuring fields of `cfg` only, never on the
    consumer. It is one function so that tests which check what a report says about a consumer
    can hand bench an earlier run's real measurement of the same plan (tests/support/bench_once.py).
    """
    text = cfg.modality.bench.measure(pipe, cfg, say)
    stages, scaling = _time_producer(pipe, cfg, say, text)
    read, first_epoch = _time_storage(pipe, stages, cfg, source, say, text)
    say("Timing the whole pipeline again: the producer's second window")
    again = producer.measure_prefix(pipe, stages[-1].upto, seconds=cfg.seconds, warmup=cfg.warmup)
    # The curve's point at build()'s own threadpool is the producer's rate: both windows.
    rate = producer.pooled((stages[-1].rate, again))
    own = _own_pool(pipe)
    scaling = tuple(results.ScalingPoint.of(p.cores, rate) if p.cores == own else p for p in scaling)
    return results.ProducerMeasurement(text, stages, scaling, read, first_epoch, again)


def _own_pool(pipe: Pipeline) -> int:
    """The threads of build()'s own threadpool: a private pool's, or tf.data's default (one
    thread per available core)."""
    return getattr(pipe.config, "private_threadpool_size", 0) or producer.available_cores()


def _read_profile(cfg: BenchConfig, say: StatusCallback) -> tuple[BenchConfig, Profile | None]:
    """The profile `from_profile` names, read first (a profile that cannot give a step time
    should cost seconds, not a bench), and `cfg` with the profiled run's batch."""
    if cfg.from_profile is None:
        return cfg, None
    # The consumer's modules (~20 ms) on first use: `import tfpipe` imports this one.
    from tfpipe.bench.measure.consumer import config_for_profile

    say(f"Reading the profile {cfg.from_profile}")
    profile = profiles.read(cfg.from_profile, cfg.profile_run)
    return config_for_profile(cfg, profile), profile


def _plan(
    cfg: BenchConfig, source: data.BenchData, say: StatusCallback, *, cache: str | None = None
) -> Pipeline:
    """The pipeline build() would make for this host, from the data `source` names (with
    `cache` in place of the config's, when given)."""
    if cache is None:
        say(f"Planning the {cfg.pipeline} pipeline")
    rows = cfg.modality.bench.plan_options(cfg)  # text: sequence_length, packing, truncate
    # One input pipeline per host (the first host's share), as each host of a job reads.
    hosts = Hosts(num_hosts=cfg.hosts, host_index=0) if cfg.hosts > 1 else None
    if source.sources is not None:  # a mixture, weighted as build() weighs it
        rows["weights"] = cfg.weights
    return plan(
        source.planned,
        preset=cfg.pipeline,
        batch_size=cfg.global_batch,
        training=True,
        split=source.split,
        hosts=hosts,
        tuning=Tuning(cache=cfg.cache if cache is None else cache),
        **rows,
    )


def _time_storage(
    pipe: Pipeline,
    stages: tuple[results.StageRate, ...],
    cfg: BenchConfig,
    source: data.BenchData,
    say: StatusCallback,
    text: results.TextMeasure | None = None,
) -> tuple[results.Rate, results.Rate | None]:
    """The read prefix without a cache (what the storage gives), and when the pipeline caches,
    the whole pipeline without it (the first epoch, which fills the cache from storage).

    Returns:
      (the uncached read prefix's Rate, the first epoch's Rate or None).
    """
    read_name = producer.prefix_points(pipe.stages)[0][0]
    if pipe.cache == "none":
        return stages[0].rate, None
    uncached = _plan(cfg, source, say, cache="none")
    upto = next(upto for name, upto, _ in producer.prefix_points(uncached.stages) if name == read_name)
    say(f"Timing the {read_name} prefix without the {pipe.cache} cache: what the storage gives")
    read = producer.measure_prefix(
        uncached,
        upto,
        seconds=cfg.seconds,
        warmup=cfg.warmup,
        examples_per_element=(cfg.modality.bench.units(text) or {}).get(read_name),
    )
    say("Timing the whole pipeline without its cache: the first epoch")
    first = producer.measure(
        uncached.dataset,
        examples_per_element=uncached.examples_per_element(),
        seconds=cfg.seconds,
        warmup=cfg.warmup,
    )
    return read, first


def _storage(
    pipe: Pipeline,
    source: data.BenchData,
    read: results.Rate,
    first_epoch: results.Rate | None,
    consumer: results.Consumer,
    cfg: BenchConfig,
    text: Any = None,
) -> results.Storage:
    """The storage figures from the uncached reads `_time_storage` timed, the records counted
    in the report's unit, as the read was timed (`BenchHalf.storage_examples`: text's sequences
    they pack into)."""
    examples = pipe.examples
    if examples is not None:
        examples = cfg.modality.bench.storage_examples(examples, text)
    return reading.figures(
        location="gcs" if is_gcs(source.root) else "local",
        cache=pipe.cache,
        read=read,
        sizes=_sizes(pipe),
        examples=examples,
        consumer_eps=consumer.examples_per_sec,
        first_epoch=first_epoch,
    )


def _sizes(pipe: Pipeline) -> list[int]:
    """Bytes of each file the pipeline reads."""
    size_of = dict(zip(pipe.source.files, pipe.source.sizes, strict=True))
    return [size_of[f] for f in pipe.files]


def _time_producer(
    pipe: Pipeline, cfg: BenchConfig, say: StatusCallback, text: results.TextMeasure | None = None
) -> tuple[tuple[results.StageRate, ...], tuple[results.ScalingPoint, ...]]:
    """Every stage prefix, then the full pipeline on 1..N cores."""
    stages = tuple(
        producer.measure_prefixes(
            pipe,
            seconds=cfg.seconds,
            warmup=cfg.warmup,
            progress=say,
            profile_dir=cfg.profile,
            units=cfg.modality.bench.units(text),
        )
    )
    max_cores = cfg.max_cores or producer.available_cores()
    # The full prefix already ran with build()'s own threadpool: its size (a private pool's, or
    # tf.data's default, one thread per available core) is a point of the curve, and that point
    # is the producer's rate itself (its two windows, once the second is taken), never a third
    # window that a report could not reconcile with the rate.
    known = {_own_pool(pipe): stages[-1].rate}
    scaling = tuple(
        producer.measure_scaling(
            pipe,
            producer.core_counts(max_cores),
            seconds=cfg.seconds,
            warmup=cfg.warmup,
            known=known,
            progress=say,
        )
    )
    return stages, scaling


def _ground_truth(
    pipe: Pipeline,
    cfg: BenchConfig,
    consumer: results.Consumer,
    device: Device | None,
    num_classes: int,
    say: StatusCallback,
) -> tuple[results.Simulation | None, results.FitCheck | None]:
    """The optional checks of the prediction: --simulate and --fit."""
    sim = fit = None
    if cfg.simulate:
        say(f"Simulating a consumer that holds each batch {consumer.step_time_ms:.1f} ms")
        beside = host.sample()
        sim = simulate(pipe, step_time_ms=consumer.step_time_ms, seconds=cfg.seconds, warmup=cfg.warmup)
        sim = dataclasses.replace(sim, host=host.since(beside))
    if cfg.fit:
        say(f"Running model.fit of {cfg.model} on the pipeline and on synthetic input")
        fit = fit_check(
            pipe,
            cfg.model or "",
            num_classes=num_classes,
            seconds=cfg.seconds,
            warmup=cfg.warmup,
            device=device,
        )
    return sim, fit


def _environment(cfg: BenchConfig, device: Device | None) -> dict[str, Any]:
    return {
        "tensorflow": tf().__version__,
        **keras_environment(),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "available_cores": producer.available_cores(),
        "device": device.name if device is not None else None,
        "seconds": cfg.seconds,
        "warmup_seconds": cfg.warmup,
    }


def keras_environment() -> dict[str, Any]:
    """The Keras backend a model would run on (`--model`, `--fit`), and the Keras and JAX
    releases (None when not installed): a JAX report says so."""
    from importlib import metadata

    import keras

    def version(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    return {"keras_backend": keras.backend.backend(), "keras": keras.__version__, "jax": version("jax")}

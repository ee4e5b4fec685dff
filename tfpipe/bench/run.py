"""`tfpipe.bench()`: plan the pipeline, time it, find the consumer, and conclude.

The order matters for honest numbers: every measurement runs alone (the host's cores are the
producer's), prefixes first, then the scaling curve, then the optional comparison and ground
truth runs, each with its own warm-up.
"""

from __future__ import annotations

import dataclasses
import math
import os
import platform
import time
from collections.abc import Callable
from typing import Any

from tfpipe import storage
from tfpipe.bench import producer, synthetic
from tfpipe.bench.config import BenchConfig
from tfpipe.bench.report import Comparison, DatasetInfo, Report, conclude
from tfpipe.errors import DataError
from tfpipe.manifest import MANIFEST_NAME, Manifest

Progress = Callable[[str], None]


def bench(config: BenchConfig | None = None, /, *, progress: Progress | None = None, **options: Any) -> Report:
    """Measures whether training on this pipeline would wait for input.

    Args:
      config: a BenchConfig; or pass its fields as keywords (they override `config`'s).
      progress: called with a short description as each phase starts. Nothing is printed.
      **options: BenchConfig fields, e.g. `pipeline="tabular"`, `step_time_ms=120`.

    Returns:
      The Report: producer and consumer rates, verdict, bottleneck, cores needed and advice.

    Raises:
      ConfigError: an option is invalid. DataError: `data` does not exist or holds no split.

    Example:
      >>> report = tfpipe.bench(pipeline="imagenet", step_time_ms=80, batch_size=256)
      >>> report.verdict, report.predicted_input_wait
    """
    cfg = dataclasses.replace(config, **options) if config is not None else BenchConfig(**options)
    say = progress or (lambda _msg: None)
    started = time.monotonic()

    dataset, data_root = _dataset(cfg, say)

    from tfpipe._tf import tf
    from tfpipe.bench import consumer as consumers
    from tfpipe.pipeline import plan

    tf_ = tf()
    say(f"Planning the {cfg.pipeline} pipeline")
    context = None
    if cfg.hosts > 1:
        # One input pipeline per host, as strategy.distribute_datasets_from_function gives each.
        context = tf_.distribute.InputContext(
            num_input_pipelines=cfg.hosts, input_pipeline_id=0, num_replicas_in_sync=cfg.hosts
        )
    pipe = plan(
        data_root, preset=cfg.pipeline, batch_size=cfg.global_batch, training=True, input_context=context,
        split=cfg.split,
    )
    manifest = _manifest(data_root)
    num_classes = consumers.num_classes_for(manifest.class_names if manifest else (), 0)

    stages = tuple(
        producer.measure_prefixes(
            pipe, seconds=cfg.seconds, warmup=cfg.warmup, progress=say, profile_dir=cfg.profile
        )
    )
    full = stages[-1].rate

    max_cores = cfg.max_cores or producer.available_cores()
    known = {}
    own_pool = getattr(pipe.config, "private_threadpool_size", 0)
    if own_pool:
        known[own_pool] = full.examples_per_sec  # the full prefix already ran with that pool
    scaling = tuple(
        producer.measure_scaling(
            pipe, producer.core_counts(max_cores), seconds=cfg.seconds, warmup=cfg.warmup, known=known, progress=say
        )
    )

    say("Finding the consumer's rate")
    consumer, device = consumers.resolve(cfg, pipe, num_classes=num_classes)

    comparison = None
    if cfg.compare:
        comparison = _compare(pipe, manifest, cfg, full.examples_per_sec, say)

    from tfpipe.bench.simulate import fit_check, simulate

    sim = fit = None
    if cfg.simulate:
        say(f"Simulating a consumer that holds each batch {consumer.step_time_ms:.1f} ms")
        sim = simulate(pipe, step_time_ms=consumer.step_time_ms, seconds=cfg.seconds, warmup=cfg.warmup)
    if cfg.fit:
        say(f"Running model.fit of {cfg.model} on the pipeline and on synthetic input")
        fit = fit_check(
            pipe, cfg.model or "", num_classes=num_classes, seconds=cfg.seconds, warmup=cfg.warmup, device=device
        )

    return conclude(
        pipeline=cfg.pipeline,
        dataset=dataset,
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
        environment={
            "tensorflow": tf_.__version__,
            "python": platform.python_version(),
            "machine": platform.machine(),
            "cpu_count": os.cpu_count(),
            "available_cores": producer.available_cores(),
            "device": device.name if device is not None else None,
            "seconds": cfg.seconds,
            "warmup_seconds": cfg.warmup,
        },
        elapsed_sec=time.monotonic() - started,
    )


def _dataset(cfg: BenchConfig, say: Progress) -> tuple[DatasetInfo, str]:
    """The data to read: `cfg.data` checked to exist, or the cached synthetic dataset."""
    if cfg.data is None:
        spec = synthetic.SyntheticSpec.default(cfg.pipeline, cfg.synthetic_examples)
        manifest, seconds = synthetic.ensure_dataset(spec, cfg.workdir, say)
        return _info(manifest, cfg.split, synthetic=True, generated=seconds), manifest.root
    path = cfg.data.rstrip("/") if not cfg.data.endswith("://") else cfg.data
    manifest = _manifest(path)
    if manifest is None:
        # No manifest: shards or a glob of them are fine too (plan() resolves those).
        if not (storage.exists(path) or storage.glob(path) or storage.listdir(path)):
            raise DataError(
                f"--data {cfg.data} does not exist. Expected a tfpipe dataset directory (with "
                f"{MANIFEST_NAME}), local or gs://, or a glob of TFRecord shards. Convert raw data "
                "with `tfpipe convert SRC DEST`, or leave out --data to bench a generated dataset."
            )
        return DatasetInfo(path, 0, len(storage.glob(path)), 0, False), path
    if cfg.split not in manifest.splits:
        raise DataError(
            f"{storage.join(path, MANIFEST_NAME)} has no split {cfg.split!r}; it has "
            f"{sorted(manifest.splits)}. Pass --split."
        )
    return _info(manifest, cfg.split, synthetic=False, generated=0.0), path


def _manifest(path: str) -> Manifest | None:
    """The manifest at `path`, or None when `path` holds none (shards, or a glob of them)."""
    if storage.exists(storage.join(path, MANIFEST_NAME)):
        return Manifest.load(path)
    return None


def _info(manifest: Manifest, split: str, *, synthetic: bool, generated: float) -> DatasetInfo:
    s = manifest.split(split)
    return DatasetInfo(manifest.root, s.examples, len(s.shards), s.bytes, synthetic, generated)


def _compare(pipe: Any, manifest: Manifest | None, cfg: BenchConfig, tfpipe_eps: float, say: Progress) -> Comparison:
    """The seeds' recipe on the same files, measured exactly like the full pipeline.

    The recipe has no repeat(), and a repeat() after its prefetch would restart it cold every
    epoch, which small data turns into most of the time. Its file list is repeated instead, so
    one epoch outlasts the warm-up and the window, as training on full ImageNet would.
    """
    from tfpipe.bench.recipe import recipe_dataset

    say("Timing the seeds' recipe on the same data (--compare)")
    files = list(pipe.files)
    compression = manifest.tf_compression if manifest is not None else ""
    size = int(pipe.dataset().element_spec[0].shape[1])
    examples = manifest.split(cfg.split).examples if manifest is not None else 0
    needed = 2 * tfpipe_eps * (cfg.warmup + cfg.seconds + 10)
    reps = max(1, math.ceil(needed / examples)) if examples else 1
    rate = producer.measure(
        lambda: recipe_dataset(files * reps, batch_size=pipe.batch_size, image_size=size, compression=compression).repeat(),
        examples_per_element=pipe.batch_size,
        seconds=cfg.seconds,
        warmup=cfg.warmup,
    )
    return Comparison(tfpipe_eps, rate.examples_per_sec)

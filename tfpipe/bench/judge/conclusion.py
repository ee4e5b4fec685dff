"""The conclusion: measurements in, a Report out, every figure computed here once.

The verdict's arithmetic (`verdict`, `wait`) gives the figures, `advice` words them, and the
Report stores them all, so nothing downstream (the JSON, the table, the plot) computes one
again. Pure: no clocks and no TensorFlow, so a Report can be built from given numbers.
"""

from __future__ import annotations

from typing import Any

from tfpipe.bench import results, wait
from tfpipe.bench.judge import advice, host, verdict
from tfpipe.bench.judge.report import Report
from tfpipe.bench.profiles.analysis import Profile
from tfpipe.modalities import modality_of_preset
from tfpipe.storage import is_gcs


def conclude(
    *,
    pipeline: str,
    dataset: results.DatasetInfo,
    batch_size: int,
    hosts: int,
    producer: results.Rate,
    consumer: results.Consumer,
    stages: tuple[results.StageRate, ...],
    scaling: tuple[results.ScalingPoint, ...],
    worker_cores: int | None = None,
    simulation: results.Simulation | None = None,
    fit: results.FitCheck | None = None,
    comparison: results.Comparison | None = None,
    profile_dir: str | None = None,
    environment: dict[str, Any] | None = None,
    elapsed_sec: float = 0.0,
    profile: Profile | None = None,
    storage: results.Storage | None = None,
    text: object = None,
    windows: tuple[results.Rate, ...] = (),
    timed: tuple[results.Rate, ...] = (),
    load_average: tuple[float | None, float | None] = (None, None),
) -> Report:
    """Turns measurements into a Report: verdict, bottleneck, cores, workers and advice, and the
    section of the pipeline's modality (`BenchHalf.figures`: for text, the figures in tokens),
    from what it measured first (`text`). `producer` is the producer's rate, `windows` the
    whole pipeline's windows it pools; `timed` and `load_average` are for the host's load
    (`_host`).

    Long: its keyword arguments are every measurement a report holds, one a line.
    """
    figures = modality_of_preset(pipeline).bench.figures(text, producer, consumer, stages, scaling, storage)
    load = _host(producer, windows, timed, simulation, load_average)
    return Report(
        pipeline=pipeline,
        dataset=dataset,
        batch_size=batch_size,
        hosts=hosts,
        producer=producer,
        consumer=consumer,
        stages=stages,
        scaling=scaling,
        simulation=simulation,
        fit=fit,
        comparison=comparison,
        profile_dir=profile_dir,
        environment=dict(environment or {}),
        elapsed_sec=elapsed_sec,
        profile=profile,
        storage=storage,
        text=figures,
        host=load,
        windows=windows,
        predicted_input_wait_interval=_interval(producer, windows, consumer, load.busy),
        **_figures(
            pipeline,
            dataset,
            hosts,
            producer,
            consumer,
            stages,
            scaling,
            worker_cores,
            profile,
            storage,
            figures,
        ),
    )


def _host(
    producer: results.Rate,
    windows: tuple[results.Rate, ...],
    timed: tuple[results.Rate, ...],
    simulation: results.Simulation | None,
    load_average: tuple[float | None, float | None],
) -> host.HostFigures:
    """The host's load beside the producer's windows (none: `producer`'s own), over the bench's
    other timed windows (`timed`) and the simulation, and its 1-minute load average as the bench
    started and ended."""
    return host.figures(
        [w.host for w in windows or (producer,)],
        run=[r.host for r in timed],
        simulation=None if simulation is None else simulation.host,
        load_average=load_average,
    )


def _interval(
    producer: results.Rate, windows: tuple[results.Rate, ...], consumer: results.Consumer, busy: str
) -> wait.WaitInterval | None:
    """The predicted wait's interval: from the slowest window's rate to the fastest's, each
    widened by the pieces' spread; None when neither a spread nor a second window nor a busy
    host gives one."""
    rates = [w.examples_per_sec for w in windows] or [producer.examples_per_sec]
    spread = producer.spread
    if spread is None and len(rates) < 2 and not busy:
        return None
    return wait.wait_interval(rates, consumer.examples_per_sec, spread or 0.0, busy=busy)


def _bottleneck(stages: tuple[results.StageRate, ...], storage_bound: bool) -> verdict.Bottleneck:
    """The read stage when the storage cannot feed the consumer; else the costliest stage, by
    time per example, or by CPU per example where throughput disagrees."""
    rates = [(s.name, s.rate.examples_per_sec) for s in stages]
    if storage_bound and stages:
        return verdict.stage_cost(rates, stages[0].name)
    return verdict.bottleneck(rates, [s.rate.cpu_ms_per_example for s in stages])


def _figures(
    pipeline: str,
    dataset: results.DatasetInfo,
    hosts: int,
    producer: results.Rate,
    consumer: results.Consumer,
    stages: tuple[results.StageRate, ...],
    scaling: tuple[results.ScalingPoint, ...],
    worker_cores: int | None,
    profile: Profile | None = None,
    storage: results.Storage | None = None,
    text: object = None,
) -> dict[str, Any]:
    """The Report fields concluded from the measurements: verdict, bottleneck, cores, advice.
    When reading alone, uncached as every epoch reads, cannot feed the consumer, no CPU helps:
    the bottleneck is the read stage, named as the storage."""
    need = consumer.examples_per_sec
    predicted = wait.predicted_wait(producer.examples_per_sec, need)
    band = wait.band(predicted)
    storage_bound = verdict.storage_bound(storage, need)
    neck = _bottleneck(stages, storage_bound)
    curve = [(p.cores, p.examples_per_sec) for p in scaling]
    cores = verdict.cores_needed(need, curve)
    most = max(scaling, key=lambda p: p.cores)
    cpu_cores = verdict.cores_from_cpu(
        need, producer.cpu_ms_per_example, curve=cores, cores_busy=most.cores_busy
    )
    service = verdict.service_workers(need, hosts, worker_cores or cores.available, curve)
    first = None if storage is None else storage.first_epoch_examples_per_sec
    first_wait = None if first is None else wait.predicted_wait(first, need)
    recommendations = advice.recommend(
        verdict=band,
        wait=predicted,
        producer_eps=producer.examples_per_sec,
        consumer_eps=need,
        bottleneck=neck,
        cores=cores,
        service=service,
        data_on_gcs=is_gcs(dataset.path),
        preset=pipeline,
        profiled_wait=None if profile is None else profile.input_wait,
        storage=storage,
        storage_bound=storage_bound,
        first_epoch_wait=first_wait,
        text=text,
    )
    return {
        "predicted_input_wait": predicted,
        "verdict": band,
        "bottleneck": neck,
        "cores": cores,
        "cpu_cores": cpu_cores,
        "service": service,
        "recommendations": recommendations,
        "first_epoch_predicted_input_wait": first_wait,
    }

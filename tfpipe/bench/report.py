"""The Report `tfpipe.bench()` returns, and its versioned JSON form.

The JSON schema is `report.schema.json` beside this module (JSON Schema 2020-12, every field
described). These top-level keys are a contract and keep their meaning across versions:
`verdict`, `predicted_input_wait`, `measured_input_wait`, `batch_size`,
`producer.examples_per_sec`, `consumer.examples_per_sec`, `consumer.source`,
`bottleneck.stage`, `stages[].name`, `stages[].examples_per_sec`, `scaling[].cores`,
`scaling[].examples_per_sec`, `recommendations`, (from version 3) `profile.input_wait`,
`profile.step_time_ms` and (from version 4) `storage.mb_per_sec`, `storage.requests_per_sec`.
A change that breaks one raises `SCHEMA_VERSION`.
"""

from __future__ import annotations

import dataclasses
import json
from importlib import resources
from typing import Any, Literal

from tfpipe._version import __version__
from tfpipe.bench.profiles.analysis import Profile
from tfpipe.bench.reading import Storage
from tfpipe.bench.verdict import (
    Band,
    Bottleneck,
    CoresEstimate,
    CpuCoresEstimate,
    Recommendation,
    ServiceEstimate,
)
from tfpipe.storage import is_gcs

SCHEMA = "tfpipe.bench.report"
# 2: CPU cost per example and cores busy for the producer, each prefix and scaling point, and
# cores_needed_from_cpu; compare.recipe_examples_per_sec became baseline_examples_per_sec.
# 3: `profile` (the Profiler's figures of the user's run, --from-profile) and consumer.source
# "profile".
# 4: `storage` (the uncached read: examples/s, MB/s, requests/s, the first epoch) and the
# "storage_bound" and "first_epoch_input_bound" recommendations.
SCHEMA_VERSION = 4

ConsumerSource = Literal["step_time", "model", "reference", "profile"]


@dataclasses.dataclass(frozen=True, slots=True)
class Rate:
    """A steady-state throughput measurement, with its CPU cost.

    CPU time is the process's own (user + system, every TensorFlow thread included) over the
    window. It barely moves when a neighbour takes cores, while throughput does, so it tells
    what the work costs on a shared host.

    Attributes:
      examples_per_sec: examples per second over the timed window.
      elements_per_sec: dataset elements (batches once batched) per second.
      elements: elements taken in the window.
      window_sec: length of the timed window.
      first_element_sec: from creating the iterator to the first element (reported apart).
      warmup_sec: time run after the first element and before the window, excluded from it.
      cpu_ms_per_example: CPU milliseconds spent in the window per example taken.
      cores_busy: CPU seconds over wall seconds in the window: how many cores the work kept
        busy on average.
    """

    examples_per_sec: float
    elements_per_sec: float
    elements: int
    window_sec: float
    first_element_sec: float
    warmup_sec: float
    cpu_ms_per_example: float
    cores_busy: float


@dataclasses.dataclass(frozen=True, slots=True)
class StageRate:
    """Throughput of one prefix of the pipeline's stage list.

    Attributes:
      name: the group the prefix ends with: read, parse, decode, batch or final.
      stages: names of the stages this prefix adds to the previous one.
      upto: how many stages of the list the prefix applies.
      rate: the measurement.
    """

    name: str
    stages: tuple[str, ...]
    upto: int
    rate: Rate


@dataclasses.dataclass(frozen=True, slots=True)
class ScalingPoint:
    """The full pipeline with its private threadpool limited to `cores` threads.

    Attributes:
      cores: threads in tf.data's private threadpool.
      examples_per_sec: steady-state throughput.
      cpu_ms_per_example: CPU milliseconds per example (see `Rate`).
      cores_busy: cores kept busy on average; may exceed `cores`, since work outside the
        threadpool (the loop taking elements, TensorFlow's runtime threads) counts too.
    """

    cores: int
    examples_per_sec: float
    cpu_ms_per_example: float
    cores_busy: float

    @classmethod
    def of(cls, cores: int, rate: Rate) -> ScalingPoint:
        return cls(cores, rate.examples_per_sec, rate.cpu_ms_per_example, rate.cores_busy)


@dataclasses.dataclass(frozen=True, slots=True)
class Consumer:
    """How fast the accelerator takes examples, per host.

    Attributes:
      examples_per_sec: examples one host's accelerator(s) consume per second.
      step_time_ms: time of one step on one host's batch.
      source: "step_time" (given by the user), "model" (timed here), "reference" (published)
        or "profile" (the user's profiled run, less its input wait).
      description: what the number is, in words.
      device: the device a model was timed on, if any.
      url: the source of a reference number, if any.
      approximate: True for published reference numbers.
    """

    examples_per_sec: float
    step_time_ms: float
    source: ConsumerSource
    description: str
    device: str = ""
    url: str = ""
    approximate: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class Simulation:
    """The pipeline run against a consumer that holds each batch for the step time, sleeping.

    Attributes:
      step_time_ms: how long the consumer held each batch.
      steps: steps in the timed window.
      window_sec: total length of the consumer phases timed (after warm-up).
      wait_sec: time spent waiting for the next batch within the window.
      producer_examples_per_sec: the full pipeline's rate in producer phases alternated with
        the consumer phases on the same iterator.
      predicted_input_wait: the prediction from that rate and the step time.
      measured_input_wait: wait_sec / window_sec.
    """

    step_time_ms: float
    steps: int
    window_sec: float
    wait_sec: float
    producer_examples_per_sec: float
    predicted_input_wait: float
    measured_input_wait: float


@dataclasses.dataclass(frozen=True, slots=True)
class FitCheck:
    """`model.fit` on the real pipeline against the same model on on-device synthetic input.

    Attributes:
      model: the Keras model name.
      device: where it trained.
      steps: timed steps per run (after warm-up steps).
      real_step_ms: mean step time with the real pipeline.
      synthetic_step_ms: mean step time with synthetic input already on the device.
      measured_input_wait: max(0, 1 - synthetic / real).
    """

    model: str
    device: str
    steps: int
    real_step_ms: float
    synthetic_step_ms: float
    measured_input_wait: float


@dataclasses.dataclass(frozen=True, slots=True)
class Comparison:
    """The baseline pipeline (tensorflow/tpu-style, see `tfpipe.bench.recipe`) and tfpipe's, on
    the same data, measured the same way."""

    tfpipe_examples_per_sec: float
    baseline_examples_per_sec: float

    @property
    def ratio(self) -> float:
        return self.tfpipe_examples_per_sec / self.baseline_examples_per_sec

    @property
    def recipe_examples_per_sec(self) -> float:
        """Deprecated alias of `baseline_examples_per_sec`; removed in the next release."""
        import warnings

        warnings.warn(
            "Comparison.recipe_examples_per_sec is deprecated: use baseline_examples_per_sec",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.baseline_examples_per_sec


@dataclasses.dataclass(frozen=True, slots=True)
class DatasetInfo:
    """The data benchmarked.

    Attributes:
      path: the dataset root (local or gs://).
      examples: examples in the split.
      shards: shard files in the split.
      bytes: bytes in the split.
      synthetic: True when tfpipe generated it.
      generated_sec: time spent generating it in this run (0 when reused or given).
    """

    path: str
    examples: int
    shards: int
    bytes: int
    synthetic: bool
    generated_sec: float = 0.0


@dataclasses.dataclass(frozen=True, slots=True)
class Report:
    """Everything `tfpipe bench` measured and concluded. Render it with `tfpipe.bench.render`
    or write it with `to_json()`."""

    pipeline: str
    dataset: DatasetInfo
    batch_size: int
    hosts: int
    producer: Rate
    consumer: Consumer
    predicted_input_wait: float
    verdict: Band
    bottleneck: Bottleneck
    stages: tuple[StageRate, ...]
    scaling: tuple[ScalingPoint, ...]
    cores: CoresEstimate
    cpu_cores: CpuCoresEstimate
    service: ServiceEstimate
    recommendations: tuple[Recommendation, ...]
    simulation: Simulation | None = None
    fit: FitCheck | None = None
    comparison: Comparison | None = None
    profile_dir: str | None = None
    environment: dict[str, Any] = dataclasses.field(default_factory=dict)
    elapsed_sec: float = 0.0
    profile: Profile | None = None
    storage: Storage | None = None

    @property
    def per_host_batch_size(self) -> int:
        return self.batch_size // self.hosts

    @property
    def measured_input_wait(self) -> float | None:
        """Ground truth, from --fit when it ran, else from --simulate."""
        if self.fit is not None:
            return self.fit.measured_input_wait
        if self.simulation is not None:
            return self.simulation.measured_input_wait
        return None

    @property
    def measured_by(self) -> str | None:
        return "fit" if self.fit is not None else "simulate" if self.simulation is not None else None

    def to_json(self) -> dict[str, Any]:
        """The versioned JSON object described by `report.schema.json`."""
        producer = dataclasses.asdict(self.producer)
        producer["batches_per_sec"] = producer.pop("elements_per_sec")
        producer["first_batch_sec"] = producer.pop("first_element_sec")
        return {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "tfpipe_version": __version__,
            "verdict": self.verdict,
            "predicted_input_wait": _r(self.predicted_input_wait),
            "measured_input_wait": None if self.measured_input_wait is None else _r(self.measured_input_wait),
            "measured_by": self.measured_by,
            "batch_size": self.batch_size,
            "per_host_batch_size": self.per_host_batch_size,
            "hosts": self.hosts,
            "pipeline": self.pipeline,
            "dataset": dataclasses.asdict(self.dataset),
            "producer": _round_all(producer),
            "consumer": _round_all(dataclasses.asdict(self.consumer)),
            "bottleneck": _round_all(dataclasses.asdict(self.bottleneck)),
            "stages": [
                {
                    "name": s.name,
                    "stages": list(s.stages),
                    "upto": s.upto,
                    "examples_per_sec": _r(s.rate.examples_per_sec),
                    "elements_per_sec": _r(s.rate.elements_per_sec),
                    "first_element_sec": _r(s.rate.first_element_sec),
                    "cpu_ms_per_example": _r(s.rate.cpu_ms_per_example),
                    "cores_busy": _r(s.rate.cores_busy),
                }
                for s in self.stages
            ],
            "scaling": [_round_all(dataclasses.asdict(p)) for p in self.scaling],
            "cores_needed": _round_all(dataclasses.asdict(self.cores)),
            "cores_needed_from_cpu": _round_all(
                dataclasses.asdict(self.cpu_cores) | {"disagreement": self.cpu_cores.disagreement or None}
            ),
            "service_workers": _round_all(dataclasses.asdict(self.service)),
            "recommendations": [dataclasses.asdict(r) for r in self.recommendations],
            "simulation": None
            if self.simulation is None
            else _round_all(dataclasses.asdict(self.simulation)),
            "fit": None if self.fit is None else _round_all(dataclasses.asdict(self.fit)),
            "compare": None
            if self.comparison is None
            else _round_all(dataclasses.asdict(self.comparison) | {"ratio": self.comparison.ratio}),
            "profile": None if self.profile is None else profile_json(self.profile),
            "storage": None if self.storage is None else storage_json(self.storage, self.consumer),
            "profile_dir": self.profile_dir,
            "environment": dict(self.environment),
            "elapsed_sec": _r(self.elapsed_sec),
        }

    def to_json_text(self) -> str:
        return json.dumps(self.to_json(), indent=2) + "\n"


def profile_json(p: Profile) -> dict[str, Any]:
    """The `profile` object of the JSON: the Profiler's figures of the user's run."""
    return {
        "path": p.path,
        "run": p.run,
        "runs": list(p.runs),
        "format": p.format,
        "hosts": [h.host for h in p.hosts],
        "files": [f for h in p.hosts for f in h.files],
        "device": p.device,
        "cores": p.cores,
        "steps": p.steps,
        "step_time_ms": _r(p.step_time_ms),
        "step_time_std_ms": _r(p.step_time_std_ms),
        "step_time_min_ms": _r(p.step_time_min_ms),
        "step_time_max_ms": _r(p.step_time_max_ms),
        "input_wait": _r(p.input_wait),
        "verdict": p.verdict,
        "conclusion": p.conclusion,
        "fed_step_time_ms": _r(p.fed_step_time_ms),
        "batch_size": p.batch_size,
        "dropped_partial_steps": [_round_all(dataclasses.asdict(d)) for d in p.dropped],
        "xprof_version": p.xprof_version,
    }


def storage_json(s: Storage, consumer: Consumer) -> dict[str, Any]:
    """The `storage` object of the JSON: what reading without a cache gives."""
    from tfpipe.bench.verdict import predicted_wait

    first = s.first_epoch_examples_per_sec
    return _round_all(
        dataclasses.asdict(s)
        | {
            "cached": s.cached,
            "first_epoch_predicted_input_wait": None
            if first is None
            else predicted_wait(first, consumer.examples_per_sec),
        }
    )


def schema() -> dict[str, Any]:
    """The JSON Schema of `Report.to_json()`."""
    text = resources.files("tfpipe.bench").joinpath("report.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


def _r(x: float) -> float:
    return round(float(x), 6)


def _round_all(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: _r(v) if isinstance(v, float) else v for k, v in obj.items()}


def conclude(
    *,
    pipeline: str,
    dataset: DatasetInfo,
    batch_size: int,
    hosts: int,
    producer: Rate,
    consumer: Consumer,
    stages: tuple[StageRate, ...],
    scaling: tuple[ScalingPoint, ...],
    worker_cores: int | None = None,
    simulation: Simulation | None = None,
    fit: FitCheck | None = None,
    comparison: Comparison | None = None,
    profile_dir: str | None = None,
    environment: dict[str, Any] | None = None,
    elapsed_sec: float = 0.0,
    profile: Profile | None = None,
    storage: Storage | None = None,
) -> Report:
    """Turns measurements into a Report: verdict, bottleneck, cores, workers and advice.

    Pure: no clocks and no TensorFlow, so a Report can be built from given numbers.
    """
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
        **_analyse(
            pipeline, dataset, hosts, producer, consumer, stages, scaling, worker_cores, profile, storage
        ),
    )


def _analyse(
    pipeline: str,
    dataset: DatasetInfo,
    hosts: int,
    producer: Rate,
    consumer: Consumer,
    stages: tuple[StageRate, ...],
    scaling: tuple[ScalingPoint, ...],
    worker_cores: int | None,
    profile: Profile | None = None,
    storage: Storage | None = None,
) -> dict[str, Any]:
    """The Report fields concluded from the measurements: verdict, bottleneck, cores, advice.

    When reading alone, uncached as every epoch reads, cannot feed the consumer, no CPU
    helps: the bottleneck is the read stage, named as the storage.
    """
    from tfpipe.bench import verdict as v

    wait = v.predicted_wait(producer.examples_per_sec, consumer.examples_per_sec)
    band = v.band(wait)
    rates = [(s.name, s.rate.examples_per_sec) for s in stages]
    storage_bound = v.storage_bound(storage, consumer.examples_per_sec)
    neck = v.stage_cost(rates, stages[0].name) if storage_bound and stages else v.bottleneck(rates)
    curve = [(p.cores, p.examples_per_sec) for p in scaling]
    cores = v.cores_needed(consumer.examples_per_sec, curve)
    most = max(scaling, key=lambda p: p.cores)
    cpu_cores = v.cores_from_cpu(
        consumer.examples_per_sec, producer.cpu_ms_per_example, curve=cores, cores_busy=most.cores_busy
    )
    service = v.service_workers(consumer.examples_per_sec, hosts, worker_cores or cores.available, curve)
    advice = v.recommend(
        verdict=band,
        wait=wait,
        producer_eps=producer.examples_per_sec,
        consumer_eps=consumer.examples_per_sec,
        bottleneck=neck,
        cores=cores,
        service=service,
        data_on_gcs=is_gcs(dataset.path),
        preset=pipeline,
        profiled_wait=None if profile is None else profile.input_wait,
        storage=storage,
    )
    return {
        "predicted_input_wait": wait,
        "verdict": band,
        "bottleneck": neck,
        "cores": cores,
        "cpu_cores": cpu_cores,
        "service": service,
        "recommendations": advice,
    }

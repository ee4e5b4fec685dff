"""The Report `tfpipe.bench()` returns, and its versioned JSON form.

The Report holds what was measured (`results`) and what the conclusion computed from it
(`conclusion.conclude`, each figure once); here it is only held and serialised.

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
from typing import Any

from tfpipe._version import __version__
from tfpipe.bench.judge.advice import Recommendation
from tfpipe.bench.judge.host import BUSY_SHARE, HostFigures
from tfpipe.bench.judge.verdict import Bottleneck, CoresEstimate, CpuCoresEstimate, ServiceEstimate
from tfpipe.bench.profiles.analysis import Profile
from tfpipe.bench.results import (
    Comparison,
    Consumer,
    DatasetInfo,
    FitCheck,
    HostLoad,
    Rate,
    ScalingPoint,
    Simulation,
    StageRate,
    Storage,
)
from tfpipe.bench.wait import Band, WaitInterval
from tfpipe.modalities import modality_of_preset

SCHEMA = "tfpipe.bench.report"
# 2: CPU cost per example and cores busy for the producer, each prefix and scaling point, and
# cores_needed_from_cpu; compare.recipe_examples_per_sec became baseline_examples_per_sec.
# 3: `profile` (the Profiler's figures of the user's run, --from-profile) and consumer.source
# "profile".
# 4: `storage` (the uncached read: examples/s, MB/s, requests/s, the first epoch) and the
# "storage_bound" and "first_epoch_input_bound" recommendations.
# 5: pipeline "text", whose examples are sequences, and its `text` object (the fill measured
# and predicted, padding, real and slot tokens/s, each prefix in tokens, length percentiles),
# present in text reports only; the recommendations "padding", "sequence_length",
# "tokenize_at_convert", "pack_bound".
SCHEMA_VERSION = 5
# Raised for an addition within a version that changes no key's meaning (readers of the version
# keep working): 1 added environment.keras_backend, environment.keras and environment.jax.
# 3 added `mixture` (a text mixture's sources: weight, measured share, tokens/s, epoch),
# present in mixture reports only. 4 added each mixture source's own figures alone (documents,
# tokens, lengths, predicted_fill, epoch_rows, suggested_length), and the text alternative is
# null for a mixture.
# 5 added `host` (what else ran on the cores: others' CPU and
# stolen time beside the producer's windows, the bench and --simulate; the load average; busy),
# producer.windows (the whole pipeline timed twice, tens of seconds apart), the interval's
# `moved` and `busy`, simulation.host, cores_needed.rises, and cores_needed.cores null when a
# curve that does not rise would have to be extrapolated.
# 6 measured fit.measured_input_wait with tfpipe.monitor and added fit.input_wait_low,
# input_wait_high, differential_input_wait and contention.
# 7 added each mixture source's worst window (`worst_window_points` over windows of
# `window_batches`), and a mixture's `lengths`, `predicted_fill` and `epoch_rows` are its own,
# from the mix.
SCHEMA_MINOR_VERSION = 7


@dataclasses.dataclass(frozen=True, slots=True)
class Report:
    """Everything `tfpipe bench` measured and concluded. Render it with `tfpipe.bench.present.render`
    or write it with `to_json()`.

    `first_epoch_predicted_input_wait` is the first epoch's predicted wait when the pipeline
    caches: the storage read without the cache (`storage.first_epoch_examples_per_sec`)
    against the consumer; None when it does not cache or nothing was read uncached.

    For text, an example is a sequence (a row of L tokens) throughout, and `text` holds the
    figures in tokens.
    """

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
    first_epoch_predicted_input_wait: float | None = None
    text: Any = None
    predicted_input_wait_interval: WaitInterval | None = None
    host: HostFigures | None = None
    windows: tuple[Rate, ...] = ()

    @property
    def certain(self) -> bool:
        """True when the run can name its band: the interval lies in one and the host was not
        busy (no interval, as from a window too short for one: the point's band)."""
        i = self.predicted_input_wait_interval
        return i is None or i.certain

    @property
    def per_host_batch_size(self) -> int:
        return self.batch_size // self.hosts

    @property
    def measured_input_wait(self) -> float | None:
        """Ground truth, from --fit when it ran, else from --simulate when its consumer kept
        to the step (a step shorter than the simulating loop's own cost is not simulated)."""
        if self.fit is not None:
            return self.fit.measured_input_wait
        if self.simulation is not None and self.simulation.holds_step:
            return self.simulation.measured_input_wait
        return None

    @property
    def measured_by(self) -> str | None:
        if self.fit is not None:
            return "fit"
        return "simulate" if self.simulation is not None and self.simulation.holds_step else None

    def to_json(self) -> dict[str, Any]:
        """The versioned JSON object described by `report.schema.json`."""
        text = modality_of_preset(self.pipeline).bench.section_json(self.text)  # text's `text` object
        return {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "schema_minor_version": SCHEMA_MINOR_VERSION,
            "tfpipe_version": __version__,
            "verdict": self.verdict,
            "predicted_input_wait": _r(self.predicted_input_wait),
            "predicted_input_wait_interval": interval_json(self.predicted_input_wait_interval),
            "measured_input_wait": None if self.measured_input_wait is None else _r(self.measured_input_wait),
            "measured_by": self.measured_by,
            "batch_size": self.batch_size,
            "per_host_batch_size": self.per_host_batch_size,
            "hosts": self.hosts,
            "pipeline": self.pipeline,
            "dataset": dataclasses.asdict(self.dataset),
            "producer": producer_json(self.producer, self.windows),
            "consumer": _round_all(dataclasses.asdict(self.consumer)),
            "bottleneck": _round_all(dataclasses.asdict(self.bottleneck))
            | {"harness": list(self.bottleneck.harness)},
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
            "simulation": None if self.simulation is None else simulation_json(self.simulation),
            "host": None if self.host is None else host_json(self.host),
            "fit": None if self.fit is None else _round_all(dataclasses.asdict(self.fit)),
            "compare": None
            if self.comparison is None
            else _round_all(dataclasses.asdict(self.comparison) | {"ratio": self.comparison.ratio}),
            "profile": None if self.profile is None else profile_json(self.profile),
            "storage": None
            if self.storage is None
            else storage_json(self.storage, self.first_epoch_predicted_input_wait),
            **text,
            "profile_dir": self.profile_dir,
            "environment": dict(self.environment),
            "elapsed_sec": _r(self.elapsed_sec),
        }

    def to_json_text(self) -> str:
        return json.dumps(self.to_json(), indent=2) + "\n"


def interval_json(i: WaitInterval | None) -> dict[str, Any] | None:
    """The `predicted_input_wait_interval` object: the wait's interval from the producer
    rate's own spread, and the bands it touches."""
    if i is None:
        return None
    return {
        "low": _r(i.low),
        "high": _r(i.high),
        "spread": _r(i.spread),
        "bands": list(i.bands),
        "certain": i.certain,
        "moved": _r(i.moved),
        "busy": i.busy or None,
    }


def producer_json(producer: Rate, windows: tuple[Rate, ...]) -> dict[str, Any]:
    """The `producer` object: the rate, in batches where the JSON says batches, and the windows
    it pools."""
    obj = dataclasses.asdict(producer)
    obj["batches_per_sec"] = obj.pop("elements_per_sec")
    obj["first_batch_sec"] = obj.pop("first_element_sec")
    del obj["pieces"], obj["host"]
    return _round_all(obj) | {"windows": [window_json(w) for w in windows]}


def window_json(w: Rate) -> dict[str, Any]:
    """One of the producer's windows: its rate, spread, CPU, and what else ran beside it."""
    return _round_all(
        {
            "examples_per_sec": w.examples_per_sec,
            "window_sec": w.window_sec,
            "spread": w.spread,
            "cpu_ms_per_example": w.cpu_ms_per_example,
            "cores_busy": w.cores_busy,
        }
    ) | {"host": load_json(w.host)}


def load_json(h: HostLoad | None) -> dict[str, Any] | None:
    """What else ran on the process's cores over a stretch of time."""
    return None if h is None else _round_all(dataclasses.asdict(h))


def host_json(h: HostFigures) -> dict[str, Any]:
    """The `host` object: the host's load beside the bench, and whether it makes the figures
    unreliable."""
    start, end = h.load_average
    return {
        "producer": load_json(h.producer),
        "run": load_json(h.run),
        "simulation": load_json(h.simulation),
        "load_average_start": None if start is None else _r(start),
        "load_average_end": None if end is None else _r(end),
        "busy_share": BUSY_SHARE,
        "busy": bool(h.busy),
        "busy_reason": h.busy or None,
    }


def simulation_json(s: Simulation) -> dict[str, Any]:
    """The `simulation` object: the run, whether its consumer kept to the step, and what else
    ran beside it."""
    return _round_all(dataclasses.asdict(s)) | {
        "consumer_step_ms": _r(s.consumer_step_ms),
        "holds_step": s.holds_step,
        "host": load_json(s.host),
    }


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


def storage_json(s: Storage, first_epoch_wait: float | None) -> dict[str, Any]:
    """The `storage` object of the JSON: what reading without a cache gives, and the first
    epoch's predicted wait the conclusion computed from it."""
    return _round_all(
        dataclasses.asdict(s) | {"cached": s.cached, "first_epoch_predicted_input_wait": first_epoch_wait}
    )


def text_json(t: Any) -> dict[str, Any]:
    """The `text` object of the JSON: a text bench in tokens."""
    m = t.measure
    return {
        "sequence_length": m.sequence_length,
        "packing": m.packing,
        "classify": m.classify,
        "truncate": m.truncate,
        "fill": _round_all(
            {
                "measured": t.fill,
                "measured_low": t.fill_low,
                "measured_high": t.fill_high,
                "predicted": t.fill_predicted,
                "agrees": t.fill_agrees,
                "rows": m.rows,
                "batches": m.batches,
            }
        ),
        "padding": _r(t.padding),
        "predicted_fill": {k: _r(v) for k, v in sorted(m.predicted_fill.items())},
        "tokens_per_sequence": _r(t.tokens_per_sequence),
        "producer": _round_all(
            {
                "sequences_per_sec": t.sequences_per_sec,
                "real_tokens_per_sec": t.real_tokens_per_sec,
                "slot_tokens_per_sec": t.slot_tokens_per_sec,
            }
        ),
        "consumer": _round_all(
            {
                "sequences_per_sec": t.consumer_sequences_per_sec,
                "slot_tokens_per_sec": t.consumer_slot_tokens_per_sec,
                "useful_tokens_per_sec": t.consumer_useful_tokens_per_sec,
            }
        ),
        "stages": [_round_all(dataclasses.asdict(s)) for s in t.stages],
        "scaling": [_round_all(dataclasses.asdict(p)) for p in t.scaling],
        "chunk_documents": m.chunk_documents,
        "rows_per_chunk": _r(m.rows_per_chunk),
        "epoch_rows": m.epoch_rows,
        "documents": m.documents,
        "tokens": m.tokens,
        "lengths": dict(m.lengths),
        "suggested_length": m.suggested_length,
        "suggested_length_fill": _r(m.suggested_fill),
        "tokenizer": m.tokenizer,
        "tokenize_ms_per_1k_tokens": None if m.tokenize_ms_per_1k is None else _r(m.tokenize_ms_per_1k),
        "tokenize_ms_per_1k_tokens_range": None
        if m.tokenize_ms_range is None
        else [_r(m.tokenize_ms_range[0]), _r(m.tokenize_ms_range[1])],
        "tokenize_rounds": m.tokenize_rounds,
        "tokenize_note": m.tokenize_note or None,
        "tokenize_cores": None if t.tokenize_cores is None else _r(t.tokenize_cores),
        "alternative": _alternative_json(t),
        "storage_real_tokens_per_sec": None
        if t.storage_real_tokens_per_sec is None
        else _r(t.storage_real_tokens_per_sec),
    }


def mixture_json(t: Any) -> list[dict[str, Any]]:
    """The `mixture` list of the JSON: each source's weight beside its measured share, and its
    own figures alone (its manifest's)."""
    alone = {s.name: s for s in t.measure.sources}
    out = []
    for m in t.mixture:
        item: dict[str, Any] = {
            "name": m.name,
            "weight": _r(m.weight),
            "measured_share": _r(m.measured_share),
            "tokens_per_sec": _r(m.real_tokens_per_sec),
            "epochs": m.epoch,
            "worst_window_points": _r(m.worst_window),
            "window_batches": m.window,
        }
        s = alone.get(m.name)
        if s is not None:
            item |= {
                "documents": s.documents,
                "tokens": s.tokens,
                "lengths": dict(s.lengths),
                "predicted_fill": {k: _r(v) for k, v in sorted(s.predicted_fill.items())},
                "epoch_rows": s.epoch_rows,
                "suggested_length": s.suggested_length,
            }
        out.append(item)
    return out


def _alternative_json(t: Any) -> dict[str, Any] | None:
    """The packing mode the text verdict names beside the pipeline's."""
    if t.alternative is None:
        return None
    return {
        "packing": t.alternative[0],
        "predicted_fill": _r(t.alternative[1]),
        "better": t.alternative_better,
        "steps_factor": None if t.steps_factor is None else _r(t.steps_factor),
        "useful_tokens_per_sec": _r(t.alternative_useful_tokens_per_sec or 0.0),
    }


def schema() -> dict[str, Any]:
    """The JSON Schema of `Report.to_json()`."""
    text = resources.files("tfpipe.bench").joinpath("report.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


def _r(x: float) -> float:
    return round(float(x), 6)


def _round_all(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: _r(v) if isinstance(v, float) else v for k, v in obj.items()}

"""Advice: what to do, each piece tied to the finding it follows from.

The words live here; the figures they quote are computed once by the conclusion
(`tfpipe.bench.judge.conclusion`) with the verdict's arithmetic (`tfpipe.bench.judge.verdict`) and passed
in. Pure: the same figures give the same advice.
"""

from __future__ import annotations

import dataclasses
import math

from tfpipe.bench.config import DEFAULT_PIPELINE
from tfpipe.bench.fmt import figure, percent, rate
from tfpipe.bench.judge.verdict import Bottleneck, CoresEstimate, ServiceEstimate
from tfpipe.bench.results import Storage
from tfpipe.bench.wait import Band, band
from tfpipe.modalities import modality_of_preset


@dataclasses.dataclass(frozen=True, slots=True)
class Recommendation:
    """One piece of advice and the measurement it follows from.

    Attributes:
      kind: a stable identifier, e.g. "decode_bound", for scripts.
      finding: what was measured.
      action: what to do about it.
    """

    kind: str
    finding: str
    action: str


def recommend(
    *,
    verdict: Band,
    wait: float,
    producer_eps: float,
    consumer_eps: float,
    bottleneck: Bottleneck,
    cores: CoresEstimate,
    service: ServiceEstimate,
    data_on_gcs: bool = False,
    preset: str = DEFAULT_PIPELINE,
    profiled_wait: float | None = None,
    storage: Storage | None = None,
    storage_bound: bool = False,
    first_epoch_wait: float | None = None,
    text: object = None,
) -> tuple[Recommendation, ...]:
    """Advice, each piece tied to a finding. Pure: the same numbers give the same advice.

    `profiled_wait` is the input wait the Profiler measured on the user's own run
    (--from-profile), when the consumer came from it. `storage` is what reading without a
    cache gives, with two of the conclusion's figures about it: `storage_bound` (reading
    alone cannot feed the consumer: storage-bound advice) and `first_epoch_wait` (the first
    epoch's predicted wait when a cache hides the storage after it: a word on that epoch).
    `text` is the report's section of the pipeline's modality (`BenchHalf.figures`: a text
    pipeline's figures in tokens): its advice (`BenchHalf.advice`: on padding, the sequence length
    and tokenizing) follows the input-bound advice, whatever the verdict. Rates are in the
    modality's unit (text: sequences).
    """
    out: list[Recommendation] = []
    half = modality_of_preset(preset).bench
    tail = half.advice(text)
    unit = half.units_words.examples
    ratio = producer_eps / consumer_eps if consumer_eps > 0 else math.inf
    if storage is not None:
        out += _storage_advice(
            storage, consumer_eps, bound=storage_bound, first_epoch_wait=first_epoch_wait, unit=unit
        )
    if profiled_wait is not None and band(profiled_wait) != "not_input_bound" and wait < profiled_wait:
        out.append(
            Recommendation(
                "pipeline_would_help",
                f"Your profiled run waited {percent(profiled_wait)} of each step for input with its own "
                f"pipeline; tfpipe's pipeline on this host predicts {percent(wait)} against the same "
                "accelerator.",
                "Train on tfpipe.build(...) (docs/guides/bench.md), then profile a few steps again to confirm.",
            )
        )
    if verdict == "not_input_bound":
        out.append(
            _keeps_up(wait, producer_eps, consumer_eps, ratio, profiled=profiled_wait is not None, unit=unit)
        )
        return tuple(out + tail)

    stage_advice = _stage_advice(bottleneck, preset=preset, data_on_gcs=data_on_gcs)
    if stage_advice is not None and not storage_bound:
        out.append(stage_advice)
    out += _cores_advice(cores, service, producer_eps=producer_eps, consumer_eps=consumer_eps, unit=unit)
    return tuple(out + tail)


def _keeps_up(
    wait: float, producer_eps: float, consumer_eps: float, ratio: float, *, profiled: bool, unit: str
) -> Recommendation:
    keep = (
        "No change needed: this pipeline keeps up with your accelerator's profiled step."
        if profiled
        else "No change needed. Re-run with the consumer you will train on "
        "(--from-profile with a profile of your run, or --model) before buying more CPU."
    )
    return Recommendation(
        "keeps_up",
        f"The pipeline produces {rate(producer_eps)} {unit}/s, {ratio:.1f}x what the "
        f"consumer takes ({rate(consumer_eps)}/s); predicted input wait {wait:.0%}.",
        keep,
    )


def _storage_advice(
    storage: Storage, consumer_eps: float, *, bound: bool, first_epoch_wait: float | None, unit: str
) -> list[Recommendation]:
    """Storage-bound: reading alone cannot feed the consumer. Or, with a cache, the first epoch
    (which reads the storage to fill it) cannot."""
    where = "gs://" if storage.location == "gcs" else "local storage"
    reads = f"{rate(storage.examples_per_sec)} {unit}/s"
    if storage.mb_per_sec is not None:
        reads = f"{figure(storage.mb_per_sec)} MB/s ({reads}"
        if storage.requests_per_sec is not None:
            reads += f", ~{figure(storage.requests_per_sec)} requests/s"
        reads += ")"
    needs = (
        f"{figure(storage.needed_mb_per_sec)} MB/s ({rate(consumer_eps)} {unit}/s)"
        if storage.needed_mb_per_sec is not None
        else f"{rate(consumer_eps)} {unit}/s"
    )
    more = (
        "read more shards at once (cycle_length and read_parallelism: each open shard is one "
        "stream, and one stream's bandwidth is limited), use larger shards (TensorFlow reads "
        "gs:// in 64 MiB requests, each paying the first-byte latency), cache the records on a "
        'local SSD (cache="disk:/mnt/ssd/cache") or in memory (cache="memory") when they fit, '
        "and keep the bucket in the training hosts' region"
        if storage.location == "gcs"
        else "read more shards at once (cycle_length and read_parallelism), put the shards on "
        'faster disks, or cache the records in memory (cache="memory") when they fit'
    )
    if bound:
        return [
            Recommendation(
                "storage_bound",
                f"Storage-bound: reading from {where} gives {reads}, the consumer needs {needs}. "
                "No CPU added to the later stages helps.",
                more[0].upper() + more[1:] + ".",
            )
        ]
    first = storage.first_epoch_examples_per_sec
    # A positive predicted wait is the first epoch's rate falling short of the consumer's.
    if first is not None and first_epoch_wait is not None and first_epoch_wait > 0:
        return [
            Recommendation(
                "first_epoch_input_bound",
                f"The first epoch reads the storage to fill the {storage.cache} cache: "
                f"{rate(first)} {unit}/s against the consumer's {rate(consumer_eps)}/s, a "
                f"predicted wait of {percent(first_epoch_wait)} for that epoch "
                f"(reading from {where} gives {reads}). Later epochs read the cache.",
                "Over many epochs this costs little. For a short run, or where the full dataset "
                f"will not fit the cache, treat it as storage-bound: {more}.",
            )
        ]
    return []


def _stage_advice(bottleneck: Bottleneck, *, preset: str, data_on_gcs: bool) -> Recommendation | None:
    """What the user can do about the bottleneck stage: a change to their build() call, to
    `tfpipe convert`, or to their hardware: the preset's modality's word on its own stages
    (`BenchHalf.stage_advice`: images' decode, text's parse and pack), else reading's. Never a
    rewrite of the preset's own stages: where no argument changes a stage's cost (the batch and
    final stages, a preset's parse), None, and the cores advice that follows says what hardware
    feeds it."""
    stage = bottleneck.stage
    share = f"{bottleneck.share:.0%} of the {_cost_word(bottleneck)} per example ({bottleneck.ms_per_example:.2f} ms)"
    own: Recommendation | None = modality_of_preset(preset).bench.stage_advice(stage, share, data_on_gcs)
    if own is not None:
        return own
    if stage == "read":
        gcs = "; on gs:// keep the bucket in the training hosts' region."
        return Recommendation(
            "read_bound",
            f"Reading records is the bottleneck: {share}.",
            "Reading is the bottleneck. Convert into more shards (`tfpipe convert --num-shards`, "
            "at least 4x the interleave's cycle_length), read more of them at once "
            "(tfpipe.build(..., order=tfpipe.Order(cycle_length=...), "
            "tuning=tfpipe.Tuning(read_parallelism=...))), or cache the records when they fit in "
            'memory (tuning=tfpipe.Tuning(cache="memory"))' + (gcs if data_on_gcs else "."),
        )
    return None


def _cost_word(bottleneck: Bottleneck) -> str:
    return "CPU" if bottleneck.basis == "cpu" else "time"


def _cores_advice(
    cores: CoresEstimate,
    service: ServiceEstimate,
    *,
    producer_eps: float,
    consumer_eps: float,
    unit: str = "examples",
) -> list[Recommendation]:
    """Whether this host's cores can feed the consumer, and how well they scale."""
    out: list[Recommendation] = []
    if cores.cores is None:
        out.append(
            Recommendation(
                "cpu_bound_beyond_host",
                f"The pipeline makes {rate(producer_eps)} {unit}/s against the {rate(consumer_eps)} "
                f"the consumer takes, and its rate did not rise from fewer cores to "
                f"{cores.available} here, so how many cores would feed it cannot be told from "
                "this curve (a busy host, or a serial stage).",
                "Re-run on a quiet host; if the curve still does not rise, offload preprocessing to "
                f"the tf.data service (`tfpipe serve worker --allow-remote` on {service.workers} "
                f"machine(s) of {service.worker_cores} cores).",
            )
        )
    elif not cores.enough:
        out.append(
            Recommendation(
                "cpu_bound_beyond_host",
                f"Feeding the consumer needs about {cores.cores} cores at the measured "
                f"{rate(cores.per_core_eps)} {unit}/s per core and {cores.efficiency:.0%} "
                f"scaling efficiency; this host has {cores.available}.",
                f"Offload preprocessing to the tf.data service: `tfpipe serve worker "
                f"--allow-remote` on {service.workers} machine(s) of {service.worker_cores} "
                "cores on a private network, and "
                "`tfpipe.build(..., service='grpc://dispatcher:5050')`.",
            )
        )
    else:
        out.append(
            Recommendation(
                "cores_suffice",
                f"{cores.cores} of this host's {cores.available} cores should keep up, "
                f"yet the measured pipeline does not ({rate(producer_eps)} vs "
                f"{rate(consumer_eps)} {unit}/s).",
                "Give tf.data the host's cores: raise tfpipe.Tuning(private_threadpool_size=...) and "
                "check nothing else (e.g. the training loop) holds them.",
            )
        )
    if cores.available > 1 and cores.efficiency < 0.7:
        out.append(
            Recommendation(
                "poor_scaling",
                f"Adding cores helps little: {cores.efficiency:.0%} scaling efficiency at "
                f"{cores.available} cores.",
                "A serial stage or I/O limits the pipeline: raise interleave/map parallelism "
                "and check storage bandwidth before adding CPUs.",
            )
        )
    return out

"""Advice: what to do, each piece tied to the finding it follows from.

The words live here; the figures they quote are computed once by the conclusion
(`tfpipe.bench.conclusion`) with the verdict's arithmetic (`tfpipe.bench.verdict`) and passed
in. Pure: the same figures give the same advice.
"""

from __future__ import annotations

import dataclasses
import math

from tfpipe.bench.fmt import percent, rate
from tfpipe.bench.results import Storage
from tfpipe.bench.verdict import Bottleneck, CoresEstimate, ServiceEstimate
from tfpipe.bench.wait import Band, band


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
    preset: str = "imagenet",
    profiled_wait: float | None = None,
    storage: Storage | None = None,
    storage_bound: bool = False,
    first_epoch_wait: float | None = None,
) -> tuple[Recommendation, ...]:
    """Advice, each piece tied to a finding. Pure: the same numbers give the same advice.

    `profiled_wait` is the input wait the Profiler measured on the user's own run
    (--from-profile), when the consumer came from it. `storage` is what reading without a
    cache gives, with two of the conclusion's figures about it: `storage_bound` (reading
    alone cannot feed the consumer: storage-bound advice) and `first_epoch_wait` (the first
    epoch's predicted wait when a cache hides the storage after it: a word on that epoch).
    """
    out: list[Recommendation] = []
    ratio = producer_eps / consumer_eps if consumer_eps > 0 else math.inf
    if storage is not None:
        out += _storage_advice(storage, consumer_eps, bound=storage_bound, first_epoch_wait=first_epoch_wait)
    if profiled_wait is not None and band(profiled_wait) != "not_input_bound" and wait < profiled_wait:
        out.append(
            Recommendation(
                "pipeline_would_help",
                f"Your profiled run waited {percent(profiled_wait)} of each step for input with its own "
                f"pipeline; tfpipe's pipeline on this host predicts {percent(wait)} against the same "
                "accelerator.",
                "Train on tfpipe.build(...) (see the README), then profile a few steps again to confirm.",
            )
        )
    if verdict == "not_input_bound":
        keep = (
            "No change needed: this pipeline keeps up with your accelerator's profiled step."
            if profiled_wait is not None
            else "No change needed. Re-run with the consumer you will train on "
            "(--from-profile with a profile of your run, or --model) before buying more CPU."
        )
        out.append(
            Recommendation(
                "keeps_up",
                f"The pipeline produces {rate(producer_eps)} examples/s, {ratio:.1f}x what the "
                f"consumer takes ({rate(consumer_eps)}/s); predicted input wait {wait:.0%}.",
                keep,
            )
        )
        return tuple(out)

    stage_advice = _stage_advice(bottleneck, preset=preset, data_on_gcs=data_on_gcs)
    if stage_advice is not None and not storage_bound:
        out.append(stage_advice)
    out += _cores_advice(cores, service, producer_eps=producer_eps, consumer_eps=consumer_eps)
    return tuple(out)


def _storage_advice(
    storage: Storage, consumer_eps: float, *, bound: bool, first_epoch_wait: float | None
) -> list[Recommendation]:
    """Storage-bound: reading alone cannot feed the consumer. Or, with a cache, the first epoch
    (which reads the storage to fill it) cannot."""
    where = "gs://" if storage.location == "gcs" else "local storage"
    reads = f"{rate(storage.examples_per_sec)} examples/s"
    if storage.mb_per_sec is not None:
        reads = f"{storage.mb_per_sec:,.1f} MB/s ({reads}"
        if storage.requests_per_sec is not None:
            reads += f", ~{storage.requests_per_sec:,.1f} requests/s"
        reads += ")"
    needs = (
        f"{storage.needed_mb_per_sec:,.1f} MB/s ({rate(consumer_eps)} examples/s)"
        if storage.needed_mb_per_sec is not None
        else f"{rate(consumer_eps)} examples/s"
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
                f"{rate(first)} examples/s against the consumer's {rate(consumer_eps)}/s, a "
                f"predicted wait of {percent(first_epoch_wait)} for that epoch "
                f"(reading from {where} gives {reads}). Later epochs read the cache.",
                "Over many epochs this costs little. For a short run, or where the full dataset "
                f"will not fit the cache, treat it as storage-bound: {more}.",
            )
        ]
    return []


def _stage_advice(bottleneck: Bottleneck, *, preset: str, data_on_gcs: bool) -> Recommendation | None:
    """What to do about the bottleneck stage, when tfpipe knows that stage."""
    stage = bottleneck.stage
    share = f"{bottleneck.share:.0%} of the time per example ({bottleneck.ms_per_example:.2f} ms)"
    if stage == "decode":
        action = (
            "Decoding and augmenting images dominates. Convert with `tfpipe convert "
            "--resize-shorter 256` (smaller JPEGs decode several times faster), and keep "
            "decode_and_crop fused so only the crop is decoded."
            if preset == "imagenet"
            else "Per-example decoding dominates: batch before the map so it runs vectorized."
        )
        return Recommendation("decode_bound", f"Decode/augment is the bottleneck: {share}.", action)
    if stage == "read":
        gcs = "; on gs:// read from a bucket in the same region and raise interleave parallelism."
        action = (
            "Reading is the bottleneck. Use more shards (at least 4x the interleave parallelism), "
            "bigger reader buffers, or cache() the records if they fit in memory"
            + (gcs if data_on_gcs else ".")
        )
        return Recommendation("read_bound", f"Reading records is the bottleneck: {share}.", action)
    if stage == "parse":
        return Recommendation(
            "parse_bound",
            f"Parsing records is the bottleneck: {share}.",
            "Batch before parsing so tf.io.parse_example runs vectorized over the batch, "
            "and drop features the model does not use from the parse spec.",
        )
    if stage in ("batch", "final"):
        return Recommendation(
            f"{stage}_bound",
            f"The {stage} step costs most: {share}.",
            "Move per-example work after batch() so it runs vectorized, and prefetch "
            "with AUTOTUNE as the last stage.",
        )
    return None


def _cores_advice(
    cores: CoresEstimate, service: ServiceEstimate, *, producer_eps: float, consumer_eps: float
) -> list[Recommendation]:
    """Whether this host's cores can feed the consumer, and how well they scale."""
    out: list[Recommendation] = []
    if not cores.enough:
        out.append(
            Recommendation(
                "cpu_bound_beyond_host",
                f"Feeding the consumer needs about {cores.cores} cores at the measured "
                f"{rate(cores.per_core_eps)} examples/s per core and {cores.efficiency:.0%} "
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
                f"{rate(consumer_eps)} examples/s).",
                "Give tf.data the host's cores: raise PipelineConfig threadpool size and "
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

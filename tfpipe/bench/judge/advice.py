"""Advice: what to do, each piece tied to the finding it follows from.

The words live here; the figures they quote are computed once by the conclusion
(`tfpipe.bench.judge.conclusion`) with the verdict's arithmetic (`tfpipe.bench.judge.verdict`) and passed
in. Pure: the same figures give the same advice.
"""

from __future__ import annotations

import dataclasses
import math

from tfpipe.bench.fmt import cores as fmt_cores
from tfpipe.bench.fmt import figure, percent, percent1, rate
from tfpipe.bench.judge.tokens import TextFigures
from tfpipe.bench.judge.verdict import Bottleneck, CoresEstimate, ServiceEstimate
from tfpipe.bench.results import Storage, TextMeasure
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
    text: TextFigures | None = None,
) -> tuple[Recommendation, ...]:
    """Advice, each piece tied to a finding. Pure: the same numbers give the same advice.

    `profiled_wait` is the input wait the Profiler measured on the user's own run
    (--from-profile), when the consumer came from it. `storage` is what reading without a
    cache gives, with two of the conclusion's figures about it: `storage_bound` (reading
    alone cannot feed the consumer: storage-bound advice) and `first_epoch_wait` (the first
    epoch's predicted wait when a cache hides the storage after it: a word on that epoch).
    `text` is a text pipeline's figures in tokens: advice on padding, the sequence length and
    tokenizing follows the input-bound advice, whatever the verdict. Text rates are sequences.
    """
    out: list[Recommendation] = []
    tail = [] if text is None else text_advice(text)
    unit = "examples" if text is None else "sequences"
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
    `tfpipe convert`, or to their hardware. Never a rewrite of the preset's own stages: where
    no argument changes a stage's cost (the batch and final stages, a preset's parse), None,
    and the cores advice that follows says what hardware feeds it."""
    stage = bottleneck.stage
    share = f"{bottleneck.share:.0%} of the {_cost_word(bottleneck)} per example ({bottleneck.ms_per_example:.2f} ms)"
    if preset == "text" and stage in ("parse", "pack"):
        return _text_stage_advice(stage, share)
    if stage == "decode" and preset == "imagenet":
        return Recommendation(
            "decode_bound",
            f"Decode/augment is the bottleneck: {share}.",
            "Decoding and augmenting images dominates. Convert with `tfpipe convert "
            "--resize-shorter 256` (smaller JPEGs decode several times faster, and the crop "
            "is decoded alone).",
        )
    if stage == "read":
        gcs = "; on gs:// keep the bucket in the training hosts' region."
        return Recommendation(
            "read_bound",
            f"Reading records is the bottleneck: {share}.",
            "Reading is the bottleneck. Convert into more shards (`tfpipe convert --num-shards`, "
            "at least 4x the interleave's cycle_length), read more of them at once "
            "(tfpipe.build(..., config=tfpipe.PipelineConfig(cycle_length=..., "
            "read_parallelism=...))), or cache the records when they fit in memory "
            '(PipelineConfig(cache="memory"))' + (gcs if data_on_gcs else "."),
        )
    return None


def _cost_word(bottleneck: Bottleneck) -> str:
    return "CPU" if bottleneck.basis == "cpu" else "time"


def _text_stage_advice(stage: str, share: str) -> Recommendation:
    if stage == "pack":
        return Recommendation(
            "pack_bound",
            f"Packing documents into rows is the bottleneck: {share}.",
            "first_fit places whole chunks of documents at once in rounds; packing='concat' costs "
            "less CPU (documents end to end, cut at every row's end, so pieces lose the context "
            "before the cut). Otherwise give packing cores: the tf.data service below.",
        )
    return Recommendation(
        "parse_bound",
        f"Parsing the documents' token ids is the bottleneck: {share}.",
        "The pipeline parses whole chunks of records at once already; what is left costs per token. "
        "Give it cores (the tf.data service below).",
    )


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
    if not cores.enough:
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


# Text advice: a share of documents this large cut into pieces at L is worth a word.
CUT_SHARE = 0.25
# ... and this share truncated to a classifier's row.
TRUNCATED_SHARE = 0.01


def padding_sentence(text: TextFigures) -> str:
    """The verdict on padding: the share of the accelerator's slots that hold no token, with this
    pipeline's packing and with the mode named beside it (see `TextFigures.alternative`)."""
    head = (
        f"Your accelerator spends {percent1(text.padding)} of its token slots on padding with "
        f"packing={text.packing}"
    )
    if text.measure.sources:
        return f"{head}. {_each_source_padding(text)}"
    if text.alternative is None:
        return f"{head} (a classifier's row holds one document)."
    mode, fill = text.alternative
    return f"{head}; {mode} {'makes' if text.alternative_better else 'would make'} it {percent1(1 - fill)}."


def _each_source_padding(text: TextFigures) -> str:
    """A mixture's sources, each one's padding alone as its own histogram predicts it, with this
    packing and the other modes (beside the mixture's own, measured)."""
    told = []
    for s in text.measure.sources:
        mine = 1 - s.predicted_fill.get(text.packing, 0.0)
        others = ", ".join(f"{m} {percent1(1 - f)}" for m, f in s.predicted_fill.items() if m != text.packing)
        told.append(f"{s.name} {percent1(mine)}" + (f" ({others})" if others else ""))
    return "Each source alone, predicted from its own length histogram: " + "; ".join(told) + "."


def fill_sentence(text: TextFigures) -> str:
    """The measured fill beside the predicted one, and whether they agree."""
    m = text.measure
    whence = (
        "the mix (each source's histogram weighted by its share)"
        if m.sources
        else "the manifest's length histogram"
    )
    agree = "agree within 1 point" if text.fill_agrees else "DISAGREE by more than 1 point"
    return (
        f"Fill (real tokens / slots): measured {percent1(text.fill)} [{percent1(text.fill_low)}, "
        f"{percent1(text.fill_high)}] over {m.rows:,} rows of the pipeline's batches; predicted "
        f"{percent1(text.fill_predicted)} from {whence}: {agree}."
    )


def text_advice(text: TextFigures) -> list[Recommendation]:
    """Text: packing, the sequence length against the length histogram, tokenizing."""
    out: list[Recommendation] = []
    if text.alternative_better and text.alternative is not None:
        mode = text.alternative[0]
        out.append(
            Recommendation(
                "padding",
                f"{padding_sentence(text)} Of the {rate(text.consumer_slot_tokens_per_sec)} slot "
                f"tokens/s the accelerator computes on, {rate(text.consumer_useful_tokens_per_sec)} "
                "are real tokens.",
                f"Pack: tfpipe.build(..., sequence_length={text.sequence_length}, packing={mode!r}) "
                f"(bench: --packing {mode}). The same documents then take {text.steps_factor:.1f}x fewer "
                f"steps, and the accelerator trains on ~{rate(text.alternative_useful_tokens_per_sec or 0.0)} "
                "real tokens/s at the same step time.",
            )
        )
    out += _length_advice(text)
    if text.measure.tokenize_ms_per_1k is not None:
        out.append(_tokenize_advice(text))
    return out


def _length_advice(text: TextFigures) -> list[Recommendation]:
    m = text.measure
    if m.sources:  # a mixture: each source's own figures, named
        return [
            a
            for src in m.sources
            for a in _lengths_against_l(
                text,
                Lengths(
                    src.lengths,
                    src.documents,
                    src.suggested_length,
                    src.suggested_fill,
                    1 - src.predicted_fill.get(m.packing, 0.0),
                ),
                f"{src.name}: ",
            )
        ]
    return _lengths_against_l(
        text, Lengths(m.lengths, m.documents, m.suggested_length, m.suggested_fill, text.padding), ""
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Lengths:
    """The document lengths that advice weighs against L: one dataset's, or one source's of a
    mixture (its padding then predicted alone, the dataset's measured)."""

    lengths: dict[str, int]
    documents: int
    suggested_length: int
    suggested_fill: float
    padding: float


def _lengths_against_l(text: TextFigures, d: Lengths, whose: str) -> list[Recommendation]:
    """The documents' lengths against L; `whose` names a mixture's source ("" for one dataset)."""
    m, L, lengths = text.measure, text.sequence_length, d.lengths
    spread = f"p50 {lengths['p50']:,}, p90 {lengths['p90']:,}, p99 {lengths['p99']:,}, max {lengths['max']:,}"
    share = lengths["longer"] / d.documents if d.documents else 0.0
    one_a_row = m.packing == "none"
    suggest = f"sequence_length={d.suggested_length} (a multiple of 128, a TPU's lane width)"
    if one_a_row and d.suggested_length < L:
        return [
            Recommendation(
                "sequence_length",
                f"{whose}99% of the documents hold at most {lengths['p99']:,} tokens ({spread}), yet "
                f"each row of L={L:,} holds one: {percent1(d.padding)} of the slots are padding. At "
                f"L={d.suggested_length} the prediction is {percent1(1 - d.suggested_fill)}.",
                f"{suggest}" + ("" if m.classify else ", or pack (packing='first_fit') at any L") + ".",
            )
        ]
    if m.truncate and share > TRUNCATED_SHARE:
        return [
            Recommendation(
                "sequence_length",
                f"{whose}{lengths['longer']:,} documents ({percent(share)}) are longer than the "
                + (
                    f"{L - 2:,} tokens a classifier's row holds between [CLS] and [SEP]"
                    if m.classify
                    else f"{L:,} tokens of a row"
                )
                + f", and lose their end (truncate; {spread}).",
                f"{suggest} keeps 99% whole, at a predicted {percent1(1 - d.suggested_fill)} padding.",
            )
        ]
    if not one_a_row and share > CUT_SHARE:
        return [
            Recommendation(
                "sequence_length",
                f"{whose}{percent(share)} of the documents are longer than L={L:,} ({spread}): each is "
                "cut into pieces of at most L, and a piece trains without the tokens before its cut.",
                "Where the model's context allows, a longer sequence_length keeps more documents "
                f"whole ({suggest} keeps 99%); packing keeps the fill at any L.",
            )
        ]
    return []


def _tokenize_advice(text: TextFigures) -> Recommendation:
    m = text.measure
    ms = m.tokenize_ms_per_1k or 0.0
    cores = (
        f", {fmt_cores(text.tokenize_cores)} more cores at the consumer's rate" if text.tokenize_cores else ""
    )
    ratio = ""
    if text.tokenize_ratio is not None:
        whole = text.stages[-1].cpu_ms_per_1k_tokens
        ratio = f", {text.tokenize_ratio:,.1f}x the {whole:.3f} ms the whole pipeline spends"
    return Recommendation(
        "tokenize_at_convert",
        f"Tokenizing these documents in the pipeline would cost {figure(ms)} CPU ms per 1,000 tokens with "
        f"the dataset's own tokenizer ({m.tokenizer}; measured here{_spread(m)}){ratio}{cores}.",
        "Keep tokenizing at convert time (tfpipe convert --tokenizer PATH or --train-tokenizer KIND), "
        "as this dataset is: the pipeline only reads token ids and packs them. Tokenizing inside "
        "tf.data would need tensorflow-text, which requires the `tensorflow` distribution and "
        "installs it over tensorflow-tpu (docs/install.md says why).",
    )


def _spread(m: TextMeasure) -> str:
    """ ", 0.28-0.31 over 5 rounds": the tokenizer cost's spread, when it was timed in rounds."""
    low_high = m.tokenize_ms_range
    if low_high is None or m.tokenize_rounds < 2:
        return ""
    return f", {figure(low_high[0])}-{figure(low_high[1])} over {m.tokenize_rounds} rounds"

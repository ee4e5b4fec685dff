"""The text verdict's arithmetic: sequences into tokens, the fill, and padding as waste.

bench counts text in sequences (rows of L slots), the unit of the batch, the step and the
consumer. Here the conclusion turns those counts into tokens once: a sequence holds L slot
tokens, of which L x fill are real (not padding), with the fill measured on the pipeline's own
batches. No TensorFlow, no clocks, no words (those are `advice.py`'s).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from tfpipe.bench.results import Rate, ScalingPoint, StageRate, Storage, TextMeasure

# The measured and the predicted fill must agree within one point: the prediction is the
# simulation of the same packer on the manifest's lengths, so more means a bug, not noise.
FILL_AGREEMENT = 0.01
# A 95% interval: the measured fill +- this many standard errors of the batches' mean.
INTERVAL_Z = 1.96


@dataclasses.dataclass(frozen=True, slots=True)
class TokenStage:
    """One stage prefix in tokens.

    Attributes:
      name: the prefix (read, parse, pack, batch or final).
      real_tokens_per_sec: real (non-padding) tokens per second: the prefix's sequences/s x
        L x the measured fill.
      cpu_ms_per_1k_tokens: CPU milliseconds per 1,000 of those tokens.
      cores_busy: cores the prefix kept busy.
    """

    name: str
    real_tokens_per_sec: float
    cpu_ms_per_1k_tokens: float
    cores_busy: float


@dataclasses.dataclass(frozen=True, slots=True)
class TokenPoint:
    """A point of the scaling curve in tokens: `cores` threads, and the same figures as
    `TokenStage`."""

    cores: int
    real_tokens_per_sec: float
    cpu_ms_per_1k_tokens: float
    cores_busy: float


@dataclasses.dataclass(frozen=True, slots=True)
class MixSource:
    """One source of a text mixture in the report: its weight beside its measured share.

    Attributes:
      name: the source's name.
      weight: its weight (normalised; in tokens unless the mixture counts documents).
      measured_share: its real tokens over all sources' in the counted batches.
      real_tokens_per_sec: the producer's real tokens/s x the measured share: its tokens/s.
      epoch: its epoch (passes begun, from 0) at the last counted step; a small source repeats.
      worst_window: the most its share strayed from its weight over every window of `window`
        counted batches, in points.
      window: those windows' batches.
    """

    name: str
    weight: float
    measured_share: float
    real_tokens_per_sec: float
    epoch: int
    worst_window: float = 0.0
    window: int = 0


def mixture_figures(measure: TextMeasure, real_tokens_per_sec: float) -> tuple[MixSource, ...]:
    """Each source's measured share and tokens/s, from its counted real tokens."""
    total = sum(s.real_tokens for s in measure.mixture)
    return tuple(
        MixSource(
            s.name,
            s.weight,
            s.real_tokens / total if total else 0.0,
            real_tokens_per_sec * s.real_tokens / total if total else 0.0,
            s.epoch,
            s.worst_window,
            s.window,
        )
        for s in measure.mixture
    )


@dataclasses.dataclass(frozen=True, slots=True)
class TextFigures:
    """A text bench in tokens, every figure computed once from the measurements.

    Attributes:
      measure: what was measured and read from the manifest (`results.TextMeasure`).
      fill: the measured fill (real tokens / slots) of the pipeline's batches.
      fill_low, fill_high: its 95% interval, from the batches' spread.
      fill_predicted: the fill predicted for the pipeline's packing from the length histogram.
      fill_agrees: the two within FILL_AGREEMENT.
      padding: the share of slots that are padding, 1 - fill: what the accelerator wastes.
      tokens_per_sequence: L x fill, the real tokens one sequence carries.
      sequences_per_sec: the producer's sequences per second (its examples/s).
      real_tokens_per_sec: the producer's real tokens per second.
      slot_tokens_per_sec: the producer's slot tokens per second (sequences x L).
      consumer_sequences_per_sec: the sequences one host's accelerator takes per second.
      consumer_slot_tokens_per_sec: its slot tokens per second: what it computes on.
      consumer_useful_tokens_per_sec: its real tokens per second when fed these sequences: the
        slot rate x the fill. Padding makes the rest.
      stages: each prefix in tokens.
      scaling: the scaling curve in tokens.
      tokenize_cores: cores that tokenizing the consumer's real tokens in the pipeline would
        take, at the measured tokenizer cost; None when not measured.
      tokenize_ratio: that cost over the whole pipeline's CPU per 1,000 tokens; None when not
        measured.
      alternative: the packing mode the verdict names beside this one, and its predicted fill
        (None for a mixture, and for a classifier, which can use no other mode):
        the one to advise when it beats this pipeline's prediction by more than FILL_AGREEMENT
        (first_fit, which keeps documents whole where concat cuts them at every row's end, is
        preferred within FILL_AGREEMENT of the best), else the worst other mode (what packing
        saves); None when the pipeline can use no other mode (a classifier).
      alternative_better: `alternative` is the one to advise.
      steps_factor: with the better mode, the same documents take this many times fewer steps
        (its fill over the measured one); None without one.
      alternative_useful_tokens_per_sec: the consumer's real tokens/s at the alternative's fill.
      storage_real_tokens_per_sec: the uncached read in real tokens/s, when storage was read.
      mixture: a mixture's sources, each one's measured share and tokens/s; empty for one
        dataset.
    """

    measure: TextMeasure
    fill: float
    fill_low: float
    fill_high: float
    fill_predicted: float
    fill_agrees: bool
    padding: float
    tokens_per_sequence: float
    sequences_per_sec: float
    real_tokens_per_sec: float
    slot_tokens_per_sec: float
    consumer_sequences_per_sec: float
    consumer_slot_tokens_per_sec: float
    consumer_useful_tokens_per_sec: float
    stages: tuple[TokenStage, ...]
    scaling: tuple[TokenPoint, ...]
    tokenize_cores: float | None
    tokenize_ratio: float | None
    alternative: tuple[str, float] | None
    alternative_better: bool
    steps_factor: float | None
    alternative_useful_tokens_per_sec: float | None
    storage_real_tokens_per_sec: float | None = None
    mixture: tuple[MixSource, ...] = ()

    @property
    def sequence_length(self) -> int:
        return self.measure.sequence_length

    @property
    def packing(self) -> str:
        return self.measure.packing


def figures(
    measure: TextMeasure,
    *,
    producer: Rate,
    consumer_eps: float,
    stages: Sequence[StageRate],
    scaling: Sequence[ScalingPoint],
    storage: Storage | None = None,
) -> TextFigures:
    """The text figures from the measured sequences/s and the counting pass."""
    L = measure.sequence_length
    fill = measure.fill
    per_sequence = L * fill
    half = INTERVAL_Z * measure.fill_sd / math.sqrt(measure.batches) if measure.batches else 0.0
    predicted = measure.predicted_fill.get(measure.packing, math.nan)
    tokenize = measure.tokenize_ms_per_1k
    useful = consumer_eps * per_sequence
    token_stages = tuple(_stage(s, per_sequence) for s in stages)
    pipeline_ms = token_stages[-1].cpu_ms_per_1k_tokens if token_stages else 0.0
    alternative, better = _alternative(measure, predicted)
    return TextFigures(
        measure=measure,
        fill=fill,
        fill_low=max(0.0, fill - half),
        fill_high=min(1.0, fill + half),
        fill_predicted=predicted,
        fill_agrees=abs(fill - predicted) <= FILL_AGREEMENT,
        padding=1.0 - fill,
        tokens_per_sequence=per_sequence,
        sequences_per_sec=producer.examples_per_sec,
        real_tokens_per_sec=producer.examples_per_sec * per_sequence,
        slot_tokens_per_sec=producer.examples_per_sec * L,
        consumer_sequences_per_sec=consumer_eps,
        consumer_slot_tokens_per_sec=consumer_eps * L,
        consumer_useful_tokens_per_sec=useful,
        stages=token_stages,
        scaling=tuple(
            TokenPoint(
                p.cores, *_per_token(p.examples_per_sec, p.cpu_ms_per_example, per_sequence), p.cores_busy
            )
            for p in scaling
        ),
        tokenize_cores=None if tokenize is None else useful * tokenize / 1e6,
        tokenize_ratio=tokenize / pipeline_ms if tokenize is not None and pipeline_ms > 0 else None,
        alternative=alternative,
        alternative_better=better,
        steps_factor=alternative[1] / fill if better and alternative and fill > 0 else None,
        alternative_useful_tokens_per_sec=None if alternative is None else consumer_eps * L * alternative[1],
        storage_real_tokens_per_sec=None if storage is None else storage.examples_per_sec * per_sequence,
        mixture=mixture_figures(measure, producer.examples_per_sec * per_sequence),
    )


def _alternative(measure: TextMeasure, predicted: float) -> tuple[tuple[str, float] | None, bool]:
    """(the mode to name beside this pipeline's and its predicted fill, whether it is better):
    see `TextFigures.alternative`. None for a mixture: it has no histogram of its own to
    predict another mode's fill from (bench says each source's alone instead)."""
    if measure.sources:
        return None, False
    others = {m: f for m, f in measure.predicted_fill.items() if m != measure.packing}
    if not others:
        return None, False
    mode = max(others, key=lambda m: others[m])
    if "first_fit" in others and others["first_fit"] >= others[mode] - FILL_AGREEMENT:
        mode = "first_fit"
    if others[mode] > predicted + FILL_AGREEMENT:
        return (mode, others[mode]), True
    worst = min(others, key=lambda m: others[m])
    return (worst, others[worst]), False


def _stage(s: StageRate, per_sequence: float) -> TokenStage:
    return TokenStage(
        s.name,
        *_per_token(s.rate.examples_per_sec, s.rate.cpu_ms_per_example, per_sequence),
        s.rate.cores_busy,
    )


def _per_token(
    sequences_per_sec: float, cpu_ms_per_sequence: float, per_sequence: float
) -> tuple[float, float]:
    """(real tokens/s, CPU ms per 1,000 real tokens) from a rate and cost in sequences."""
    per_1k = 1000.0 / per_sequence if per_sequence > 0 else math.nan
    return sequences_per_sec * per_sequence, cpu_ms_per_sequence * per_1k


def section(
    text: TextMeasure,
    producer: Rate,
    consumer: Any,
    stages: Sequence[StageRate],
    scaling: Sequence[ScalingPoint],
    storage: Storage | None,
) -> TextFigures:
    """The report's text section (`BenchHalf.figures`): a text pipeline's figures in tokens."""
    return figures(
        text,
        producer=producer,
        consumer_eps=consumer.examples_per_sec,
        stages=stages,
        scaling=scaling,
        storage=storage,
    )

"""The text modality's words in a bench report (judge): its advice on padding, the sequence
length and tokenizing, each tied to the figure it follows from, and what to do when parsing or
packing is the bottleneck. The figures are computed once (`figures.figures`) and passed in. Pure:
the same figures give the same advice."""

from __future__ import annotations

import dataclasses

from tfpipe.bench.fmt import cores as fmt_cores
from tfpipe.bench.fmt import figure, percent, percent1, rate
from tfpipe.bench.judge.advice import Recommendation
from tfpipe.bench.results import TextMeasure
from tfpipe.modalities.text.bench.figures import TextFigures


def stage_advice(stage: str, share: str, data_on_gcs: bool) -> Recommendation | None:
    """Parsing or packing as the bottleneck; None for the other stages (reading's advice is
    every modality's)."""
    if stage not in ("parse", "pack"):
        return None
    return _text_stage_advice(stage, share)


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

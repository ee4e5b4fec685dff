"""A text bench report as the table and the plot show it (`view`: in sequences and real
tokens), with its section: padding and fill, the documents' lengths against L (each source's,
for a mixture), the tokenizer's cost and a mixture's shares."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from tfpipe.bench.fmt import figure, percent1, rate
from tfpipe.bench.judge.report import Report
from tfpipe.bench.present.view import ReportView
from tfpipe.bench.results import TextMeasure
from tfpipe.modalities.text.bench.advice import fill_sentence, padding_sentence
from tfpipe.modalities.text.bench.figures import TextFigures
from tfpipe.plural import counted


def view(report: Report) -> ReportView | None:
    """The report in sequences (the summary) and real tokens (the rates, the plot); None without
    its text section (a report made from given figures)."""
    t = report.text
    if t is None:
        return None
    ds, c = report.dataset, report.consumer
    return ReportView(
        unit="real tokens",
        per="token",
        example="sequence",
        consumer=t.consumer_useful_tokens_per_sec,
        stages=[s.real_tokens_per_sec for s in t.stages],
        stage_costs=[s.cpu_ms_per_1k_tokens for s in t.stages],
        scaling=[(p.cores, p.real_tokens_per_sec, p.cpu_ms_per_1k_tokens) for p in t.scaling],
        storage=t.storage_real_tokens_per_sec,
        rate_header="real\ntokens/s",
        cost_header="CPU ms\n/1k tok",
        scaling_rate="real tokens/s",
        scaling_cost="CPU ms/1k tokens",
        data=f"{counted(ds.examples, 'document')}, {counted(t.measure.tokens, 'token')}",
        made=", built in: this Python's docstrings, tokenized by a BPE trained on them",
        batch=f" sequences of {t.sequence_length:,} tokens, packing {t.packing}",
        produced=(
            f"{rate(t.sequences_per_sec)} sequences/s = {rate(t.real_tokens_per_sec)} real tokens/s "
            f"({rate(t.slot_tokens_per_sec)} slot tokens/s at a {percent1(t.fill)} fill)"
        ),
        cost=f"{t.stages[-1].cpu_ms_per_1k_tokens:.3f} CPU ms per 1,000 tokens",
        consumed=(
            f"{rate(c.examples_per_sec)} sequences/s = {rate(t.consumer_slot_tokens_per_sec)} slot tokens/s, "
            f"{rate(t.consumer_useful_tokens_per_sec)} of them real tokens at this fill"
        ),
        consumer_label=" (real tokens at this fill)",
        title=(
            f"{percent1(t.padding)} of the accelerator's token slots are padding (packing={t.packing}, "
            f"L={t.sequence_length:,})",
        ),
        footer=(padding_sentence(t), fill_sentence(t)),
        rows=tuple(text_rows(report)),
    )


def text_rows(report: Report) -> list[tuple[str, Any]]:
    """Summary rows for text: padding as waste, the fill measured beside the predicted, the
    documents' lengths against L."""

    t = report.text
    if t is None:
        return []
    m = t.measure
    agrees = t.fill_agrees
    return [
        ("Padding", Text(padding_sentence(t), style="bold")),
        ("", Text(fill_sentence(t), style="" if agrees else "bold red")),
        *(("Lengths" if i == 0 else "", line) for i, line in enumerate(length_lines(t))),
        ("Tokenizer", f"{m.tokenizer or 'none named'}: {_tokenize_cost(m)}"),
        *(("Mixture" if i == 0 else "", line) for i, line in enumerate(mixture_lines(t))),
    ]


def length_lines(t: TextFigures) -> list[str]:
    """The documents' lengths against L and the rows they pack into: the dataset's, or a
    mixture's own (from the mix) after each source's alone, then the mixed stream's chunks."""
    m = t.measure
    past = "truncated" if m.truncate else "cut into pieces"
    room = t.sequence_length - 2 if m.classify else t.sequence_length

    def said(lengths: dict[str, int], documents: int, mixed: bool = False) -> str:
        # The mix's histogram is drawn (numbers.histogram), so its count of documents is not
        # one the user has: the mix says the share longer than L.
        longer = (
            f"{lengths['longer'] / max(documents, 1):.1%} of the mixed documents"
            if mixed
            else f"{lengths['longer']:,} of {documents:,}"
        )
        return (
            f"documents of p50 {lengths['p50']:,}, p90 {lengths['p90']:,}, p99 {lengths['p99']:,}, "
            f"max {lengths['max']:,} tokens; {longer} longer than {room:,} ({past})"
        )

    if not m.sources:
        return [f"{said(m.lengths, m.documents)}; {_chunks(m)}"]
    return [
        *(
            f"{s.name}: {said(s.lengths, s.documents)}; its epoch alone packs into ~{s.epoch_rows:,} rows"
            for s in m.sources
        ),
        f"the mix: {said(m.lengths, m.documents, mixed=True)}; one epoch of the mixture (every source read whole) "
        f"packs into ~{m.epoch_rows:,} rows",
        f"the mixed stream in chunks of ~{m.chunk_documents:,} documents of ~{m.rows_per_chunk:,.0f} rows each",
    ]


def mixture_lines(t: TextFigures) -> list[str]:
    """A mixture's sources, each one's weight beside its measured share of the real tokens."""
    if not t.mixture:
        return []
    lines = [
        f"{m.name}: weight {percent1(m.weight)}, measured {percent1(m.measured_share)} of the real "
        f"tokens ({100 * (m.measured_share - m.weight):+.2f} points; at worst {m.worst_window:.2f} in a "
        f"window of {m.window:,} batches), {rate(m.real_tokens_per_sec)} tokens/s, in its epoch {m.epoch:,}"
        for m in t.mixture
    ]
    m = t.measure
    return [
        *lines,
        f"(counted in the fill's pass over {m.batches:,} batches, {m.real_tokens:,} real tokens)",
    ]


def _chunks(m: TextMeasure) -> str:
    """The chunks as the corpus has them, and the rows of one epoch."""
    epoch = f"one epoch packs into ~{m.epoch_rows:,} rows"
    if m.documents < m.chunk_documents:  # in training a chunk holds documents of several epochs
        return (
            f"{epoch}; a chunk packs {m.chunk_documents:,} documents together, more than the "
            f"corpus's {m.documents:,}: each spans {m.chunk_documents / m.documents:,.1f} epochs"
        )
    return f"{epoch}, in chunks of {m.chunk_documents:,} documents of ~{m.rows_per_chunk:,.0f} rows each"


def _tokenize_cost(m: TextMeasure) -> str:
    """The tokenizer's measured cost with its spread over rounds, or why it was not measured."""
    if m.tokenize_ms_per_1k is None:
        return f"its cost was not measured ({m.tokenize_note})"
    spread = (
        f" (median of {m.tokenize_rounds} rounds, {figure(m.tokenize_ms_range[0])}-"
        f"{figure(m.tokenize_ms_range[1])})"
        if m.tokenize_ms_range is not None and m.tokenize_rounds > 1
        else ""
    )
    return (
        f"encodes these documents at {figure(m.tokenize_ms_per_1k)} CPU ms per 1,000 tokens here{spread}, "
        "what tokenizing in the pipeline would add"
    )

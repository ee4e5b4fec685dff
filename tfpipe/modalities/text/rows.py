"""Text's batching (`pipeline.stages.stage.Batching`): documents are read in chunks, each chunk
packed into rows of L tokens, the rows batched (stages.py); a batch counts rows, and eval pads its
last one with empty rows. And its mixture (`pipeline.mixture.plan.Mixing`): weights in tokens or
documents, the sources' documents mixed before they are chunked and packed, a start found by
counting rows from the sources' lengths files.

The text preset's Decoder carries `TextRows(packing)`; nothing outside this modality asks whether
a pipeline is text.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from tfpipe.errors import ConfigError
from tfpipe.modalities.text import lengths as text_lengths
from tfpipe.modalities.text import stages as text_stages
from tfpipe.modalities.text.stages import TextPacking
from tfpipe.packing.fill import epoch_rows
from tfpipe.packing.spec import added_tokens, chunk_size
from tfpipe.pipeline.mixture import stream as mixture_stream
from tfpipe.pipeline.mixture.spec import BLOCK, MixSpec
from tfpipe.pipeline.stages.preset import parse_stage
from tfpipe.pipeline.stages.stage import Stage, StageFn, StagePlan

if TYPE_CHECKING:
    from tfpipe.pipeline.read.resolve import ResolvedData
    from tfpipe.pipeline.stages.pipeline import Pipeline
    from tfpipe.presets.base import Decoder


@dataclasses.dataclass(frozen=True)
class TextRows:
    """Documents packed into rows of `pack.sequence_length` tokens, a chunk of documents at a
    time: chunk, parse, pack, batch."""

    pack: TextPacking

    unit = "documents"
    pads_eval = True  # every document is read once in eval, its last batch padded with empty rows
    marks_padding = True  # padding is segment_ids == 0

    @property
    def mixing(self) -> TextMixing:
        return TextMixing(self)

    def stages(self, p: StagePlan) -> list[Stage]:
        return [
            Stage("chunk", text_stages.chunk_stage(p), "read"),
            Stage("parse", parse_stage(p), "parse"),
            Stage("pack", text_stages.pack_stage(p), "pack"),
            Stage("batch", text_stages.batch_stage(p), "batch", batches=True),
        ]

    def batched_read(self, p: StagePlan) -> bool:
        return False  # chunks of documents, packed into rows after

    def ordered(self, p: StagePlan, read: Callable[..., Any], parallelism: int) -> Any:
        return text_stages.resumable_chunks(p, read, parallelism)

    def start(self, spec: Any, position: Any, step: int) -> Callable[[], Any]:
        return text_stages.start_fn(spec, self.pack, position, step)

    def notes(
        self, batch: int, src: ResolvedData, resumable: bool
    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        return text_stages.plan_notes(self.pack, batch, src, resumable)

    def units(self, records: int, src: ResolvedData) -> tuple[int, str]:
        """The rows a share of `records` documents packs into: a batch holds rows (packed
        sequences), not records, so it is checked against the rows an epoch packs into
        (`packing.fill.epoch_rows`, the count steps_per_epoch and bench use), its share of them."""
        pack = self.pack
        if not pack.histogram:
            return records, "records"
        total = sum(src.counts)
        rows = epoch_rows(pack) * records // total if total else 0
        return rows, (
            f"rows (packed sequences of {pack.sequence_length} tokens; {records:,} documents, the "
            "rows predicted from the length histogram)"
        )

    def eval_counts(self, src: ResolvedData, pipelines: int) -> tuple[list[int] | None, str]:
        rows = text_lengths.pipeline_rows(self.pack, src, pipelines)
        if rows is None:
            return None, "the text split has no lengths file to count its rows from (convert it again)"
        return rows, ""

    def identity(self) -> dict[str, Any] | None:
        return self.pack.identity()

    # What the mixed stream (pipeline/mixture/stream.py) counts rows with.

    def chunk_rows(self, lengths: Any) -> Any:
        """The rows a chunk of documents of these token counts packs into (int64 scalar)."""
        return text_stages.rows_of(self.pack, lengths)

    def ordered_lengths(self, spec: Any, lengths: Any, size: int) -> Any:
        return text_lengths.ordered_lengths(spec, lengths, size)

    def first_chunk(
        self, tf_: Any, start: Callable[[], Any], rows_per_step: int, find: Callable[[Any], Any]
    ) -> tuple[Any, Any]:
        return text_stages.first_chunk(tf_, start, rows_per_step, find)


def _split_text(p: Pipeline) -> Any:
    """The split's text entry (documents, tokens, histogram) of a planned source, or None."""
    src = p.source
    return src.manifest.split(src.split).text if src.manifest is not None and src.split is not None else None


@dataclasses.dataclass(frozen=True)
class TextMixing:
    """A mixture of text datasets: weights in tokens (or documents), documents of every source
    sharing rows."""

    rows: TextRows

    by: ClassVar[tuple[str, ...]] = ("tokens", "documents")
    by_words = "text (weights in tokens, or documents)"
    unit = "documents"

    def size(self, p: Pipeline, by: str) -> float:
        """A source's tokens (by="tokens") or documents: its default weight."""
        text = _split_text(p)
        return float((text.tokens if by == "tokens" and text is not None else p.source.examples) or 0)

    def weight_unit(self, p: Pipeline, by: str) -> float:
        """Mean tokens a document as packed (with the EOS added) for by="tokens", else 1."""
        if by != "tokens":
            return 1.0
        text = _split_text(p)
        return float(text.tokens / text.documents + added_tokens(self.rows.pack))

    def source_extra(self, p: Pipeline) -> Any:
        """The source's lengths file, which the mixed stream counts its rows from.

        Raises:
          ConfigError: the split has none (converted before tfpipe wrote one).
        """
        lengths = text_lengths.lengths_file(p.source)
        if lengths is None:
            raise ConfigError(
                f"A text mixture counts each source's rows from its lengths file; {p.source.where} has "
                "none (converted before tfpipe wrote one). Convert the split again."
            )
        return lengths

    def mixed(
        self, decoder: Decoder, parts: Sequence[Pipeline], quotas: Sequence[int]
    ) -> tuple[Decoder, int, dict[str, Any]]:
        """(the mixture's decoder: its packing at the mixed stream's mean length, documents a
        chunk, what a resumed run must share of it)."""
        mean = sum(n * _mean_tokens(p) for n, p in zip(quotas, parts, strict=True)) / BLOCK
        pack = dataclasses.replace(self.rows.pack, mean_tokens=mean, histogram=None)
        size = chunk_size(pack)
        mixed = dataclasses.replace(decoder, packing=pack, batching=TextRows(pack))
        return mixed, size, pack.identity() | {"chunk": size}

    def read(
        self, mix: MixSpec, reads: Sequence[Any], p0: StagePlan, start: Any, size: int, per_step: int
    ) -> StageFn:
        """The mixture's "interleave": the mixed documents in chunks of `size`, from the step
        `start()` gives."""
        rows = p0.batching
        return lambda _: mixture_stream.text_chunks(
            mix,
            list(reads),
            rows,
            start,
            size=size,
            rows_per_step=per_step,
            needs_source=p0.decoder.needs_source,
        )

    def position(self, pipe: Any, step: int, per_step: int) -> int:
        """The first document of the chunk holding the step's first row (found by walking the
        chunks before it, lengths only)."""
        if step == 0:
            return 0
        from tfpipe._tf import tf  # the walk runs in TensorFlow

        tf_ = tf()
        first, _ = mixture_stream.chunk_of(
            pipe.mixture, pipe.reads, pipe.plan.batching, pipe.chunk, tf_.constant(step * per_step, tf_.int64)
        )
        return int(first) * pipe.chunk

    def notes(self, size: int) -> tuple[str, ...]:
        return (f"text: chunks of {size} documents of the mixed stream, each packed on its own",)

    def replaces(self, note: str) -> bool:
        """A source's own note the mixture's replaces: its chunking (the mixture chunks its stream)."""
        return note.startswith("text: chunks of")


def _mean_tokens(p: Pipeline) -> float:
    text = _split_text(p)
    return text.tokens / text.documents if text is not None and text.documents else 0.0

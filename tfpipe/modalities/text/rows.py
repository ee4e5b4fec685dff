"""Text's batching (`pipeline.stages.stage.Batching`): documents are read in chunks, each chunk
packed into rows of L tokens, the rows batched (stages.py); a batch counts rows, and eval pads its
last one with empty rows. Its mixture (`pipeline.mixture.mixing.Mixing`) is mixture/mixing.py's:
weights in tokens or documents.

The text preset's Decoder carries `TextRows(packing)`; nothing outside this modality asks whether
a pipeline is text.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from tfpipe.modalities.text import stages as text_stages
from tfpipe.modalities.text.mixture.mixing import TextMixing
from tfpipe.packing.fill import epoch_rows
from tfpipe.packing.spec import Mode
from tfpipe.pipeline.stages.preset import parse_stage
from tfpipe.pipeline.stages.stage import Stage, StagePlan

if TYPE_CHECKING:
    from tfpipe.pipeline.read.resolve import ResolvedData


@dataclasses.dataclass(frozen=True, slots=True)
class TextPacking:
    """What the pipeline's chunk, pack and batch stages do for this preset.

    Attributes:
      sequence_length: L.
      mode: "first_fit", "none" or "concat".
      truncate: keep only each document's first L tokens.
      eos: the id appended to every document, or None.
      classify: one document a row as [CLS] tokens [SEP] (`cls`, `sep`), with its label.
      label: the label feature (classify).
      vocab_size: token ids must be below it (None: below 2**31, the int32 outputs).
      mean_tokens: the split's mean document length from the manifest (chunk size), or None.
      histogram: the split's length histogram from the manifest, or None.
      chunk: documents per chunk, or None: chosen from the mean length.
    """

    sequence_length: int
    mode: Mode
    truncate: bool = False
    eos: int | None = None
    classify: bool = False
    cls: int | None = None
    sep: int | None = None
    label: str | None = None
    vocab_size: int | None = None
    mean_tokens: float | None = None
    histogram: Mapping[str, list[int]] | None = None
    chunk: int | None = None

    def identity(self) -> dict[str, Any]:
        """What a resumed run must share with the run it resumes (see pipeline/order/position.py)."""
        return {
            "sequence_length": self.sequence_length,
            "packing": self.mode,
            "truncate": self.truncate,
            "eos": self.eos,
        }


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
        rows = text_stages.pipeline_rows(self.pack, src, pipelines)
        if rows is None:
            return None, "the text split has no lengths file to count its rows from (convert it again)"
        return rows, ""

    def identity(self) -> dict[str, Any] | None:
        return self.pack.identity()

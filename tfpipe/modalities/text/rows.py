"""Text's batching (`pipeline.stages.stage.Batching`): documents are read in chunks, each chunk
packed into rows of L tokens, the rows batched (stages.py); a batch counts rows, and eval pads its
last one with empty rows. Its mixture (`pipeline.mixture.mixing.Mixing`) is mixture/mixing.py's:
weights in tokens or documents.

The text preset's Decoder carries `TextRows(packing)`; nothing outside this modality asks whether
a pipeline is text.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tfpipe.modalities.text import lengths as text_lengths
from tfpipe.modalities.text import stages as text_stages
from tfpipe.modalities.text.mixture.mixing import TextMixing
from tfpipe.modalities.text.stages import TextPacking
from tfpipe.packing.fill import epoch_rows
from tfpipe.pipeline.stages.preset import parse_stage
from tfpipe.pipeline.stages.stage import Stage, StagePlan

if TYPE_CHECKING:
    from tfpipe.pipeline.read.resolve import ResolvedData


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

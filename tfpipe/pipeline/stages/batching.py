"""`Records`, the batching of a preset whose records are its examples (`stage.Batching`): parse,
decode and batch, in that order for per-record presets (images) and batch first for batched ones
(tables). A preset whose Decoder carries no batching of its own gets it (`batching_of`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tfpipe.pipeline.order import resumable
from tfpipe.pipeline.order import stream as order_stream
from tfpipe.pipeline.read.sharding import share_files
from tfpipe.pipeline.stages.preset import batch_stage, decode_stage, parse_stage
from tfpipe.pipeline.stages.stage import Batching, Stage, StagePlan

if TYPE_CHECKING:
    from tfpipe.pipeline.read.resolve import ResolvedData
    from tfpipe.presets.base import Decoder


class Records:
    """A record is an example: parse, decode and batch it (batched presets: batch, then parse
    and decode a batch at once)."""

    unit = "records"
    pads_eval = False
    marks_padding = False
    mixing = None  # a mixture weighs records (pipeline/mixture/plan.py's own)

    def stages(self, p: StagePlan) -> list[Stage]:
        parse = Stage("parse", parse_stage(p), "parse")
        decode = Stage("decode", decode_stage(p), "decode")
        batch = Stage("batch", batch_stage(p), "batch", batches=True)
        return [batch, parse, decode] if p.decoder.batched else [parse, decode, batch]

    def batched_read(self, p: StagePlan) -> bool:
        return p.order is not None and p.decoder.batched

    def ordered(self, p: StagePlan, read: Callable[..., Any], parallelism: int) -> Any:
        assert p.order is not None and p.start is not None
        return order_stream.stream(
            p.order,
            read,
            p.start,
            cached=p.cache == "memory",
            sources=p.decoder.needs_source,
            keys=p.keyed,
            batch=p.batch_size if p.decoder.batched else None,
            parallelism=parallelism,
        )

    def start(self, spec: Any, position: Any, step: int) -> Callable[[], Any]:
        return resumable.start_fn(spec, position, step)

    def notes(
        self, batch: int, src: ResolvedData, resumable: bool
    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        return (), ()

    def units(self, records: int, src: ResolvedData) -> tuple[int, str]:
        return records, "records"

    def eval_counts(self, src: ResolvedData, pipelines: int) -> tuple[list[int] | None, str]:
        gz = bool(src.compression)
        shares = [share_files(src.sizes, src.counts, pipelines, j, compressed=gz) for j in range(pipelines)]
        return [int(s.examples or 0) for s in shares], ""

    def identity(self) -> dict[str, Any] | None:
        return None


RECORDS: Batching = Records()


def batching_of(decoder: Decoder) -> Batching:
    """The decoder's batching, or `RECORDS` when it carries none."""
    batching: Batching = decoder.batching if decoder.batching is not None else RECORDS
    return batching

"""`plan()`'s third step: the stages of the decided pipeline, with the resumable order's spec and
where it starts, as a `Pipeline`.
"""

from __future__ import annotations

from tfpipe.pipeline.config import PipelineConfig
from tfpipe.pipeline.decide import Decisions
from tfpipe.pipeline.order import resumable
from tfpipe.pipeline.read.resolve import ResolvedData
from tfpipe.pipeline.read.shard import verify_group
from tfpipe.pipeline.request import Request
from tfpipe.pipeline.stages.pipeline import Pipeline, make_stages
from tfpipe.pipeline.stages.stage import StagePlan

# Share of ram_budget the shuffle buffer may take.
SHUFFLE_SHARE = 0.25


def assemble(r: Request, d: Decisions) -> Pipeline:
    """The stages of the decided pipeline (its third step), with the resumable order's spec."""
    src, cfg = r.src, d.config
    spec = start = None
    if d.resumable:
        mean = src.bytes // src.examples if src.bytes and src.examples else None
        window = _shuffle_buffer(cfg, src, resumable.WINDOW_COPIES)
        spec = resumable.make_spec(
            cfg,
            src,
            d.share,
            pipelines=r.pipelines,
            index=r.index,
            global_batch=r.batch_size,
            per_replica=r.per_replica,
            window=window,
            run=resumable.run_length(verify_group(mean), window, cfg.cycle_length, len(d.share.files)),
            resuming=r.resuming,
        )
        start = d.batching.start(spec, r.position, r.step)
    stage_plan = StagePlan(
        source=src,
        share=d.share,
        read_records=d.read_records,
        decoder=d.decoder,
        batching=d.batching,
        config=cfg,
        training=r.training,
        batch_size=r.per_replica,
        num_shards=r.pipelines,
        shard_index=r.index,
        cache=d.cache,
        shuffle_buffer=_shuffle_buffer(cfg, src),
        service=r.service,
        counter=d.counter,
        order=spec,
        start=start,
        batches=d.batches,
        padding_batches=d.padding_batches,
    )
    return Pipeline(
        stages=make_stages(stage_plan),
        plan=stage_plan,
        global_batch_size=r.batch_size,
        preset=d.preset,
        notes=d.notes,
        position=r.position,
        start_step=r.step,
    )


def _shuffle_buffer(cfg: PipelineConfig, src: ResolvedData, copies: int = 1) -> int:
    """The configured buffer, capped so `copies` of it take at most SHUFFLE_SHARE of the RAM
    budget in mean-size records."""
    if not (src.bytes and src.examples):
        return cfg.shuffle_buffer
    mean = max(1, src.bytes // max(1, src.examples))
    return max(1, min(cfg.shuffle_buffer, int(SHUFFLE_SHARE * cfg.resolved_ram_budget()) // (mean * copies)))

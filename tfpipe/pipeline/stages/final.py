"""The final stages: pad (eval: static shapes, stages/padding.py), [service], prefetch; and the
tf.data.Options every pipeline is made with.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tfpipe._tf import Dataset, Options, tf
from tfpipe.pipeline.stages import padding
from tfpipe.pipeline.stages.stage import StageFn, StagePlan
from tfpipe.service.stage import distribute

if TYPE_CHECKING:
    from tfpipe.pipeline.config import PipelineConfig


def pad_stage(p: StagePlan) -> StageFn:
    """Eval: the last batch padded to full size with weight 0, and whole batches of padding up to
    the batches every input pipeline yields (`pad_remainder`, see stages/padding.py); the cardinality
    set when known."""

    def pad(ds: Dataset) -> Dataset:
        if p.training:
            return ds
        if p.config.pad_remainder:
            marked = p.batching.marks_padding  # e.g. text rows: padding is segment_ids == 0
            ds = padding.pad(ds, p.batch_size, p.padding_batches, marked=marked)
        if p.batches is not None:
            ds = ds.apply(tf().data.experimental.assert_cardinality(p.batches))
        return ds

    return pad


def service_stage(p: StagePlan) -> StageFn:
    def service(ds: Dataset) -> Dataset:
        # Options applied after this stage never reach the workers: hand them over here.
        cfg = p.config
        return distribute(
            ds,
            p.service,
            processing_mode=cfg.processing_mode,
            job_name=cfg.job_name,
            options=make_options(cfg, p.shard_by),
            connect_timeout=cfg.service_connect_timeout,
            peer_timeout=cfg.service_peer_timeout,
        )

    return service


def prefetch_stage(p: StagePlan) -> StageFn:
    def prefetch(ds: Dataset) -> Dataset:
        return ds.prefetch(p.config.prefetch)

    return prefetch


def make_options(cfg: PipelineConfig, shard_by: str, threadpool_size: int | None = None) -> Options:
    """The tf.data.Options of a pipeline: set deliberately, not left to defaults.

    Autotune on, with the RAM budget and CPU budget; map parallelisation and parallel batch
    on (they only add parallelism where a stage left it at 1); max_intra_op_parallelism and
    the private pool from the config (see PipelineConfig for how they were measured).
    """
    tf_ = tf()
    opts = tf_.data.Options()
    opts.deterministic = bool(cfg.deterministic)
    opts.autotune.enabled = True
    opts.autotune.ram_budget = cfg.resolved_ram_budget()
    if cfg.cpu_budget:
        opts.autotune.cpu_budget = cfg.cpu_budget
    opts.experimental_optimization.map_parallelization = True
    opts.experimental_optimization.parallel_batch = True
    opts.experimental_optimization.map_and_batch_fusion = True
    size = cfg.private_threadpool_size if threadpool_size is None else threadpool_size
    opts.threading.private_threadpool_size = size
    opts.threading.max_intra_op_parallelism = cfg.max_intra_op_parallelism
    if shard_by != "none":
        # tfpipe shards itself; a strategy's auto-sharding would shard a second time.
        opts.experimental_distribute.auto_shard_policy = tf_.data.experimental.AutoShardPolicy.OFF
    return opts

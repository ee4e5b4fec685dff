"""`tfpipe bench --compare`: the baseline pipeline (tensorflow/tpu-style, `recipe`) timed on
the same files as tfpipe's imagenet pipeline."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from tfpipe.bench import results
from tfpipe.bench.measure import producer
from tfpipe.modalities.images.bench.recipe import recipe_dataset

if TYPE_CHECKING:
    from tfpipe.bench.config import BenchConfig
    from tfpipe.format.manifest import Manifest
    from tfpipe.pipeline.stages.pipeline import Pipeline


def compare(
    pipe: Pipeline,
    manifest: Manifest | None,
    split: str | None,
    cfg: BenchConfig,
    tfpipe_eps: float,
    say: Callable[[str], None],
) -> results.Comparison:
    """The baseline pipeline (tensorflow/tpu-style) on the same files, measured exactly like the
    full pipeline.

    The baseline has no repeat(), and a repeat() after its prefetch would restart it cold every
    epoch, which small data turns into most of the time. Its file list is repeated instead, so
    one epoch outlasts the warm-up and the window, as training on full ImageNet would.
    """
    say("Timing the baseline pipeline (tensorflow/tpu-style) on the same data (--compare)")
    files = list(pipe.files)
    compression = manifest.tf_compression if manifest is not None else ""
    size = int(pipe.dataset().element_spec[0].shape[1])
    examples = manifest.split(split).examples if manifest is not None and split else 0
    needed = 2 * tfpipe_eps * (cfg.warmup + cfg.seconds + 10)
    reps = max(1, math.ceil(needed / examples)) if examples else 1
    rate = producer.measure(
        lambda: recipe_dataset(
            files * reps, batch_size=pipe.batch_size, image_size=size, compression=compression
        ).repeat(),
        examples_per_element=pipe.batch_size,
        seconds=cfg.seconds,
        warmup=cfg.warmup,
    )
    return results.Comparison(tfpipe_eps, rate.examples_per_sec)

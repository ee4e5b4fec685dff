"""tfpipe.build(): tuned tf.data pipelines from tfpipe datasets or foreign TFRecord files.

`plan()` resolves the data (a dataset, or a `Mixture`), the preset and the options by topic
(`Hosts`, `Order`, `Tuning`, `Remainder`, `Integrity`, `DataService`; `PipelineConfig` holds them
all) into a `Pipeline`: an ordered tuple of named `Stage`s (the same list `tfpipe bench` times
prefix by prefix). `build()` is `plan(...).dataset()`. What `skip_corrupt=True` dropped is read
with `skipped(ds)` on the dataset `build()` returned, or `Pipeline.skipped()`, as `SkipCounts`.
"""

from __future__ import annotations

import warnings
from typing import Any

from tfpipe.errors import DefaultWarning, ShardingWarning, TilingWarning
from tfpipe.pipeline.build import build, plan
from tfpipe.pipeline.config import AUTOTUNE, DataService, Integrity, Order, PipelineConfig, Remainder, Tuning
from tfpipe.pipeline.hosts import Hosts
from tfpipe.pipeline.mixture.sources import Mixture
from tfpipe.pipeline.read.skips import SkipCounts
from tfpipe.pipeline.stages.pipeline import Pipeline, skipped
from tfpipe.pipeline.stages.stage import Stage
from tfpipe.pipeline.steps import steps_per_epoch
from tfpipe.presets import Preset, register_preset

__all__ = [
    "AUTOTUNE",
    "DataService",
    "DefaultWarning",
    "Hosts",
    "Integrity",
    "Mixture",
    "Order",
    "Pipeline",
    "PipelineConfig",
    "Preset",
    "Remainder",
    "ShardingWarning",
    "SkipCounts",
    "Stage",
    "TilingWarning",
    "Tuning",
    "build",
    "plan",
    "register_preset",
    "skipped",
    "steps_per_epoch",
]

# Renamed names, still importable for one release with a DeprecationWarning.
_DEPRECATED = {"Skipped": ("SkipCounts", SkipCounts)}


def __getattr__(name: str) -> Any:
    if name in _DEPRECATED:
        new, value = _DEPRECATED[name]
        warnings.warn(
            f"tfpipe.pipeline.{name} is deprecated and will be removed in the next release; "
            f"use tfpipe.pipeline.{new}.",
            DeprecationWarning,
            stacklevel=2,
        )
        return value
    raise AttributeError(f"module 'tfpipe.pipeline' has no attribute {name!r}")

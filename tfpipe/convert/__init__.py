"""Raw data (image folders, tables, text corpora) to sharded TFRecords with a manifest.

`convert` is loaded on first use: a modality's convert half imports this package's base
(`config`, `kind`, `encode`) without loading the core that dispatches to it (`run`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tfpipe.convert.config import ConvertConfig, ShardConfig
from tfpipe.convert.progress import ProgressCallback, Tick
from tfpipe.errors import EmptyClassWarning

if TYPE_CHECKING:
    from tfpipe.convert.run import convert

__all__ = ["ConvertConfig", "EmptyClassWarning", "ProgressCallback", "ShardConfig", "Tick", "convert"]


def __getattr__(name: str) -> Any:
    if name == "convert":
        from tfpipe.convert.run import convert  # the core, loaded when it is first called for

        return convert
    raise AttributeError(f"module 'tfpipe.convert' has no attribute {name!r}")

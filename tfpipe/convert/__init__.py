"""Raw data (image folders, CSV, Parquet) to sharded TFRecords with a manifest."""

from tfpipe.convert.config import ConvertConfig, ShardConfig
from tfpipe.convert.run import EmptyClassWarning, ProgressCallback, Tick, convert

__all__ = ["ConvertConfig", "EmptyClassWarning", "ProgressCallback", "ShardConfig", "Tick", "convert"]

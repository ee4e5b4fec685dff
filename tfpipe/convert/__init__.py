"""Raw data (image folders, CSV, Parquet) to sharded TFRecords with a manifest."""

from tfpipe.convert.config import ConvertConfig, ShardConfig
from tfpipe.convert.run import ProgressCallback, Tick, convert

__all__ = ["ConvertConfig", "ProgressCallback", "ShardConfig", "Tick", "convert"]

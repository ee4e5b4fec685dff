"""Raw data (image folders, CSV, Parquet) to sharded TFRecords with a manifest."""

from tfpipe.convert.config import ConvertConfig, ShardConfig
from tfpipe.convert.run import Tick, convert

__all__ = ["ConvertConfig", "ShardConfig", "Tick", "convert"]

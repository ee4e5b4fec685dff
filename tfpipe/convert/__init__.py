"""Raw data (image folders, CSV, Parquet) to sharded TFRecords with a manifest."""

from tfpipe.convert.config import ConvertConfig, ShardConfig
from tfpipe.convert.progress import ProgressCallback, Tick
from tfpipe.convert.run import convert
from tfpipe.errors import EmptyClassWarning

__all__ = ["ConvertConfig", "EmptyClassWarning", "ProgressCallback", "ShardConfig", "Tick", "convert"]

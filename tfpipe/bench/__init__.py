"""`tfpipe bench`: is training input-bound? The library side; the CLI only renders.

Example:
  >>> import tfpipe
  >>> report = tfpipe.bench(pipeline="imagenet", step_time_ms=120, batch_size=256)
  >>> report.verdict, report.bottleneck.stage  # e.g. ('highly_input_bound', 'decode')
"""

from tfpipe.bench.config import BenchConfig
from tfpipe.bench.judge.report import Report
from tfpipe.bench.run import bench

__all__ = ["BenchConfig", "Report", "bench"]

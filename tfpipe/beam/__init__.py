"""tfpipe on Apache Beam: `tfpipe convert --engine beam`, and `WriteDataset` for your own pipelines.

Apache Beam is an optional extra (`pip install "tfpipe[beam]"`). Importing this package does
not import it; using `WriteDataset` or the Beam engine does, and says which extra to install
when it is missing.

Example:
  >>> import apache_beam as beam, tfpipe.beam
  >>> with beam.Pipeline() as p:
  ...     p | beam.Create(rows) | tfpipe.beam.WriteDataset("gs://bucket/clicks", label="clicked")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__all__ = ["WriteDataset"]

if TYPE_CHECKING:
    from tfpipe.beam.write import WriteDataset


def __getattr__(name: str) -> type[WriteDataset]:
    if name == "WriteDataset":
        from tfpipe.beam.write import WriteDataset  # Apache Beam, ~2 s to import: on first use

        return WriteDataset
    raise AttributeError(f"module 'tfpipe.beam' has no attribute {name!r}")

"""The tables modality: CSV, Parquet, Arrow or JSON Lines files converted into one record a row,
their schema inferred (convert/), read by the tabular preset (preset.py: batched, then parsed a
batch at a time), benched on a synthetic mixed-type table (bench/)."""

from __future__ import annotations

from tfpipe.bench.measure.models import TABLE_MODELS
from tfpipe.modalities.modality import BenchHalf, Modality
from tfpipe.modalities.tables import summary
from tfpipe.modalities.tables.bench import data
from tfpipe.modalities.tables.convert.kind import TABLES
from tfpipe.modalities.tables.preset import TABULAR

BENCH = BenchHalf(
    # A common per-accelerator batch for table models.
    default_batch=1024,
    models=TABLE_MODELS,
    # A billion table rows a second is ~150 GB/s, beyond a host's memory bandwidth.
    max_consumer_rate=1e9,
    synthetic=data.SYNTHETIC,
    noun="a table",
    without_manifest=data.without_manifest,
    folder_advice=lambda path: data.FOLDER_ADVICE,
    raw=data.raw,
    raw_precedence=1,
    convert_advice=data.convert_advice,
)

MODALITY = Modality(name=TABLES.name, convert=TABLES, preset=TABULAR, bench=BENCH, summary=summary.converted)

"""What bench reads of tables: the synthetic mixed-type table generated when no data is given,
raw table files named for what they are, and why records without a manifest cannot be benched
(the tabular preset takes its schema and label from one)."""

from __future__ import annotations

import os
import posixpath
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tfpipe import storage
from tfpipe.format.manifest import MANIFEST_NAME
from tfpipe.modalities.modality import Synthetic
from tfpipe.modalities.tables.convert.read import TABLE_SUFFIXES

if TYPE_CHECKING:
    from tfpipe.bench.measure.synthetic import SyntheticSpec

TABLE_COLUMNS = 40  # the tabular benchmark's float-heavy 40-column table
CONVERT = "tfpipe convert TABLE DEST --label COLUMN"


def generate(spec: SyntheticSpec, raw: str) -> str:
    """A `spec.examples`-row table of TABLE_COLUMNS mixed-type columns, as Parquet in `raw`."""
    from tfpipe.synthetic import tables  # numpy, loaded when bench generates a table

    os.makedirs(raw, exist_ok=True)
    df = tables.make_table(spec.examples, seed=spec.seed, columns=TABLE_COLUMNS)
    return tables.write_table(df, os.path.join(raw, "table.parquet"))


SYNTHETIC = Synthetic(
    examples=100_000,
    shards=8,
    generate=generate,
    describe=lambda spec: ("Generating", f"synthetic table rows ({TABLE_COLUMNS} columns)"),
    convert_options={"label": "label"},
)


def raw(path: str, names: Sequence[str] | None, asked: bool) -> str | None:
    """ "a CSV table file", "a Parquet table file", "a folder of CSV and Parquet table files";
    None when `path` holds no table. On gs:// a file is named by its name alone."""
    if names is None:
        head = b"" if storage.is_gcs(path) else _head(path)
        fmt = "parquet" if head == b"PAR1" else TABLE_SUFFIXES.get(_suffix(path))
        return f"a {'Parquet' if fmt == 'parquet' else 'CSV'} table file" if fmt else None
    tables = sorted({TABLE_SUFFIXES[_suffix(n)] for n in names if _suffix(n) in TABLE_SUFFIXES})
    if not tables:
        return None
    kinds = " and ".join("CSV" if t == "csv" else "Parquet" for t in tables)
    return f"a folder of {kinds} table files"


def without_manifest(raw_path: str, what: str) -> str:
    return (
        f"{raw_path} {what} without a {MANIFEST_NAME} manifest, and the tabular "
        "pipeline takes its schema and label from one: pass a tfpipe "
        f"dataset directory, or convert the raw table with `{CONVERT}`."
    )


FOLDER_ADVICE = f"pass a tfpipe dataset directory, or convert the raw table with `{CONVERT}`."


def convert_advice(raw_path: str, what: str) -> str:
    return (
        f"{raw_path} is {what}, not a tfpipe dataset: run `tfpipe convert {raw_path} DEST --label COLUMN` "
        "first, then `tfpipe bench --data DEST --pipeline tabular`."
    )


def _suffix(name: str) -> str:
    return posixpath.splitext(name)[1].lower()


def _head(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read(4)

"""Text in a column of a Parquet or Arrow IPC file, as Hugging Face `datasets` writes them
(`Dataset.to_parquet`, `save_to_disk`'s Arrow stream files) and pyarrow reads them.

A document is a row: its text a string column (`text_field`), its label another column. A
`ClassLabel` label's names come from the file's own `huggingface` schema metadata (datasets
writes it into every file it saves), or from a saved folder's `dataset_info.json` (`hfsaved`).
Rows are read from any row on: a Parquet file skips the row groups before it unread, an Arrow
file (memory-mapped when local) slices.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from tfpipe.convert.formats import arrowfile, hfsaved, parquetfile
from tfpipe.errors import DataError

if TYPE_CHECKING:
    import pyarrow as pa  # imported where used
    import pyarrow.parquet as pq

BATCH_ROWS = 1024
"""Rows read at a time."""
Cell = tuple[bytes | None, Any, int]
"""A row's text (UTF-8 bytes, None for a null), its label as stored, and its 0-based row."""


def declared_labels(path: str, kind: str, column: str) -> tuple[str, ...] | None:
    """The class names a Parquet or Arrow file declares for `column` (a `ClassLabel` in its
    `huggingface` schema metadata), or None."""
    return hfsaved.class_names(hfsaved.schema_features(_schema(path, kind).metadata), column)


def _schema(path: str, kind: str) -> pa.Schema:
    return parquetfile.open_file(path).schema_arrow if kind == "parquet" else arrowfile.open_file(path).schema


def cells(path: str, kind: str, text_field: str, label: str | None, start: int = 0) -> Iterator[Cell]:
    """The rows of a Parquet ("parquet") or Arrow ("arrow") file from row `start` on.

    Raises:
      DataError: a missing column, a text column that is not a string column, or a damaged file.
    """
    import pyarrow as pa

    columns = [text_field] + ([label] if label else [])
    if kind == "parquet":
        pf = parquetfile.open_file(path)
        schema, table = pf.schema_arrow, None
    else:
        table = arrowfile.open_file(path)
        schema = table.schema
    _check_columns(path, schema, columns, text_field)
    try:
        if table is None:
            yield from _parquet_rows(pf, columns, label, start)
        else:
            yield from _rows(table.select(columns).slice(start).to_batches(BATCH_ROWS), label, start)
    except (pa.ArrowException, OSError) as e:
        what = "Parquet data whose pages pass their checksums" if table is None else "Arrow IPC data"
        raise DataError(f"{path}: expected {what}. Received: {e}") from None


def _check_columns(path: str, schema: pa.Schema, columns: list[str], text_field: str) -> None:
    import pyarrow as pa

    for name, what in zip(columns, ("text", "label"), strict=False):
        if name not in schema.names:
            flag = "--text-field" if what == "text" else "--label"
            raise DataError(
                f"{path}: expected the {what} in column {name!r} ({flag}). Received: columns {schema.names[:10]}"
            )
    kind = schema.field(text_field).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise DataError(f"{path}: expected text (a string column) in column {text_field!r}. Received: {kind}")


def _parquet_rows(pf: pq.ParquetFile, columns: list[str], label: str | None, start: int) -> Iterator[Cell]:
    """Rows from `start` on; the row groups before the one that holds it are not read."""
    groups: list[int] = []
    row = 0
    for g in range(pf.metadata.num_row_groups):
        n = pf.metadata.row_group(g).num_rows
        if row + n > start or groups:
            groups.append(g)
        else:
            row += n
    if not groups:
        return
    batches = pf.iter_batches(batch_size=BATCH_ROWS, columns=columns, row_groups=groups)
    yield from _rows(_skipped(batches, start - row), label, start)


def _skipped(batches: Iterator[Any], skip: int) -> Iterator[Any]:
    """`batches` without their first `skip` rows."""
    for batch in batches:
        if skip >= batch.num_rows:
            skip -= batch.num_rows
            continue
        yield batch.slice(skip) if skip else batch
        skip = 0


def _rows(batches: Iterator[Any], label: str | None, start: int) -> Iterator[Cell]:
    import pyarrow as pa

    row = start
    for batch in batches:
        n = batch.num_rows
        texts = batch.column(0).cast(pa.large_binary()).to_pylist()  # decoded by the reader, by row
        labels = batch.column(1).to_pylist() if label else [None] * n
        for i in range(n):
            yield texts[i], labels[i], row + i
        row += n

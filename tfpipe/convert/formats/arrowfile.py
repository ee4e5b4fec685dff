"""Arrow IPC files as the table reader sees them: Feather v2 (the Arrow IPC file format, what
`DataFrame.to_feather()` writes), Feather v1, and Arrow IPC streams. Their columns carry their
types, as Parquet's do, and are read the same way (`parquetfile.to_frame`): every stored column
is a column, integers and bools nullable, a float NaN kept apart from a null.

pyarrow reads the whole file in one call (memory-mapped when local), and the rows are handed
out in slices of `chunk_rows`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from tfpipe import storage
from tfpipe.convert.formats import parquetfile
from tfpipe.errors import DataError

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa  # imported where used

SUFFIXES = (".arrow", ".feather", ".arrows", ".ipc")
_STREAM = b"\xff\xff\xff\xff"  # an IPC stream's first message starts with this continuation marker


def open_file(path: str) -> pa.Table:
    """The file as a `pyarrow.Table`.

    Raises:
      DataError: the file is not Arrow IPC data, or names a column twice.
    """
    import pyarrow as pa
    import pyarrow.feather as feather

    local, head = not storage.is_gcs(path), b""
    try:
        with storage.open_read(path) as f:  # on gs://, one download, read from memory or disk
            head = f.read(8)
            f.seek(0)
            source = pa.memory_map(path) if local else pa.py_buffer(f.read())
            if head.startswith(_STREAM):
                with pa.ipc.open_stream(source) as reader:
                    table = reader.read_all()
            else:
                table = feather.read_table(source, memory_map=local)
    except (pa.ArrowException, OSError) as e:
        raise DataError(
            f"{path}: expected an Arrow IPC file (Feather v1 or v2) or stream. Received: a file "
            f"pyarrow cannot read as one (it starts with {head!r}): {' '.join(str(e).split())}"
        ) from None
    parquetfile.check_unique_names(path, table.schema.names)
    return table


def batches(table: pa.Table, chunk_rows: int) -> Iterator[pd.DataFrame]:
    """The table's rows as DataFrames of `chunk_rows` rows (the last one shorter)."""
    for start in range(0, table.num_rows, chunk_rows):
        yield parquetfile.to_frame(table.slice(start, chunk_rows))

"""The tables modality's encoding work: a chunk of rows (a pandas DataFrame) -> one Example a
row, nulls filled where the column has a mask. Pure: the same task gives the same bytes."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from tfpipe.convert.encode import Encoded, EncodedPiece, Work
from tfpipe.format.codec import encode_columns
from tfpipe.format.schema import Field, Schema
from tfpipe.modalities.tables.convert.infer import null_value_error

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd  # a table's workers import it where they read


@dataclasses.dataclass(frozen=True, slots=True)
class TableTask(Work):
    """A chunk of rows (a pandas DataFrame indexed by row number within its file `where`),
    and the index of its first row among all rows written."""

    frame: pd.DataFrame
    first_row: int
    schema: Schema
    where: str

    def encode(self, shard: int, first: int) -> EncodedPiece:
        return EncodedPiece(shard, first, encode_table(self))


def column_values(
    frame: pd.DataFrame, field: Field, first_row: int, where: str
) -> tuple[list[bytes] | np.ndarray, np.ndarray | None]:
    """A column as plain Python values, nulls filled with a default, plus the null mask.

    Raises:
      DataError: a null in a column without a mask, naming the column and its row in the file.
    """
    col = frame[field.name]
    null = col.isna().to_numpy()
    if null.any() and not field.has_mask:
        raise null_value_error(where, int(frame.index[null.argmax()]), field.name)
    if field.dtype == "bytes":
        values = [b"" if n else str(v).encode("utf-8") for v, n in zip(col.tolist(), null, strict=True)]
    elif field.dtype == "float32":
        values = col.to_numpy(dtype="float64", na_value=0.0)
    else:
        values = col.to_numpy(dtype="int64", na_value=0)
    return values, (null.astype("int64") if field.has_mask else None)


def encode_table(task: TableTask) -> list[Encoded]:
    columns: dict[str, list[bytes] | np.ndarray] = {}
    for field in task.schema.fields:
        columns[field.name], mask = column_values(task.frame, field, task.first_row, task.where)
        if mask is not None:
            columns[field.mask_name] = mask
    return [Encoded(record, None, 0) for record in encode_columns(task.schema, columns)]

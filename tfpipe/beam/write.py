"""`WriteDataset`: the last step of a user's own Beam pipeline, writing a tfpipe dataset.

    records | tfpipe.beam.WriteDataset("gs://bucket/clicks", label="clicked", num_shards=256)

The input holds records as dicts (one record each) or pandas DataFrames (a row each). The
output is a normal tfpipe dataset: shards named `{split}-{index:05d}-of-{count:05d}` and a
`tfpipe.json` that `tfpipe.build()` and `tfpipe inspect --verify` read.

A PCollection has no order, so the plan is made from the records themselves: the schema is
combined from every record's values, each record goes to the shard its crc32c picks, and a
shard holds its records sorted by their bytes. The output therefore depends only on the
records, whatever the runner's bundling, retries or duplicate attempts. Each shard is
committed once (`storage.commit_file`: the same bytes already there are success), and the
manifest is written last, once every shard is. A worker holds one shard's records while it
sorts them (about `shard_size`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from tfpipe import storage
from tfpipe.beam.deps import require_beam
from tfpipe.convert.config import DEFAULT_SHARD_SIZE, ShardConfig, parse_size
from tfpipe.convert.spool import local_spool_dir
from tfpipe.convert.writer import ShardWriter
from tfpipe.errors import DataError, DestinationError
from tfpipe.format.codec import encode_example
from tfpipe.format.manifest import MANIFEST_NAME, Checksum, Manifest, ShardInfo, Split
from tfpipe.format.schema import Field, Schema
from tfpipe.format.shardnames import shard_name

if TYPE_CHECKING:
    from apache_beam.pvalue import PCollection
    from pandas import DataFrame

beam = require_beam()

_DTYPE = {"int": "int64", "bool": "int64", "float": "float32", "bytes": "bytes"}
_DEFAULT = {"int64": 0, "float32": 0.0, "bytes": b""}


# ---- the schema, combined from the records ----


def _is_null(v: object) -> bool:
    if v is None:
        return True
    try:
        import pandas as pd

        return v is pd.NA or v is pd.NaT or (isinstance(v, float) and math.isnan(v))
    except ImportError:
        return isinstance(v, float) and math.isnan(v)


def _kind(column: str, v: object) -> tuple[str, tuple[int, ...]]:
    """A value's kind ("null", "bool", "int", "float", "bytes") and shape."""
    if _is_null(v):
        return "null", ()
    if isinstance(v, (str, bytes)):
        return "bytes", ()
    import numpy as np

    a = np.asarray(v)
    code = a.dtype.kind
    kind = {"b": "bool", "i": "int", "u": "int", "f": "float", "U": "bytes", "S": "bytes"}.get(code)
    if kind is None and code == "O" and all(isinstance(x, (str, bytes)) for x in a.ravel().tolist()):
        kind = "bytes"
    if kind is None or (a.ndim == 0 and not isinstance(a.item(), (numbers.Number, str, bytes))):
        raise DataError(
            f"column {column!r}: expected numbers, booleans, text or bytes, or fixed-shape "
            f"arrays of them. Received: {type(v).__name__} {str(v)[:60]!r}"
        )
    return kind, tuple(a.shape)


@dataclasses.dataclass(frozen=True, slots=True)
class _ColumnKind:
    kind: str
    shape: tuple[int, ...]
    nulls: bool


def _fold(column: str, a: _ColumnKind, b: _ColumnKind) -> _ColumnKind:
    nulls = a.nulls or b.nulls
    if a.kind == "null":
        return dataclasses.replace(b, nulls=nulls)
    if b.kind == "null":
        return dataclasses.replace(a, nulls=nulls)
    kind = a.kind if a.kind == b.kind else "float" if {a.kind, b.kind} == {"int", "float"} else None
    if kind is None or a.shape != b.shape:
        raise DataError(
            f"column {column!r}: expected one type and shape per column. Received: {a.kind} "
            f"{list(a.shape)} in one record and {b.kind} {list(b.shape)} in another"
        )
    return _ColumnKind(kind, a.shape, nulls)


_ABSENT = _ColumnKind("null", (), True)  # a column a record lacks is null in that record


class _SchemaFn(beam.CombineFn):
    """Combines every record's column kinds: (records seen, {column: _ColumnKind})."""

    def create_accumulator(self) -> tuple[int, dict[str, _ColumnKind]]:
        return 0, {}

    def add_input(self, acc: tuple[int, dict[str, _ColumnKind]], row: dict[str, Any]) -> tuple[int, dict]:
        kinds = {}
        for column, value in row.items():
            kind, shape = _kind(column, value)
            kinds[column] = _ColumnKind(kind, shape, kind == "null")
        return self.merge_accumulators([acc, (1, kinds)])

    def merge_accumulators(self, accs: Iterable[tuple[int, dict[str, _ColumnKind]]]) -> tuple[int, dict]:
        seen = [a for a in accs if a[0]]  # an accumulator of no records says nothing about columns
        out: dict[str, _ColumnKind] = {}
        for column in sorted({c for _, kinds in seen for c in kinds}):
            for _, kinds in seen:
                k = kinds.get(column, _ABSENT)
                out[column] = _fold(column, out[column], k) if column in out else k
        return sum(n for n, _ in seen), out

    def extract_output(self, acc: tuple[int, dict[str, _ColumnKind]]) -> dict[str, _ColumnKind]:
        return acc[1]


def schema_of(kinds: dict[str, _ColumnKind], label: str | None, missing: str) -> Schema:
    """The Schema of the combined kinds: columns in sorted order, masks for nullable ones.

    Raises:
      DataError: a column with nulls under missing="error", a null label, or no value at all.
    """
    fields = []
    for name in sorted(kinds):
        k = kinds[name]
        if k.kind == "null":
            raise DataError(f"column {name!r}: expected values. Received: only nulls, so its type is unknown")
        if k.nulls and (missing != "fill" or name == label):
            what = f"the label column {name!r}" if name == label else f"column {name!r}"
            raise DataError(
                f"{what} holds nulls. Expected a value in every record: pass "
                f"missing='fill' to write a default plus a '{name}/missing' mask (never "
                "for the label)"
            )
        fields.append(Field(name, _DTYPE[k.kind], k.shape, has_mask=k.nulls))
    return Schema(tuple(fields), label=label)


# ---- records ----


def _rows(element: object) -> Iterator[dict[str, Any]]:
    """A dict as itself; a DataFrame as one dict per row."""
    if isinstance(element, dict):
        yield element
        return
    if hasattr(element, "to_dict") and hasattr(element, "columns"):
        for row in element.to_dict("records"):
            yield {str(k): v for k, v in row.items()}
        return
    raise DataError(f"WriteDataset: expected dicts or pandas DataFrames. Received: {type(element).__name__}")


def _encode(row: dict[str, Any], schema: Schema) -> bytes:
    extra = sorted(set(row) - set(schema.names))
    if extra:
        raise DataError(f"WriteDataset: a record holds columns {extra} that the schema {schema.names} lacks")
    out: dict[str, Any] = {}
    for f in schema.fields:
        value = row.get(f.name)
        null = _is_null(value)
        default = [_DEFAULT[f.dtype]] * math.prod(f.shape) if f.shape else _DEFAULT[f.dtype]
        out[f.name] = default if null else value
        if f.has_mask:
            out[f.mask_name] = int(null)
    return encode_example(out, schema)


# ---- shards and the manifest ----


@dataclasses.dataclass(frozen=True, slots=True)
class _Target:
    dest: str
    split: str
    compression: str


def _sum_pairs(pairs: Iterable[tuple[int, int]]) -> tuple[int, int]:
    """(records, bytes) summed; partial sums come back in as pairs too."""
    records = total = 0
    for n, b in pairs:
        records, total = records + n, total + b
    return records, total


def _count(sizes: tuple[int, int], num_shards: int | None, shard_size: int) -> int:
    records, total = sizes
    return ShardConfig(num_shards=num_shards, shard_size=shard_size).count_for(max(records, 1), total)


def _assign(record: bytes, n: int) -> tuple[int, bytes]:
    checksum = Checksum()
    checksum.update(record)
    return int(str(checksum).split(":")[1], 16) % n, record


def _write(keyed: tuple[int, Iterable[bytes | None]], n: int, target: _Target) -> ShardInfo:
    """Writes shard `index` of `n`: its records sorted by their bytes, committed once."""
    index, records = keyed
    name = shard_name(target.split, index, n, target.compression)
    spool = local_spool_dir(target.dest)
    writer = ShardWriter(target.dest, name, target.compression, spool_dir=spool)
    try:
        for record in sorted(r for r in records if r is not None):
            writer.write(record)
        return writer.commit().info  # the same bytes already there (a repeated step) is success
    except BaseException:
        writer.abort()
        raise
    finally:
        if storage.is_gcs(target.dest):
            shutil.rmtree(spool, ignore_errors=True)


def _save_manifest(
    shards: list[ShardInfo], schema: Schema, target: _Target, missing: str, options: dict[str, Any]
) -> Manifest:
    split = Split(tuple(sorted(shards, key=lambda s: s.name)), source="beam:WriteDataset", options=options)
    manifest = Manifest(
        target.dest,
        "table",
        schema,
        compression=target.compression,
        splits={target.split: split},
        missing=missing,
    )
    data = json.dumps(manifest.to_json(), indent=1).encode() + b"\n"
    with tempfile.NamedTemporaryFile(
        dir=None if storage.is_gcs(target.dest) else target.dest,
        prefix=storage.temp_name(MANIFEST_NAME),
        delete=False,
    ) as f:
        f.write(data)
    storage.commit_file(f.name, storage.join(target.dest, MANIFEST_NAME))  # a repeated step: the same bytes
    return manifest


class WriteDataset(beam.PTransform):
    """Writes a PCollection of dicts or DataFrames as a tfpipe dataset at `dest`.

    Args:
      dest: the dataset folder, local or gs://; it must not hold a manifest yet.
      split: the split name and shard prefix.
      label: the label column, if any (never null).
      num_shards: an exact shard count; else by `shard_size` from the encoded size.
      shard_size: target bytes per shard, e.g. "128MiB".
      compression: "none" or "gzip".
      missing: nulls fail the pipeline ("error") or are filled with a default plus a
        `<column>/missing` mask ("fill").

    Returns (from expand):
      A PCollection holding the committed Manifest, once.

    Example:
      >>> rows | tfpipe.beam.WriteDataset("gs://bucket/clicks", label="clicked", num_shards=64)
    """

    def __init__(
        self,
        dest: str,
        *,
        split: str = "train",
        label: str | None = None,
        num_shards: int | None = None,
        shard_size: int | str = DEFAULT_SHARD_SIZE,
        compression: str = "none",
        missing: str = "error",
    ):
        super().__init__()
        cfg = ShardConfig(
            split=split, num_shards=num_shards, shard_size=parse_size(shard_size), compression=compression
        )
        if missing not in ("error", "fill"):
            raise DataError(f"missing must be 'error' or 'fill'. Received: missing={missing!r}")
        self.target = _Target(str(dest).rstrip("/"), cfg.split, cfg.compression)
        # PTransform.label is the step's name in the graph; the label column needs another attribute.
        self.cfg, self.label_column, self.missing = cfg, label, missing

    def expand(self, pcoll: PCollection[dict[str, object] | DataFrame]) -> PCollection[Manifest]:
        if Manifest.find(self.target.dest) is not None:
            raise DestinationError(
                f"{self.target.dest}: expected a new destination for WriteDataset. "
                "Received: "
                f"a folder that already holds a {MANIFEST_NAME}; write elsewhere"
            )
        storage.makedirs(self.target.dest)
        rows = pcoll | "rows" >> beam.FlatMap(_rows)
        kinds = rows | "kinds" >> beam.CombineGlobally(_SchemaFn())
        schema = kinds | "schema" >> beam.Map(schema_of, self.label_column, self.missing)
        records = rows | "encode" >> beam.Map(_encode, beam.pvalue.AsSingleton(schema))
        sizes = (
            records
            | "sizes" >> beam.Map(lambda r: (1, len(r) + 16))
            | "total" >> beam.CombineGlobally(_sum_pairs)
        )
        n = sizes | "count" >> beam.Map(_count, self.cfg.num_shards, self.cfg.shard_size)
        every = n | "every shard" >> beam.FlatMap(lambda k: [(i, None) for i in range(k)])
        keyed = records | "assign" >> beam.Map(_assign, beam.pvalue.AsSingleton(n))
        shards = (
            (keyed, every)
            | "with empty" >> beam.Flatten()
            | "by shard" >> beam.GroupByKey()
            | "write" >> beam.Map(_write, beam.pvalue.AsSingleton(n), self.target)
        )
        options = {
            "split": self.cfg.split,
            "num_shards": self.cfg.num_shards,
            "shard_size": self.cfg.shard_size,
            "compression": self.cfg.compression,
            "label": self.label_column,
            "missing": self.missing,
            "engine": "beam",
        }
        return (
            shards
            | "all shards" >> beam.combiners.ToList()
            | "manifest"
            >> beam.Map(_save_manifest, beam.pvalue.AsSingleton(schema), self.target, self.missing, options)
        )

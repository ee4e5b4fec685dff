"""tf.train.Example <-> bytes, in pure Python (no TensorFlow); the TFRecord framing around
them is `tfpipe.format.tfrecord`.

Conversion workers encode without importing TensorFlow: TF import costs ~3 s per process and
is not fork-safe. The wire format is small and stable:

- `tf.train.Example` protobuf: Example{1: Features{1: map<string, Feature>}}, Feature is a
  oneof of BytesList(1), FloatList(2, packed float32) and Int64List(3, packed varint).

The round-trip contract: `tf.io.parse_example(encode_example(row, schema), schema.parse_spec())`
returns `row`, and `format.decode.decode_example(encode_example(row))` returns it too
(tests/format/test_codec.py).
"""

from __future__ import annotations

import functools
import itertools
import math
import numbers
import struct
from collections.abc import Callable, Mapping, Sequence, Sized
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar, cast

from tfpipe.errors import ConfigError, DataError
from tfpipe.format.schema import Field, Schema

if TYPE_CHECKING:
    import numpy as np  # imported where it is used: a worker that encodes rows one by one needs none

# A feature's value as the wire holds it: bytes (BytesList), a float (FloatList), an int (Int64List).
Value = bytes | float | int
# A table's column as `encode_columns` takes it: a sequence of values, or a 1-D numpy array.
Column: TypeAlias = "Sequence[object] | np.ndarray"
S = TypeVar("S", bound=Sized)


def _varint_slow(n: int) -> bytes:
    n &= 0xFFFFFFFFFFFFFFFF  # negative int64 -> two's complement, 10 bytes, as protobuf does
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL_VARINTS = [_varint_slow(i) for i in range(1 << 14)]  # every 1- and 2-byte value


def _varint(n: int) -> bytes:
    return _SMALL_VARINTS[n] if 0 <= n < 16384 else _varint_slow(n)


@functools.lru_cache(maxsize=4096)
def _key(name: str) -> bytes:
    """A feature name as its encoded map-entry key field (the same few names, every record)."""
    return _len_delimited(0x0A, name.encode("utf-8"))


def _len_delimited(tag: int, payload: bytes) -> bytes:
    return bytes((tag,)) + _varint(len(payload)) + payload


def _feature_pieces(dtype: str, values: Sequence[Value] | PackedInt64) -> tuple[list[bytes], int]:
    """A Feature message as pieces to join once, and its length. Big bytes values are never
    copied while nesting: a 100 KB JPEG is copied once, by the final join."""
    if dtype == "bytes":
        pieces: list[bytes] = []
        inner = 0
        for v in cast(Sequence[bytes], values):
            head = b"\x0a" + _varint(len(v))
            pieces += (head, v)
            inner += len(head) + len(v)
        head = b"\x0a" + _varint(inner)
        return [head, *pieces], len(head) + inner
    if isinstance(values, PackedInt64):
        packed = values.data
    elif dtype == "float32":
        packed = struct.pack(f"<{len(values)}f", *values)
    else:
        packed = b"".join(_varint(int(v)) for v in cast(Sequence[int], values))
    inner = _len_delimited(0x0A, packed) if values else b""
    whole = _len_delimited(0x12 if dtype == "float32" else 0x1A, inner)
    return [whole], len(whole)


class PackedInt64:
    """An int64 list already encoded as packed varints, and how many values it holds: a value
    `encode_example` takes for a list field (see `packed_int64_lists`)."""

    __slots__ = ("count", "data")

    def __init__(self, data: bytes, count: int) -> None:
        self.data, self.count = data, count

    def __len__(self) -> int:
        return self.count


def _varint_array(values: np.ndarray | Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """(uint8 array of the packed varints, each value's byte width) of a 1-D integer array:
    the bytes `_varint` gives one value at a time (two's complement for negatives), at once."""
    import numpy as np

    u = np.ascontiguousarray(values).astype(np.int64, copy=False).view(np.uint64)
    widths = np.ones(len(u), dtype=np.int64)
    for k in range(1, 10):
        widths += u >= np.uint64(1 << (7 * k))
    ends = np.cumsum(widths)
    out = np.empty(int(ends[-1]) if len(u) else 0, dtype=np.uint8)
    starts = ends - widths
    for k in range(int(widths.max()) if len(u) else 0):
        sel = widths > k
        byte = (u[sel] >> np.uint64(7 * k)) & np.uint64(0x7F)
        more = (widths[sel] > k + 1).astype(np.uint64) << np.uint64(7)
        out[starts[sel] + k] = (byte | more).astype(np.uint8)
    return out, widths


def varints(values: np.ndarray | Sequence[int]) -> bytes:
    """A 1-D integer array as packed protobuf varints."""
    return _varint_array(values)[0].tobytes()


def packed_int64_lists(lists: Sequence[Sequence[int]]) -> list[PackedInt64]:
    """Many int64 lists (e.g. each document's token ids) packed at once, one numpy pass for
    all of them: per list, numpy's call overhead would cost more than the encoding.

    Raises:
      DataError: a value is not an int64.
    """
    import numpy as np

    counts = [len(v) for v in lists]
    try:
        flat = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.int64, count=sum(counts))
    except (OverflowError, TypeError, ValueError):
        for values in lists:  # refuses the first value that is not an int64, by value
            for v in values:
                _int_value("int64 list", v)
        raise
    data, widths = _varint_array(flat)
    ends = np.cumsum(widths)
    byte_ends = [0, *(int(ends[e - 1]) if e else 0 for e in itertools.accumulate(counts))]
    raw = data.tobytes()
    return [PackedInt64(raw[a:b], n) for a, b, n in zip(byte_ends, byte_ends[1:], counts, strict=False)]


def _packed_int64(name: str, value: Any) -> PackedInt64 | None:  # any value a row holds
    """A numpy integer array for an int64 list, encoded at once; None for anything else (which
    takes the checked path one value at a time)."""
    if isinstance(value, PackedInt64):
        return value
    dtype = getattr(value, "dtype", None)
    if dtype is None or dtype.kind not in "iu" or getattr(value, "ndim", 0) != 1:
        return None
    if dtype.kind == "u" and len(value) and int(value.max()) > _INT64_MAX:
        return None  # refused, by value, on the checked path
    return PackedInt64(varints(value), len(value))


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_FLOAT32_INF_AT = (2 - 2**-24) * 2.0**127
"""The smallest magnitude that float32 rounds to inf (half an ulp above its largest value)."""


def _received(v: object) -> str:
    return f"{type(v).__name__} {str(v)[:60]!r}"


def _feature(name: str, row: int | None) -> str:
    return f"Feature {name!r}" + ("" if row is None else f", row {row}")


def _bytes_value(name: str, v: object, row: int | None = None) -> bytes:
    if isinstance(v, str):
        return v.encode("utf-8")
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    # bytes(5) would be five NUL bytes: refuse rather than guess what an int means as bytes.
    raise DataError(f"{_feature(name, row)}: expected bytes or str. Received: {_received(v)}")


def _float_value(name: str, v: object, row: int | None = None) -> float:
    if isinstance(v, (str, bytes)) or not isinstance(v, numbers.Real):
        raise DataError(f"{_feature(name, row)}: expected a float32 number. Received: {_received(v)}")
    f = float(v)
    if math.isfinite(f) and abs(f) >= _FLOAT32_INF_AT:
        raise DataError(
            f"{_feature(name, row)}: expected a number float32 holds (at most ±3.4028235e38). "
            f"Received: {v!r}, which float32 would store as inf"
        )
    return f


def _int_value(name: str, v: object, row: int | None = None) -> int:
    if isinstance(v, numbers.Integral):
        iv = int(v)
    elif isinstance(v, numbers.Real) and not isinstance(v, (str, bytes)) and float(v).is_integer():
        iv = int(v)  # 3.0 is the int 3; 2.7 is refused, never truncated
    else:
        raise DataError(f"{_feature(name, row)}: expected an int64. Received: {_received(v)}")
    if not _INT64_MIN <= iv <= _INT64_MAX:
        raise DataError(f"{_feature(name, row)}: expected an int64. Received: {v!r}, outside int64's range")
    return iv


def _as_list(name: str, dtype: str, value: object) -> list[Value]:  # any value a row holds
    if isinstance(value, (bytes, bytearray, memoryview, str, int, float)) or not hasattr(value, "__len__"):
        values = [value.item() if hasattr(value, "item") and not isinstance(value, (bytes, str)) else value]
    else:
        import numpy as np

        values = np.asarray(value, dtype=object if dtype == "bytes" else None).ravel().tolist()
    converters: dict[str, Callable[[str, object], Value]] = {"bytes": _bytes_value, "float32": _float_value}
    convert = converters.get(dtype, _int_value)
    return [convert(name, v) for v in values]


def _check_count(field: Field, values: S) -> S:
    if field.variable:
        return values
    want = math.prod(field.shape)  # type: ignore[arg-type]
    if len(values) != want:
        raise DataError(
            f"Feature {field.name!r}: expected {want} value(s) for shape {field.shape}. "
            f"Received: {len(values)}"
        )
    return values


def encode_example(row: Mapping[str, object], schema: Schema) -> bytes:
    """Serializes one record as `tf.train.Example` bytes.

    Args:
      row: feature name -> value (scalar, sequence or numpy array). Features whose field has a
        mask also need `row["<name>/missing"]`.
      schema: the fields, in the order they are written.

    Raises:
      DataError: a value is missing or does not fit its dtype; names the feature.
    """
    entries = []
    for f in schema.fields:
        try:
            value = row[f.name]
        except KeyError:
            raise DataError(f"Record has no value for feature {f.name!r}") from None
        packed = _packed_int64(f.name, value) if f.dtype == "int64" and f.variable else None
        entries.append(
            (
                f.name,
                f.dtype,
                packed if packed is not None else _check_count(f, _as_list(f.name, f.dtype, value)),
            )
        )
        if f.has_mask:
            if f.mask_name not in row:
                raise DataError(
                    f"Record has no value for feature {f.mask_name!r} (the null mask of {f.name!r})"
                )
            mask = _check_count(Field(f.mask_name, "int64"), _as_list(f.mask_name, "int64", row[f.mask_name]))
            entries.append((f.mask_name, "int64", mask))
    pieces: list[bytes] = []
    body_len = 0
    for name, dtype, values in entries:
        feature, feature_len = _feature_pieces(dtype, values)
        key = _key(name)
        value_head = b"\x12" + _varint(feature_len)
        entry_len = len(key) + len(value_head) + feature_len
        entry_head = b"\x0a" + _varint(entry_len)
        pieces += (entry_head, key, value_head, *feature)
        body_len += len(entry_head) + entry_len
    return b"".join([b"\x0a", _varint(body_len), *pieces])


def _entry_prefix(key: bytes, feature_prefix: bytes, payload_len: int) -> bytes:
    """The bytes of a map entry before a scalar payload of `payload_len` bytes."""
    feature_len = len(feature_prefix) + payload_len
    inner_len = len(key) + 1 + len(_varint(feature_len)) + feature_len
    return b"\x0a" + _varint(inner_len) + key + b"\x12" + _varint(feature_len) + feature_prefix


def _fixed_width_entries(prefix: bytes, payload: np.ndarray) -> list[bytes]:
    """prefix + each row of a (n, w) uint8 array, as n bytes objects, without a per-row numpy call."""
    import numpy as np

    n, w = payload.shape
    rows = np.empty((n, len(prefix) + w), dtype=np.uint8)
    rows[:, : len(prefix)] = np.frombuffer(prefix, dtype=np.uint8)
    rows[:, len(prefix) :] = payload
    flat, step = rows.tobytes(), len(prefix) + w
    return [flat[i : i + step] for i in range(0, n * step, step)]


def _items(values: Column, a: np.ndarray) -> list[object]:
    """The values one by one as given: np.asarray([1.0, "x"]) would have made 1.0 a string."""
    return a.tolist() if hasattr(values, "dtype") else list(values)


def _float32_array(name: str, values: Column) -> np.ndarray:
    """A column as little-endian float32, refusing what `_float_value` refuses, by row."""
    import numpy as np

    a = np.asarray(values)
    if a.dtype.kind not in "biuf":
        for i, v in enumerate(_items(values, a)):
            _float_value(name, v, i)  # refuses the first value that is not a number
        a = a.astype(np.float64)  # numbers only, e.g. an object array of Python floats
    with np.errstate(over="ignore"):
        out = a.astype("<f4")
    over = np.flatnonzero(np.isinf(out) & np.isfinite(a))
    if len(over):
        _float_value(name, float(a[over[0]]), int(over[0]))
    return out


def _int64_array(name: str, values: Column) -> np.ndarray:
    """A column as int64, refusing what `_int_value` refuses (fractions, beyond int64), by row."""
    import numpy as np

    a = np.asarray(values)
    if a.dtype.kind in "bi" or (a.dtype.kind == "u" and (a.size == 0 or a.max() <= _INT64_MAX)):
        return a.astype(np.int64)
    if a.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            ok = np.isfinite(a) & (a == np.floor(a)) & (a >= _INT64_MIN) & (a < 2.0**63)
        if ok.all():
            return a.astype(np.int64)
    return np.array([_int_value(name, v, i) for i, v in enumerate(_items(values, a))], dtype=np.int64)


def _scalar_column(name: str, dtype: str, values: Column) -> list[bytes]:
    """The encoded map entries of one scalar column, one per row, vectorised with numpy."""
    import numpy as np

    key = _key(name)
    n = len(values)
    if dtype == "float32":
        payload = _float32_array(name, values).view(np.uint8).reshape(n, 4)
        return _fixed_width_entries(_entry_prefix(key, b"\x12\x06\x0a\x04", 4), payload)
    if dtype == "int64":
        u = _int64_array(name, values).view(np.uint64)
        bits = np.zeros(n, dtype=np.int64)
        rest = u.copy()
        while rest.any():
            bits += rest > 0
            rest >>= np.uint64(7)
        widths = np.maximum(bits, 1)
        out: list[bytes] = [b""] * n
        for w in np.unique(widths):
            idx = np.flatnonzero(widths == w)
            group = u[idx]
            payload = np.empty((len(idx), int(w)), dtype=np.uint8)
            for k in range(int(w)):
                byte = (group >> np.uint64(7 * k)) & np.uint64(0x7F)
                payload[:, k] = byte | (np.uint64(0x80) if k < w - 1 else np.uint64(0))
            fprefix = b"\x1a" + _varint(2 + int(w)) + b"\x0a" + _varint(int(w))
            entries = _fixed_width_entries(_entry_prefix(key, fprefix, int(w)), payload)
            for i, entry in zip(idx.tolist(), entries, strict=True):
                out[i] = entry
        return out
    table = _SMALL_VARINTS
    head = key + b"\x12"
    out = []
    for v in values:
        b = v if isinstance(v, bytes) else _bytes_value(name, v, len(out))
        n1 = len(b)
        bl = b"\x0a" + (table[n1] if n1 < 16384 else _varint(n1)) + b
        n2 = len(bl)
        feature = b"\x0a" + (table[n2] if n2 < 16384 else _varint(n2)) + bl
        n3 = len(feature)
        inner = head + (table[n3] if n3 < 16384 else _varint(n3)) + feature
        n4 = len(inner)
        out.append(b"\x0a" + (table[n4] if n4 < 16384 else _varint(n4)) + inner)
    return out


def encode_columns(schema: Schema, columns: Mapping[str, Column]) -> list[bytes]:
    """Serializes many rows at once, column by column: the same bytes as `encode_example`.

    Args:
      schema: scalar fields only (tables); masks are read from `columns["<name>/missing"]`.
      columns: feature name -> sequence or 1-D array of n values.

    Raises:
      ConfigError: a field of `schema` is not a scalar.
      DataError: a column is missing, has another length than the first, or holds a value
        that does not fit its dtype (names the feature and the row).
    """
    parts = []
    rows = None
    for f in schema.fields:
        if f.shape != ():
            raise ConfigError(
                f"encode_columns handles scalar fields only. Received: {f.name!r} with shape {f.shape}"
            )
        for name, dtype in (
            ((f.name, f.dtype), (f.mask_name, "int64")) if f.has_mask else ((f.name, f.dtype),)
        ):
            if name not in columns:
                raise DataError(f"Columns have no values for feature {name!r}")
            values = columns[name]
            rows = len(values) if rows is None else rows
            if len(values) != rows:
                raise DataError(
                    f"Feature {name!r}: expected {rows} values, one per row. Received: {len(values)}"
                )
            parts.append(_scalar_column(name, dtype, values))
    table = _SMALL_VARINTS
    out = []
    for entries in zip(*parts, strict=True):
        body = b"".join(entries)
        n = len(body)
        out.append(b"\x0a" + (table[n] if n < 16384 else _varint(n)) + body)
    return out

"""`tf.train.Example` bytes back to values, in pure Python (no TensorFlow): what `inspect` and
the tests read, and a text split's documents when they are checked against their tokenizer.
`codec` writes the bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from tfpipe.errors import DataError
from tfpipe.format.codec import Value


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise DataError("Truncated varint in Example bytes")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, int, bytes | int]]:
    pos = 0
    while pos < len(buf):
        key, pos = _read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 2:
            n, pos = _read_varint(buf, pos)
            if pos + n > len(buf):
                raise DataError("Truncated field in Example bytes")
            yield number, wire, buf[pos : pos + n]
            pos += n
        elif wire == 0:
            v, pos = _read_varint(buf, pos)
            yield number, wire, v
        elif wire == 5:
            yield number, wire, buf[pos : pos + 4]
            pos += 4
        else:
            raise DataError(f"Unexpected protobuf wire type {wire} in Example bytes")


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def decode_example(data: bytes) -> dict[str, list[Value]]:
    """Parses `tf.train.Example` bytes into {name: list of values} (bytes, float or int).

    Raises:
      DataError: the bytes are not a well-formed Example.
    """
    try:
        return _decode_example(data)
    except (struct.error, UnicodeDecodeError) as e:
        raise DataError(f"Malformed Example bytes: expected a tf.train.Example. Received: {e}") from None


def _messages(buf: bytes) -> Iterator[tuple[int, bytes]]:
    """(field number, bytes) of each field of a message whose fields are messages or strings."""
    for number, _, value in _fields(buf):
        if not isinstance(value, bytes):
            raise DataError(
                f"Expected a length-delimited field {number} in Example bytes. Received: a varint"
            )
        yield number, value


def _decode_example(data: bytes) -> dict[str, list[Value]]:
    out: dict[str, list[Value]] = {}
    for _, features in _messages(data):
        for _, entry in _messages(features):
            name, feature = "", b""
            for number, value in _messages(entry):
                if number == 1:
                    name = value.decode("utf-8")
                elif number == 2:
                    feature = value
            values: list[Value] = []
            for kind, lst in _messages(feature):
                for _, wire, v in _fields(lst):
                    if isinstance(v, int):  # one unpacked varint
                        values.append(_signed(v))
                    elif kind == 1:
                        values.append(bytes(v))
                    elif kind == 2:
                        values.extend(
                            struct.unpack(f"<{len(v) // 4}f", v) if wire == 2 else struct.unpack("<f", v)
                        )
                    else:
                        pos = 0
                        while pos < len(v):
                            x, pos = _read_varint(v, pos)
                            values.append(_signed(x))
            out[name] = values
    return out

"""TFRecord framing in pure Python (no TensorFlow): uint64 length, uint32 masked
crc32c(length), data, uint32 masked crc32c(data). What the data is (a tf.train.Example) is
`tfpipe.format.codec`'s.

Conversion workers frame records without importing TensorFlow (its import costs ~3 s per
process and is not fork-safe); `read_records` checks both CRCs of every record, as TF's own
reader does.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import BinaryIO

import google_crc32c

from tfpipe.errors import DataError

_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")
_MASK_DELTA = 0xA282EAD8


def masked_crc(data: bytes) -> int:
    crc = google_crc32c.value(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def frame_parts(data: bytes) -> tuple[bytes, bytes]:
    """The header and footer that frame `data` as one TFRecord (write them around it)."""
    length = _U64.pack(len(data))
    return length + _U32.pack(masked_crc(length)), _U32.pack(masked_crc(data))


def frame_record(data: bytes) -> bytes:
    """One TFRecord: header, payload, footer."""
    header, footer = frame_parts(data)
    return header + data + footer


def read_records(stream: BinaryIO, where: str = "<stream>") -> Iterator[bytes]:
    """Yields the payloads of a TFRecord stream, checking both CRCs of every record.

    Raises:
      DataError: a CRC mismatch or truncation, naming `where` and the record index.
    """
    index = 0
    while True:
        header = stream.read(12)
        if not header:
            return
        if len(header) < 12:
            raise DataError(f"{where}: record {index} is truncated (header has {len(header)} of 12 bytes)")
        length_bytes, length_crc = header[:8], _U32.unpack(header[8:])[0]
        if masked_crc(length_bytes) != length_crc:
            raise DataError(f"{where}: record {index} has a corrupt length (CRC mismatch)")
        (length,) = _U64.unpack(length_bytes)
        payload = stream.read(length)
        footer = stream.read(4)
        if len(payload) < length or len(footer) < 4:
            raise DataError(
                f"{where}: record {index} is truncated (expected {length} bytes of data and a "
                f"4-byte CRC, received {len(payload)} and {len(footer)})"
            )
        if masked_crc(payload) != _U32.unpack(footer)[0]:
            raise DataError(f"{where}: record {index} has corrupt data (CRC mismatch)")
        yield payload
        index += 1

"""A text split's lengths file: each document's token count, as `tfpipe convert` wrote it
(`manifest.LengthsFile`, uint32 in record order across the split's shards), read in the graph
or in NumPy and checked against the manifest's documents and tokens; ordered as the resumable
order orders the records (so a start finds its chunk without opening a shard); and the rows
those documents pack into, counted as the pack stage places them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from tfpipe import storage
from tfpipe._tf import Dataset, Tensor, tf
from tfpipe.errors import DataError
from tfpipe.packing import reference
from tfpipe.packing.spec import Spec, added_tokens, chunk_size
from tfpipe.pipeline.order import stream as order_stream
from tfpipe.pipeline.order.resumable import OrderSpec
from tfpipe.pipeline.read.resolve import ResolvedData
from tfpipe.pipeline.read.sharding import share_files


@dataclasses.dataclass(frozen=True, slots=True)
class Lengths:
    """A split's lengths file and what the manifest says it holds (checked as it is read)."""

    path: str
    documents: int
    tokens: int


def lengths_file(src: ResolvedData) -> Lengths | None:
    """The lengths file of the split `src` reads, or None (converted without one)."""
    manifest, split = src.manifest, src.split
    path = manifest.lengths_path(split) if manifest is not None and split is not None else None
    if manifest is None or split is None or path is None:
        return None
    text = manifest.split(split).text
    assert text is not None  # a lengths file is a text split's
    return Lengths(path, text.documents, text.tokens)


def read_lengths(lengths: Lengths) -> Tensor:
    """Every record's token count (int64 `[documents]`, in record order across the split's
    shards): one read of the lengths file, checked against the manifest's documents and tokens."""
    tf_ = tf()
    data = tf_.io.read_file(lengths.path)
    size = tf_.cast(tf_.strings.length(data), tf_.int64)
    expected = (
        f"Expected the lengths file {lengths.path} to hold {lengths.documents} uint32 lengths summing "
        f"to {lengths.tokens} tokens, as the manifest says; it was changed or is not this conversion's "
        "(convert the split again). Received:"
    )
    check = tf_.debugging.Assert(tf_.equal(size, 4 * lengths.documents), [expected, size, "bytes"])
    with tf_.control_dependencies([check]):
        # decode_raw has no uint32: int32 bits, made unsigned in int64.
        signed = tf_.cast(tf_.io.decode_raw(data, tf_.int32, little_endian=True), tf_.int64)
    values = tf_.bitwise.bitwise_and(signed, tf_.constant(0xFFFFFFFF, tf_.int64))
    total = tf_.reduce_sum(values)
    check = tf_.debugging.Assert(tf_.equal(total, lengths.tokens), [expected, total, "tokens"])
    with tf_.control_dependencies([check]):
        return tf_.identity(values)


def pipeline_rows(pack: Spec, src: ResolvedData, pipelines: int) -> list[int] | None:
    """The rows each of `pipelines` eval input pipelines packs (its records in source order, in
    chunks, each packed on its own: the eval stages' rows, counted by the NumPy packer they
    equal), from the split's lengths file; None without one."""
    lengths = lengths_file(src)
    if lengths is None:
        return None
    values = load_lengths(lengths)
    starts = np.concatenate([[0], np.cumsum(src.counts)])
    out = []
    for j in range(pipelines):
        share = share_files(src.sizes, src.counts, pipelines, j, compressed=bool(src.compression))
        if share.shard_by == "record":
            mine = values[j::pipelines]
        else:
            mine = np.concatenate([values[starts[f] : starts[f + 1]] for f in share.files] or [values[:0]])
        out.append(count_rows(pack, mine))
    return out


def count_rows(pack: Spec, lengths: np.ndarray) -> int:
    """The rows documents of these token counts pack into, chunk by chunk, as `rows_of` counts
    each chunk (in NumPy: `reference.place`, which the graph packer equals)."""
    size = chunk_size(pack)
    L = pack.sequence_length
    total = 0
    for begin in range(0, len(lengths), size):
        chunk = lengths[begin : begin + size] + added_tokens(pack)
        total += reference.place(chunk, L, pack.mode, pack.truncate).rows
    return int(total)


def load_lengths(lengths: Lengths) -> np.ndarray:
    """The lengths file as int64 NumPy (`read_lengths` outside the graph), checked against the
    manifest's documents and tokens."""
    data = storage.read_bytes(lengths.path)
    values = np.frombuffer(data, "<u4").astype(np.int64) if len(data) % 4 == 0 else None
    if values is None or len(values) != lengths.documents or int(values.sum()) != lengths.tokens:
        got = f"{len(data)} bytes" + (f", {int(values.sum())} tokens" if values is not None else "")
        raise DataError(
            f"Expected the lengths file {lengths.path} to hold {lengths.documents} uint32 lengths "
            f"summing to {lengths.tokens} tokens, as the manifest says; it was changed or is not this "
            f"conversion's (convert the split again). Received: {got}"
        )
    return values


def ordered_lengths(
    spec: OrderSpec, lengths: Lengths, size: int, read: Callable[[], Tensor] | None = None
) -> Dataset:
    """The lengths of the records of the order's stream from position 0, in chunks of `size`
    (`(lengths, "")` pairs, as `order_stream.stream` batches records): the order applied to the
    lengths file read once (`read()`, else `read_lengths`), not to the records."""
    tf_ = tf()

    def table() -> Tensor:
        first = tf_.constant(spec.first_ids, tf_.int64)
        rows = tf_.ragged.range(first, first + tf_.constant(spec.counts, tf_.int64)).flat_values
        values = read() if read is not None else read_lengths(lengths)
        return tf_.gather(values, rows)  # this pipeline's files, in their order

    return order_stream.stream(
        spec,
        None,
        lambda: tf_.constant(0, tf_.int64),
        cached=True,
        sources=False,
        keys=False,
        batch=size,
        parallelism=1,
        load=table,
    )

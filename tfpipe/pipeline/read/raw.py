"""tf.data transformations without the helper functions tf.data's Python layer adds to them.

Every dataset function is instantiated again for each new iterator (tfpipe._tf.plain), and
tf.data adds some of its own: `unbatch()` and `rebatch()` each map the input through a
`normalize` function (for sparse and ragged components, which tfpipe's elements never have),
and `TFRecordDataset(path)` / `FixedLengthRecordDataset(path)` read a tensor path through a
`flat_map` of a `read_one_file` function. Here the same dataset ops are made directly
(`tf.raw_ops`, wrapped with `tf.data.experimental.from_variant`): the same elements, one
function fewer each. An image pipeline had 5 such functions (benchmarks/RESULTS.md, issue 31
round 2).

Dense tensor components only (each function refuses anything else by name).
"""

from __future__ import annotations

from typing import Any

from tfpipe._tf import tf


def _dense(ds: Any, what: str) -> list[Any]:
    tf_ = tf()
    specs = tf_.nest.flatten(ds.element_spec)
    for spec in specs:
        if not isinstance(spec, tf_.TensorSpec):
            raise TypeError(f"raw.{what} takes datasets of dense tensors. Received: {ds.element_spec}")
    return specs


def _wrap(variant: Any, ds: Any, specs: list[Any]) -> Any:
    tf_ = tf()
    return tf_.data.experimental.from_variant(variant, tf_.nest.pack_sequence_as(ds.element_spec, specs))


def unbatch(ds: Any) -> Any:
    """`ds.unbatch()`."""
    tf_ = tf()
    specs = _dense(ds, "unbatch")
    out = [tf_.TensorSpec(s.shape[1:], s.dtype) for s in specs]
    variant = tf_.raw_ops.UnbatchDataset(
        input_dataset=ds._variant_tensor,
        output_types=[s.dtype for s in out],
        output_shapes=[s.shape for s in out],
    )
    return _wrap(variant, ds, out)


def rebatch(ds: Any, size: int, drop_remainder: bool = False) -> Any:
    """`ds.rebatch(size, drop_remainder)` (one size)."""
    tf_ = tf()
    specs = _dense(ds, "rebatch")
    out = [tf_.TensorSpec([size if drop_remainder else None, *s.shape[1:]], s.dtype) for s in specs]
    variant = tf_.raw_ops.RebatchDatasetV2(
        input_dataset=ds._variant_tensor,
        batch_sizes=tf_.constant([size], tf_.int64),
        drop_remainder=drop_remainder,
        output_types=[s.dtype for s in out],
        output_shapes=[s.shape for s in out],
    )
    return _wrap(variant, ds, out)


def tfrecords(paths: Any, compression: str = "", buffer: int = 256 << 10) -> Any:
    """The records of `paths` (a scalar or vector string tensor), in order: `TFRecordDataset`."""
    tf_ = tf()
    variant = tf_.raw_ops.TFRecordDataset(
        filenames=paths, compression_type=compression, buffer_size=tf_.constant(buffer, tf_.int64)
    )
    return tf_.data.experimental.from_variant(variant, tf_.TensorSpec([], tf_.string))


def fixed_length(path: Any, record_bytes: int, header_bytes: Any = 0, buffer: int = 1) -> Any:
    """Records of `record_bytes` bytes of one uncompressed file from `header_bytes` on:
    `FixedLengthRecordDataset`."""
    tf_ = tf()
    variant = tf_.raw_ops.FixedLengthRecordDatasetV2(
        filenames=path,
        header_bytes=tf_.cast(header_bytes, tf_.int64),
        record_bytes=tf_.constant(record_bytes, tf_.int64),
        footer_bytes=tf_.constant(0, tf_.int64),
        buffer_size=tf_.constant(buffer, tf_.int64),
        compression_type="",
    )
    return tf_.data.experimental.from_variant(variant, tf_.TensorSpec([], tf_.string))

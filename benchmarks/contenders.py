"""Pipelines that tfpipe's imagenet pipeline is measured against, besides the baseline
(tfpipe/modalities/images/bench/recipe.py, unchanged): the decode-only ceiling and the baseline's eval twin.

- `decode_only(root, batch)`: the ceiling of any pipeline that decodes the training crops.
  tfpipe's own read stages (the same files, cache, shuffle and options), then per record only
  what cannot be skipped: parse, sample the random-resized-crop window, `decode_and_crop_jpeg`.
  It keeps the crop's shape and drops the pixels, so resizing, flipping, casting, normalising
  and batching the pixels (tfpipe's tail) cost nothing here. tfpipe / ceiling is the share of
  the ceiling tfpipe reaches: 1.0 would be a tail that costs nothing.
- `baseline_eval(files, batch)`: the baseline with the tensorflow/tpu eval preprocessing in
  place of its training map: the same interleave, parse and bicubic float32 resize, a centre
  crop of image_size / (image_size + 32) of the shorter side (tensorflow/tpu's
  CROP_PADDING = 32), no flip, no shuffle, the last partial batch kept.
"""

from __future__ import annotations

from typing import Any

from tfpipe.bench.measure.producer import prefix_points
from tfpipe.pipeline import plan

CROP_PADDING = 32


def _spec(tf: Any) -> dict[str, Any]:
    return {
        "image/encoded": tf.io.FixedLenFeature((), tf.string),
        "image/class/label": tf.io.FixedLenFeature((), tf.int64),
    }


def decode_only(root: str, batch: int, **options: Any) -> Any:
    """The decode-only ceiling over the records of `root` (see the module doc)."""
    from tfpipe._tf import tf

    tf_ = tf()
    pipe = plan(root, batch_size=batch, **options)
    read_upto = prefix_points(pipe.stages)[0][1]
    spec = _spec(tf_)
    whole = tf_.constant([0.0, 0.0, 1.0, 1.0], shape=[1, 1, 4])

    def decode(record: Any, *_: Any) -> Any:  # the read stages pair records with a source (and seed)
        features = tf_.io.parse_single_example(record, spec)
        encoded = features["image/encoded"]
        shape = tf_.io.extract_jpeg_shape(encoded)
        begin, size, _ = tf_.image.sample_distorted_bounding_box(
            shape,
            bounding_boxes=whole,
            min_object_covered=0.1,
            aspect_ratio_range=(3 / 4, 4 / 3),
            area_range=(0.08, 1.0),
            max_attempts=10,
            use_image_if_no_bounding_boxes=True,
        )
        y, x, _ = tf_.unstack(begin)
        h, w, _ = tf_.unstack(size)
        image = tf_.io.decode_and_crop_jpeg(encoded, tf_.stack([y, x, h, w]), channels=3)
        return tf_.shape(image), tf_.cast(features["image/class/label"], tf_.int32)

    ds = pipe.dataset(read_upto)
    ds = ds.map(decode, num_parallel_calls=tf_.data.AUTOTUNE, deterministic=False)
    ds = ds.batch(pipe.batch_size, drop_remainder=True)
    return ds.prefetch(tf_.data.AUTOTUNE).with_options(pipe.options())


def baseline_eval(files: list[str], *, batch_size: int, image_size: int = 224) -> Any:
    """The baseline pipeline's eval twin (see the module doc): each record once, in order."""
    from tfpipe._tf import tf

    tf_ = tf()
    spec = _spec(tf_)

    def preprocess(record: Any) -> Any:
        features = tf_.io.parse_single_example(record, spec)
        encoded = features["image/encoded"]
        shape = tf_.io.extract_jpeg_shape(encoded)
        height, width = shape[0], shape[1]
        crop = tf_.cast(
            image_size / (image_size + CROP_PADDING) * tf_.cast(tf_.minimum(height, width), tf_.float32),
            tf_.int32,
        )
        window = tf_.stack([(height - crop + 1) // 2, (width - crop + 1) // 2, crop, crop])
        image = tf_.io.decode_and_crop_jpeg(encoded, window, channels=3)
        image = tf_.image.resize(image, [image_size, image_size], method="bicubic")
        image = tf_.cast(image, tf_.float32)
        image.set_shape([image_size, image_size, 3])
        return image, tf_.cast(features["image/class/label"] - 1, tf_.int32)

    ds = tf_.data.Dataset.from_tensor_slices(list(files))
    ds = ds.interleave(tf_.data.TFRecordDataset, num_parallel_calls=tf_.data.AUTOTUNE)
    ds = ds.map(preprocess, num_parallel_calls=tf_.data.AUTOTUNE)
    return ds.batch(batch_size).prefetch(tf_.data.AUTOTUNE)

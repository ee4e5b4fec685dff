"""The baseline pipeline (tensorflow/tpu-style) that tfpipe's imagenet pipeline is compared against.

It is the common hand-written ImageNet pipeline (after the tensorflow/tpu ResNet preprocessing):

  list_files -> interleave(TFRecordDataset, AUTOTUNE)
  -> map(parse + random crop with decode_and_crop_jpeg + bicubic resize + flip + float cast,
         AUTOTUNE)
  -> batch(drop_remainder=True) -> prefetch(AUTOTUNE)

Kept deliberately as written there: one fused per-record map, deterministic ordering (the
tf.data default), bicubic resize, float32 output, and no tf.data.Options. It exists only so
`tfpipe bench --compare` and benchmarks/test_pipeline_speed.py can time tfpipe against it on
identical records.
"""

from __future__ import annotations

from tfpipe._tf import Dataset, Tensor, tf


def recipe_dataset(
    files: list[str], *, batch_size: int, image_size: int = 224, compression: str = ""
) -> Dataset:
    """The baseline pipeline over `files` (imagenet_to_gcs records): (float32 images, int32 labels).

    Args:
      files: TFRecord shard paths.
      batch_size: examples per batch; the last partial batch is dropped.
      image_size: output height and width.
      compression: TFRecordDataset compression_type ("" or "GZIP").
    """
    tf_ = tf()
    autotune = tf_.data.AUTOTUNE
    spec = {
        "image/encoded": tf_.io.FixedLenFeature((), tf_.string),
        "image/class/label": tf_.io.FixedLenFeature((), tf_.int64),
    }

    def preprocess(record: Tensor) -> tuple[Tensor, Tensor]:
        features = tf_.io.parse_single_example(record, spec)
        encoded = features["image/encoded"]
        shape = tf_.io.extract_jpeg_shape(encoded)
        begin, size, _ = tf_.image.sample_distorted_bounding_box(
            shape,
            bounding_boxes=tf_.constant([0.0, 0.0, 1.0, 1.0], shape=[1, 1, 4]),
            min_object_covered=0.1,
            aspect_ratio_range=(3 / 4, 4 / 3),
            area_range=(0.08, 1.0),
            max_attempts=10,
            use_image_if_no_bounding_boxes=True,
        )
        y, x, _ = tf_.unstack(begin)
        h, w, _ = tf_.unstack(size)
        image = tf_.io.decode_and_crop_jpeg(encoded, tf_.stack([y, x, h, w]), channels=3)
        image = tf_.image.resize(image, [image_size, image_size], method="bicubic")
        image = tf_.image.random_flip_left_right(image)
        image = tf_.cast(image, tf_.float32)
        image.set_shape([image_size, image_size, 3])
        label = tf_.cast(features["image/class/label"] - 1, tf_.int32)
        return image, label

    ds = tf_.data.Dataset.list_files(list(files), shuffle=True)
    ds = ds.interleave(
        lambda f: tf_.data.TFRecordDataset(f, compression_type=compression),
        num_parallel_calls=autotune,
    )
    ds = ds.map(preprocess, num_parallel_calls=autotune)
    ds = ds.batch(batch_size, drop_remainder=True)
    return ds.prefetch(autotune)

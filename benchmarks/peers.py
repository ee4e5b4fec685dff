"""The loaders a user would pick instead of tfpipe, each as its own documentation writes it (the
pipelines of benchmarks/peers_compare.py). Light at import: Grain's worker processes are
spawned and import this module to unpickle the transforms, so nothing heavy loads here.

Every contender reads the same TFRecord shards (imagenet_to_gcs records) and makes the same
batches: a random-resized crop (area 0.08-1, aspect 3/4-4/3, 10 attempts, else the whole
image), 224x224 uint8, a random horizontal flip, 128 to a batch, with its labels.

- DALI (`dali`): `fn.readers.tfrecord` over index files made by DALI's own `tfrecord2idx`,
  `fn.decoders.image_random_crop` (libjpeg-turbo on the CPU, decoding only the crop's region),
  `fn.resize` to 224x224 (linear), `fn.crop_mirror_normalize` with a `fn.random.coin_flip`
  mirror and uint8 output: the ResNet-50 example of DALI's documentation with `device_id=None`
  (a CPU-only pipeline) and `num_threads` = the machine's cores.
- Grain (`grain_loader`): Grain reads no TFRecord by random access; its documentation lists
  `grain.experimental.TFRecordIterDataset` (one file, sequentially) and shows
  `InterleaveIterDataset` over a shuffled `MapDataset` of files, then maps, then
  `mp_prefetch` (the InterleaveIterDataset docstring). So: the shards shuffled, interleaved
  (cycle length 4), a window shuffle of 1,024 records, then in `mp_prefetch` worker processes
  (one per core) the record parsed (`tf.train.Example`, the proto that wrote it), decoded with
  OpenCV (`cv2.imdecode`, libjpeg-turbo), cropped, resized (`cv2.INTER_LINEAR`), flipped by a
  `RandomMapTransform`, and batched with Grain's `batch`.
"""

from __future__ import annotations

import math
import os
from typing import Any

import grain  # light (no TensorFlow); Grain's spawned workers import this module

IMAGE = 224
AREA = (0.08, 1.0)
ASPECT = (3 / 4, 4 / 3)
ATTEMPTS = 10
FEATURES = ("image/encoded", "image/class/label")


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


# ---- DALI ----


def dali_indexes(files: list[str], folder: str) -> list[str]:
    """DALI's index file for each shard, made once by its own `tfrecord2idx` tool."""
    import subprocess
    import sys

    os.makedirs(folder, exist_ok=True)
    tool = os.path.join(os.path.dirname(sys.executable), "tfrecord2idx")
    out = []
    for path in files:
        idx = os.path.join(folder, os.path.basename(path) + ".idx")
        if not os.path.exists(idx):
            subprocess.run([tool, path, idx + ".tmp"], check=True, capture_output=True)
            os.replace(idx + ".tmp", idx)
        out.append(idx)
    return out


def dali_pipeline(files: list[str], indexes: list[str], batch: int, seed: int = 1) -> Any:
    """The DALI pipeline, built (see the module doc). Iterate with `run()`."""
    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali import tfrecord as tfrec

    @pipeline_def(batch_size=batch, num_threads=cores(), device_id=None, seed=seed)
    def rn50() -> Any:
        inputs = fn.readers.tfrecord(
            path=files,
            index_path=indexes,
            features={
                "image/encoded": tfrec.FixedLenFeature((), tfrec.string, ""),
                "image/class/label": tfrec.FixedLenFeature([1], tfrec.int64, -1),
            },
            random_shuffle=True,
            initial_fill=1024,
            name="Reader",
        )
        images = fn.decoders.image_random_crop(
            inputs["image/encoded"],
            device="cpu",
            output_type=types.RGB,
            random_aspect_ratio=list(ASPECT),
            random_area=list(AREA),
            num_attempts=ATTEMPTS,
        )
        images = fn.resize(images, resize_x=IMAGE, resize_y=IMAGE, interp_type=types.INTERP_LINEAR)
        images = fn.crop_mirror_normalize(
            images, dtype=types.UINT8, output_layout="HWC", mirror=fn.random.coin_flip(probability=0.5)
        )
        return images, inputs["image/class/label"] - 1

    pipe = rn50()
    pipe.build()
    return pipe


class DaliBatches:
    """An endless iterator of a DALI pipeline's batches (dense CPU tensors, not copied)."""

    def __init__(self, pipe: Any) -> None:
        self.pipe = pipe

    def __iter__(self) -> DaliBatches:
        return self

    def __next__(self) -> Any:
        images, labels = self.pipe.run()
        return images.as_tensor(), labels.as_tensor()


# ---- Grain ----


def crop_window(height: int, width: int, rng: Any) -> tuple[int, int, int, int]:
    """A random-resized-crop window (y, x, h, w): ATTEMPTS draws of an area and a log-uniform
    aspect ratio that fit, else the whole image (what `fn.decoders.image_random_crop` and
    `tf.image.sample_distorted_bounding_box` do)."""
    area = height * width
    log_lo, log_hi = math.log(ASPECT[0]), math.log(ASPECT[1])
    for _ in range(ATTEMPTS):
        target = area * rng.uniform(*AREA)
        ratio = math.exp(rng.uniform(log_lo, log_hi))
        w = round(math.sqrt(target * ratio))
        h = round(math.sqrt(target / ratio))
        if 0 < w <= width and 0 < h <= height:
            return int(rng.integers(0, height - h + 1)), int(rng.integers(0, width - w + 1)), h, w
    return 0, 0, height, width


class ParseDecodeCrop(grain.transforms.RandomMap):
    """Grain's per-record work, in its worker processes (see the module doc)."""

    def random_map(self, record: bytes, rng: Any) -> tuple[Any, Any]:
        import cv2
        import numpy as np
        from tensorflow.core.example import example_pb2

        feature = example_pb2.Example.FromString(record).features.feature
        data = feature["image/encoded"].bytes_list.value[0]
        label = feature["image/class/label"].int64_list.value[0] - 1
        image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
        y, x, h, w = crop_window(image.shape[0], image.shape[1], rng)
        image = cv2.resize(image[y : y + h, x : x + w], (IMAGE, IMAGE), interpolation=cv2.INTER_LINEAR)
        image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        if rng.random() < 0.5:
            image = image[:, ::-1]
        return np.ascontiguousarray(image), np.int32(label)


def grain_loader(files: list[str], batch: int, seed: int = 1) -> Any:
    """The Grain pipeline (see the module doc): an endless `IterDataset` of batches."""
    datasets = (
        grain.MapDataset.source(list(files))
        .shuffle(seed=seed)
        .repeat()
        .map(grain.experimental.TFRecordIterDataset)
    )
    ds = grain.experimental.InterleaveIterDataset(datasets, cycle_length=4)
    ds = grain.experimental.WindowShuffleIterDataset(ds, window_size=1024, seed=seed)
    ds = ds.random_map(ParseDecodeCrop(), seed=seed).batch(batch, drop_remainder=True)
    return ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=cores()))

"""The images modality: image class folders (or a flat folder with a labels file) converted into
one JPEG record each (convert/), read by the imagenet preset (preset.py: crop, flip, resize, one
record at a time), benched against ImageNet-like JPEGs and the tensorflow/tpu baseline (bench/)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tfpipe.modalities.images.bench import compare, data
from tfpipe.modalities.images.convert.kind import IMAGES
from tfpipe.modalities.images.preset import IMAGENET
from tfpipe.modalities.modality import BenchHalf, Modality

# Keras models `--model` builds with random weights (nothing is downloaded).
MODELS = ("resnet50", "mobilenet_v2", "efficientnet_b0", "small_cnn")


def recognizes(keys: Mapping[str, str], tfds: Any, options: Mapping[str, Any]) -> bool:
    """Records without a manifest are images with the imagenet_to_gcs key, a TFDS dataset's
    image feature, or an `image_key` given."""
    return "image/encoded" in keys or "image_key" in options or bool(tfds is not None and tfds.image_key)


BENCH = BenchHalf(
    # A common per-accelerator batch for image models.
    default_batch=128,
    models=MODELS,
    # A million 224x224x3 uint8 images a second is ~150 GB/s, beyond a host's memory bandwidth
    # (the fastest reference row is 13,800 images/s per TPU v4 host).
    max_consumer_rate=1e6,
    synthetic=data.SYNTHETIC,
    noun="an image dataset (layout {layout!r})",
    reads_tfds=True,
    folder_advice=data.folder_advice,
    raw=data.raw,
    convert_advice=data.convert_advice,
    baseline=compare.compare,
)

MODALITY = Modality(name=IMAGES.name, convert=IMAGES, preset=IMAGENET, bench=BENCH, recognizes=recognizes)

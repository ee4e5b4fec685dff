"""The images modality: image class folders (or a flat folder with a labels file) converted into
one JPEG record each (convert/), read by the imagenet preset (preset.py: crop, flip, resize, one
record at a time), benched against ImageNet-like JPEGs and the tensorflow/tpu baseline (bench/)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tfpipe.bench.measure.models import IMAGE_MODELS
from tfpipe.modalities.images.bench import advice, compare, data
from tfpipe.modalities.images.convert.kind import IMAGES
from tfpipe.modalities.images.preset import IMAGENET
from tfpipe.modalities.modality import BenchHalf, Modality

if TYPE_CHECKING:
    from tfpipe.pipeline.read.tfds_info import TfdsInfo


def recognizes(keys: Mapping[str, str], tfds: TfdsInfo | None, options: Mapping[str, Any]) -> bool:
    """Records without a manifest are images with the imagenet_to_gcs key, a TFDS dataset's
    image feature, or an `image_key` given."""
    return "image/encoded" in keys or "image_key" in options or bool(tfds is not None and tfds.image_key)


BENCH = BenchHalf(
    # A common per-accelerator batch for image models.
    default_batch=128,
    models=IMAGE_MODELS,
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
    stage_advice=advice.stage_advice,
)

MODALITY = Modality(name=IMAGES.name, convert=IMAGES, preset=IMAGENET, bench=BENCH, recognizes=recognizes)

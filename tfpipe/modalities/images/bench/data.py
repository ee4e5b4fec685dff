"""What bench reads of images: the synthetic ImageNet-like dataset generated when no data is
given, and raw image data named for what it is, with the command that converts it."""

from __future__ import annotations

import os
import posixpath
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tfpipe import storage
from tfpipe.modalities.images.convert.decode import IMAGE_EXTENSIONS
from tfpipe.modalities.modality import Synthetic

if TYPE_CHECKING:
    from tfpipe.bench.measure.synthetic import SyntheticSpec

# Sized so a default run, first-time generation included, stays under 2 minutes on 2 cores:
# measured with benchmarks/test_bench_harness.py, generating and converting 1,280 images
# (10 classes of 128, ~140 MB) takes 17-33 s and the whole first run 83-90 s there, while
# 1,280 images still outlast every 3 s measurement window (they are cached and repeated).
DEFAULT_EXAMPLES = 1280
IMAGE_CLASSES = 10


def generate(spec: SyntheticSpec, raw: str) -> str:
    """`spec.examples` ImageNet-like JPEGs (mean ~108 KB at ~470x390) in IMAGE_CLASSES class
    folders under `raw`."""
    from tfpipe.synthetic import folders  # numpy and PIL, loaded when bench generates images

    per, extra = divmod(spec.examples, IMAGE_CLASSES)
    classes = min(IMAGE_CLASSES, spec.examples)
    counts = [per + (1 if i < extra else 0) for i in range(classes)]
    folders.write_image_folder(raw, classes=classes, per_class=counts, seed=spec.seed, workers=_workers())
    return raw


def _workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


SYNTHETIC = Synthetic(
    examples=DEFAULT_EXAMPLES,
    shards=8,
    generate=generate,
    describe=lambda spec: ("Generating", "synthetic ImageNet-like JPEGs"),
)


def raw(path: str, names: Sequence[str] | None, asked: bool) -> str | None:
    """ "an image file", "a folder of images" or "a folder of image class folders"; None when
    `path` holds no images."""
    if names is None:
        return "an image file" if _suffix(path) in IMAGE_EXTENSIONS else None
    if any(_suffix(n) in IMAGE_EXTENSIONS for n in names):
        return "a folder of images"
    for sub in names[:3]:  # class folders: look inside the first few
        if any(_suffix(n) in IMAGE_EXTENSIONS for n in storage.listdir(storage.join(path, sub))):
            return "a folder of image class folders"
    return None


def folder_advice(path: str) -> str:
    return (
        f"pass its TFRecord files as a glob such as '{storage.join(path, 'train-*')}', "
        "or convert the raw data with `tfpipe convert SRC DEST`."
    )


def convert_advice(raw_path: str, what: str) -> str:
    return (
        f"{raw_path} is {what}, not a tfpipe dataset: run `tfpipe convert {raw_path} DEST` first, then "
        "`tfpipe bench --data DEST`."
    )


def _suffix(name: str) -> str:
    return posixpath.splitext(name)[1].lower()

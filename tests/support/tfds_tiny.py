"""A tiny TFDS dataset builder for tests/pipeline/read/test_tfds_info.py. It lives in a module of its own,
imported by name: TFDS finds a builder's code by its module's file, which a test module imported
by pytest's `--import-mode=importlib` does not give it."""

from __future__ import annotations

import numpy as np
import tensorflow_datasets as tfds
from etils import epath

CLASSES = ["cat", "dog", "bird"]
TRAIN, TEST, SHARDS = 37, 11, 3


def pixels(i: int) -> np.ndarray:
    """Example i's image: smooth, so its JPEG stays near it; sizes vary."""
    h, w = 20 + i % 7, 24 + i % 5
    y, x = np.mgrid[:h, :w]
    return np.stack([40 + 5 * x + i % 20, 40 + 6 * y + i % 20, 120 + 2 * (x + y)], -1).astype(np.uint8)


class TfpipeTiny(tfds.core.GeneratorBasedBuilder):
    """37 train and 11 test examples: an image (PNG, TFDS's default), the same as JPEG, a class
    label and the example's id."""

    VERSION = tfds.core.Version("1.0.0")

    @tfds.core.utils.classproperty
    @classmethod
    def code_path(cls) -> epath.Path:
        """This file. TFDS finds a builder in a package (support.tfds_tiny) through
        `importlib_resources`, which it does not install; this is what it finds otherwise."""
        return epath.Path(__file__)

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self,
            features=tfds.features.FeaturesDict(
                {
                    "image": tfds.features.Image(shape=(None, None, 3)),
                    "photo": tfds.features.Image(shape=(None, None, 3), encoding_format="jpeg"),
                    "label": tfds.features.ClassLabel(names=CLASSES),
                    "id": tfds.features.Scalar(np.int64),
                }
            ),
            supervised_keys=("image", "label"),
        )

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples(0, TRAIN), "test": self._generate_examples(TRAIN, TEST)}

    def _generate_examples(self, first, n):
        for i in range(first, first + n):
            yield i, {"image": pixels(i), "photo": pixels(i), "label": i % 3, "id": i}

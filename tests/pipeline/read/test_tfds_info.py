"""TensorFlow Datasets folders as a source: `build()` on the version folder TFDS prepared reads
its splits, record counts and class names from dataset_info.json (steps_per_epoch, the eval
length, start_step and hosts work), decodes its PNG (TFDS's default) and JPEG images, and no
TFDS folder is taken for an unfinished `tfpipe convert`.

The dataset is made by a tiny TFDS builder that generates its examples in code (no download):
tensorflow-datasets is a test-only dependency, and the module skips naming it when absent.
"""

from __future__ import annotations

import shutil
import warnings

import numpy as np
import pytest

import tfpipe
from tfpipe.errors import ManifestError

tf = pytest.importorskip("tensorflow")
tfds = pytest.importorskip("tensorflow_datasets", reason="TFDS: pip install tensorflow-datasets (tests only)")

from support.tfds_tiny import CLASSES, SHARDS, TEST, TRAIN, TfpipeTiny, pixels  # noqa: E402 - after the skips


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    """The prepared version folder: `<data_dir>/tfpipe_tiny/1.0.0`, 3 shards a split."""
    data_dir = tmp_path_factory.mktemp("tfds")
    builder = TfpipeTiny(data_dir=str(data_dir), file_format="tfrecord")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        builder.download_and_prepare(download_config=tfds.download.DownloadConfig(num_shards=SHARDS))
    return str(builder.data_dir)


def ids(ds) -> list[int]:
    """The ids a dataset built with label_key="id" yields as labels."""
    return [int(i) for _, labels in ds for i in labels.numpy()]


def test_counts_splits_and_classes_come_from_dataset_info(tiny):
    p = tfpipe.plan(tiny, batch_size=4, image_size=16, seed=1)
    assert p.source.tfds is not None and p.source.class_names == tuple(CLASSES)
    assert p.examples == TRAIN and len(p.files) == SHARDS and p.order is not None  # resumable
    assert f"split 'train' of {tiny} (TFDS dataset_info.json)" in p.describe()
    assert "0-based: read as stored" in p.describe()
    assert tfpipe.steps_per_epoch(tiny, 4) == TRAIN // 4
    assert tfpipe.steps_per_epoch(tiny, 4, split="test", drop_remainder=False) == 3
    ev = tfpipe.build(tiny, batch_size=4, image_size=16, training=False, preset="imagenet", label_key="id")
    assert int(ev.cardinality()) == 3  # the test split: ceil(11 / 4)
    assert sorted(ids(ev)) == list(range(TRAIN, TRAIN + TEST))


def test_png_and_jpeg_images_decode_through_the_image_preset(tiny):
    """Eval: the centre crop (0.875 of the shorter side) resized, as the preset does it, from
    the example's pixels: exactly for the PNG, within JPEG's loss for the JPEG."""
    want = {}
    for i in range(TRAIN, TRAIN + TEST):
        img = pixels(i)
        h, w, _ = img.shape
        crop = int(0.875 * min(h, w))
        y, x = (h - crop + 1) // 2, (w - crop + 1) // 2
        resized = tf.image.resize(img[y : y + crop, x : x + crop], [16, 16]).numpy()
        want[i] = (resized + 0.5).astype(np.uint8)
    for key in ("image", "photo"):
        ds = tfpipe.build(tiny, batch_size=4, image_size=16, training=False, image_key=key, label_key="id")
        got = {
            int(i): img
            for images, labels in ds
            for img, i in zip(images.numpy(), labels.numpy(), strict=True)
        }
        assert sorted(got) == sorted(want)
        error = max(np.abs(got[i].astype(int) - want[i].astype(int)).max() for i in want)
        assert error == 0 if key == "image" else 0 < error <= 24, (key, error)


def test_training_resumes_and_shares_hosts_on_tfds(tiny):
    kw = {"batch_size": 4, "image_size": 16, "seed": 3, "label_key": "id"}
    whole = [y.numpy().tolist() for _, y in tfpipe.build(tiny, **kw).take(14)]
    assert sorted(i for b in whole[:9] for i in b) == sorted({i for b in whole[:9] for i in b})
    assert [y.numpy().tolist() for _, y in tfpipe.build(tiny, start_step=10, **kw).take(4)] == whole[10:]
    hosts = kw | {"batch_size": 6}
    files = [set(tfpipe.plan(tiny, num_hosts=3, host_index=i, **hosts).files) for i in range(3)]
    assert all(len(f) == 1 for f in files) and len(set.union(*files)) == SHARDS


def test_nothing_is_taken_for_an_unfinished_convert(tiny, tmp_path):
    with pytest.raises(ManifestError, match=r"is a TFDS dataset's folder.*version folder.*1\.0\.0") as e:
        tfpipe.build(tiny.rsplit("/", 1)[0], batch_size=4)
    assert "did not finish" not in str(e.value)
    # Its shards copied without dataset_info.json: another tool's files, read as a glob.
    copy = tmp_path / "copied"
    copy.mkdir()
    for f in tfpipe.plan(tiny, batch_size=4).files:
        shutil.copy(f, copy)
    with pytest.raises(ManifestError, match=r"TFRecord shards another tool wrote.*glob") as e:
        tfpipe.build(str(copy), batch_size=4)
    assert "did not finish" not in str(e.value)
    # A glob with image_key and no preset: the image preset, labels as stored, no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds = tfpipe.build(
            str(copy / "*"), batch_size=4, image_size=16, training=False, image_key="image", label_key="id"
        )
    assert sorted(ids(ds)) == list(range(TRAIN))
    # A glob of a split's shards inside the TFDS folder is read through its dataset_info.json.
    p = tfpipe.plan(tiny + "/*-test.tfrecord-*", batch_size=4, training=False, image_size=16)
    assert p.source.tfds is not None and p.source.split == "test" and int(p.dataset().cardinality()) == 3


def test_bench_reads_a_tfds_folder(tiny):
    from tfpipe.bench import BenchConfig
    from tfpipe.bench.measure import data as bench_data

    # The records and shards dataset_info.json counts (the folder used to be refused as raw data).
    source = bench_data.resolve(BenchConfig(data=tiny, batch_size=8), lambda _: None)
    assert (source.info.examples, source.info.shards, source.split, source.root) == (
        TRAIN,
        SHARDS,
        "train",
        tiny,
    )

"""Datasets for the pipeline benchmarks, made once per session (a minute or two on 2 cores).

- `imagenet_shards`: ImageNet-like JPEGs (tfpipe.testing.fake_data: natural-image statistics,
  mean ~108 KB at ~470x390), converted as they are, in 8 shards.
- `resized_shards`: the same images converted with `resize_shorter=RESIZE_SHORTER`.
- `table_40`: a 40-column table as CSV plus its converted shards.

Set TFPIPE_BENCH_DATA=<dir> to keep them between runs.
"""

from __future__ import annotations

import os

import pytest

import tfpipe
from tfpipe.format.manifest import MANIFEST_NAME
from tfpipe.testing import fake_data

N_IMAGES = int(os.environ.get("TFPIPE_BENCH_IMAGES", "800"))
N_ROWS = int(os.environ.get("TFPIPE_BENCH_ROWS", "200000"))
# The shorter side used for the resized records: the smallest that keeps a 224 crop of the
# eval centre (224 / 0.875 = 256) at full resolution, the ResNet reference's eval resize.
RESIZE_SHORTER = 256


@pytest.fixture(scope="session")
def bench_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = os.environ.get("TFPIPE_BENCH_DATA")
    if path:
        os.makedirs(path, exist_ok=True)
        return path
    return str(tmp_path_factory.mktemp("bench"))


def _convert(src: str, dest: str, **options: object) -> str:
    if not os.path.exists(os.path.join(dest, MANIFEST_NAME)):
        tfpipe.convert(src, dest, overwrite=True, **options)
    return dest


@pytest.fixture(scope="session")
def image_folder(bench_dir: str) -> str:
    src = os.path.join(bench_dir, "images")
    if not os.path.isdir(src):
        fake_data.write_image_folder(src, classes=10, per_class=N_IMAGES // 10, workers=2)
    return src


@pytest.fixture(scope="session")
def imagenet_shards(image_folder: str, bench_dir: str) -> str:
    return _convert(image_folder, os.path.join(bench_dir, "imagenet"), format="imagenet", num_shards=8)


@pytest.fixture(scope="session")
def resized_shards(image_folder: str, bench_dir: str) -> str:
    return _convert(
        image_folder,
        os.path.join(bench_dir, f"imagenet-{RESIZE_SHORTER}"),
        format="imagenet",
        num_shards=8,
        resize_shorter=RESIZE_SHORTER,
    )


@pytest.fixture(scope="session")
def eval_shards(bench_dir: str) -> str:
    """3,200 ImageNet-like JPEGs as a validation split in 8 shards: an eval epoch of seconds."""
    src = os.path.join(bench_dir, "eval-images")
    if not os.path.isdir(src):
        fake_data.write_image_folder(src, classes=10, per_class=320, seed=11, workers=2)
    return _convert(
        src, os.path.join(bench_dir, "imagenet-eval"), format="imagenet", num_shards=8, split="validation"
    )


@pytest.fixture(scope="session")
def table_40(bench_dir: str) -> tuple[str, str]:
    csv = os.path.join(bench_dir, "table40.csv")
    if not os.path.exists(csv):
        fake_data.write_table(fake_data.make_table(N_ROWS, columns=39, label_classes=2), csv)
    return csv, _convert(csv, os.path.join(bench_dir, "table40"), label="label", num_shards=8)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A measurement takes minutes: the suite's 300 s test timeout (pyproject.toml) is off here."""
    for item in items:
        item.add_marker(pytest.mark.timeout(0))


@pytest.fixture(scope="module")
def cache_home(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An XDG cache home of the bench harnesses' own: bench's default datasets are made there."""
    return str(tmp_path_factory.mktemp("xdg_cache"))

"""tfpipe.testing.fake_data: synthetic photos that cost what ImageNet's do, trees, tables."""

from __future__ import annotations

import io
import os
import pathlib

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from tfpipe.errors import ConfigError
from tfpipe.modalities.images.convert.decode import UndecodableImage, normalize_image, sniff_format
from tfpipe.testing import fake_data as fd


@pytest.fixture(scope="module")
def imagenet_sample() -> list[bytes]:
    rng = np.random.default_rng(2024)
    return [fd.imagenet_like_jpeg(rng) for _ in range(40)]


def test_imagenet_like_jpegs_match_imagenet_file_sizes(imagenet_sample: list[bytes]) -> None:
    sizes = np.array([len(b) for b in imagenet_sample])
    assert abs(sizes.mean() / fd.IMAGENET_MEAN_BYTES - 1) < 0.25, sizes.mean()
    assert sizes.std() > 10_000  # spread, like real photos, not one fixed size
    for data in imagenet_sample[:5]:
        image = Image.open(io.BytesIO(data))
        assert (image.format, image.mode) == ("JPEG", "RGB")
        assert normalize_image(data).reencoded is False  # plain RGB JPEGs pass through


def test_imagenet_like_sizes_have_imagenet_mean_and_spread() -> None:
    rng = np.random.default_rng(5)
    sizes = np.array([fd.imagenet_like_size(rng) for _ in range(4000)])
    mean_h, mean_w = sizes.mean(axis=0)
    assert abs(mean_h - 390) < 12 and abs(mean_w - 470) < 12, (mean_h, mean_w)
    assert (sizes[:, 0] > sizes[:, 1]).mean() == pytest.approx(0.18, abs=0.03)  # portrait
    assert (sizes.max(axis=1) == 500).mean() == pytest.approx(0.72, abs=0.03)
    assert sizes.min() >= 160 and sizes.max() <= 640


def test_natural_image_has_photo_like_structure() -> None:
    pixels = fd.natural_image(np.random.default_rng(3), 120, 160)
    assert pixels.shape == (120, 160, 3) and pixels.dtype == np.uint8
    assert pixels.reshape(-1, 3).std(axis=0).min() > 15  # not a flat colour
    # Neighbours are correlated (unlike white noise), and energy falls with frequency.
    lum = pixels.mean(axis=2)
    corr = np.corrcoef(lum[:, :-1].ravel(), lum[:, 1:].ravel())[0, 1]
    assert 0.5 < corr < 0.99, corr
    power = np.abs(np.fft.rfft2(lum - lum.mean())) ** 2
    assert power[1:6, 1:6].mean() > 20 * power[50:60, 60:80].mean()


def test_generators_are_deterministic_per_seed() -> None:
    one = fd.imagenet_like_jpeg(np.random.default_rng(11), size=(64, 48))
    assert one == fd.imagenet_like_jpeg(np.random.default_rng(11), size=(64, 48))
    assert one != fd.imagenet_like_jpeg(np.random.default_rng(12), size=(64, 48))
    assert Image.open(io.BytesIO(one)).size == (64, 48)


def _read_tree(root: str) -> dict[str, bytes]:
    out = {}
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, root)] = f.read()
    return out


def test_write_image_folder_layout_counts_and_determinism(tmp_path) -> None:
    paths = fd.write_image_folder(tmp_path / "a", classes=3, per_class=[4, 1, 2], seed=9, size=(40, 30))
    tree = _read_tree(str(tmp_path / "a"))
    assert sorted(tree) == sorted(os.path.relpath(p, tmp_path / "a") for p in paths)
    assert sorted(tree) == [
        "n01440764/n01440764_0.JPEG", "n01440764/n01440764_1.JPEG",
        "n01440764/n01440764_2.JPEG", "n01440764/n01440764_3.JPEG",
        "n01441764/n01441764_0.JPEG",
        "n01442764/n01442764_0.JPEG", "n01442764/n01442764_1.JPEG",
    ]  # fmt: skip
    assert all(Image.open(io.BytesIO(b)).size == (40, 30) for b in tree.values())
    assert len(set(tree.values())) == 7
    # Same seed, two worker processes: the same bytes. Another seed: other bytes.
    fd.write_image_folder(tmp_path / "b", classes=3, per_class=[4, 1, 2], seed=9,
                          size=(40, 30), workers=2)  # fmt: skip
    assert _read_tree(str(tmp_path / "b")) == tree
    fd.write_image_folder(tmp_path / "c", classes=3, per_class=[4, 1, 2], seed=10, size=(40, 30))
    assert _read_tree(str(tmp_path / "c")).keys() == tree.keys()
    assert _read_tree(str(tmp_path / "c")) != tree
    assert not [n for n in os.listdir(tmp_path / "b" / "n01440764") if n.startswith(".")]


def test_write_image_folder_generic_names_and_bad_counts(tmp_path) -> None:
    paths = fd.write_image_folder(tmp_path, classes=2, per_class=1, imagenet_names=False,
                                  size=(8, 8))  # fmt: skip
    assert [os.path.relpath(p, tmp_path) for p in paths] == [
        os.path.join("class_000", "class_000_0.JPEG"),
        os.path.join("class_001", "class_001_0.JPEG"),
    ]
    assert fd.class_names(1001, imagenet_names=False)[-1] == "class_1000"
    with pytest.raises(ConfigError, match="per_class must be"):
        fd.write_image_folder(tmp_path, classes=2, per_class=[1, 2, 3])
    with pytest.raises(ConfigError, match=r"classes must be .* Received: classes=0"):
        fd.class_names(0)


def test_write_validation_flat_matches_the_ilsvrc_labels_file(tmp_path) -> None:
    labels_path = tmp_path / "imagenet_2012_validation_synset_labels.txt"
    pairs = fd.write_validation_flat(tmp_path / "val", labels_path, classes=4, count=13,
                                     size=(16, 12))  # fmt: skip
    names = sorted(os.listdir(tmp_path / "val"))
    assert names[0] == "ILSVRC2012_val_00000001.JPEG" and len(names) == 13
    assert [os.path.basename(p) for p, _ in pairs] == names
    lines = labels_path.read_text().splitlines()
    assert lines == [synset for _, synset in pairs]
    assert set(lines) <= set(fd.class_names(4)) and len(set(lines)) > 1


def test_write_oddities_writes_each_kind_where_promised(tmp_path) -> None:
    classes = fd.class_names(3)
    paths = fd.write_oddities(tmp_path, classes=classes, seed=1)
    assert list(paths) == list(fd.ODDITY_KINDS + fd.GENERIC_ODDITY_KINDS)
    assert {os.path.basename(os.path.dirname(p)) for p in paths.values()} == set(classes)
    data = {kind: pathlib.Path(path).read_bytes() for kind, path in paths.items()}

    def mode(kind: str) -> str:
        return Image.open(io.BytesIO(data[kind])).mode

    assert mode("cmyk") == "CMYK" and mode("grayscale") == "L" and mode("rgba_png") == "RGBA"
    assert Image.open(io.BytesIO(data["progressive"])).info.get("progressive") == 1
    assert paths["png_as_jpeg"].endswith(".JPEG") and sniff_format(data["png_as_jpeg"]) == "png"
    assert data["empty"] == b"" and sniff_format(data["not_image"]) is None
    assert {k: sniff_format(data[k]) for k in ("gif", "bmp", "webp")} == {
        "gif": "gif", "bmp": "bmp", "webp": "webp",
    }  # fmt: skip
    assert {os.path.splitext(paths[k])[1] for k in fd.ODDITY_KINDS} == {".JPEG"}
    # What a converter must do with each: skip exactly the undecodable ones.
    skipped = set()
    for kind, blob in data.items():
        try:
            out = normalize_image(blob)
        except UndecodableImage:
            skipped.add(kind)
        else:
            assert Image.open(io.BytesIO(out.jpeg)).mode == "RGB"
    assert skipped == fd.UNDECODABLE_ODDITIES
    assert fd.write_oddities(tmp_path / "x", generic=False).keys() == set(fd.ODDITY_KINDS)


def test_make_table_types_label_and_determinism() -> None:
    df = fd.make_table(37, seed=4)
    assert {c: str(t) for c, t in df.dtypes.items()} == {
        "int64_0": "int64", "int32_0": "int32", "float64_0": "float64",
        "float32_0": "float32", "bool_0": "bool", "str_0": str(pd.Series(["a"]).dtype),
        "cat_0": "category", "label": "int64",
    }  # fmt: skip
    assert df["int64_0"].abs().max() > 2**53  # float64 can't hold it: round trips must be exact
    assert set(df["label"]) == {0, 1} and not df.isna().any().any()
    assert "東京" in set(df["str_0"]) or "naïve" in set(df["str_0"])
    pd.testing.assert_frame_equal(df, fd.make_table(37, seed=4))
    assert not df.equals(fd.make_table(37, seed=5))
    three = fd.make_table(300, seed=4, label_classes=3)["label"]
    assert sorted(three.unique()) == [0, 1, 2]


def test_make_table_forty_columns_and_nulls() -> None:
    wide = fd.make_table(50, columns=40)
    assert wide.shape == (50, 41) and wide.columns[-1] == "label"
    kinds = {str(t) for t in wide.dtypes}
    assert {"float32", "float64", "int64", "int32", "bool", "category"} <= kinds
    assert (wide.dtypes == "float32").sum() >= 10
    nulls = fd.make_table(37, seed=2, with_nulls=True)
    per_column = nulls.isna().sum()
    assert (per_column.drop("label") >= 1).all() and per_column["label"] == 0
    assert str(nulls.dtypes["int64_0"]) == "Int64" and str(nulls.dtypes["bool_0"]) == "boolean"


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_write_table_round_trips(tmp_path, suffix: str) -> None:
    df = fd.make_table(23, seed=6)
    path = fd.write_table(df, tmp_path / f"t{suffix}")
    back = pd.read_csv(path) if suffix == ".csv" else pd.read_parquet(path)
    assert list(back.columns) == list(df.columns) and len(back) == 23
    assert back["int64_0"].tolist() == df["int64_0"].tolist()
    assert back["str_0"].tolist() == df["str_0"].tolist()  # commas, quotes, non-ASCII
    with pytest.raises(ConfigError, match="path must be"):
        fd.write_table(df, tmp_path / "t.xlsx")

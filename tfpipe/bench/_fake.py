"""Synthetic data for the `tfpipe bench` default, tests and benchmarks: photos and tables.

`tfpipe.testing.fake_data` re-exports it for users' own tests.

The JPEGs are meant to cost what ImageNet's cost to read and decode. `natural_image` draws 1/f
("pink") noise, whose spectrum falls off like a photograph's, plus soft-edged textured shapes;
`imagenet_like_jpeg` draws ImageNet-like sizes (mean about 470x390) and encodes at quality 90,
which gives a mean file size of about 108 KB, ImageNet's train-set mean. Flat colours would
encode to a few KB and decode several times faster than real data.

Everything is deterministic per seed and uses numpy and Pillow only (no TensorFlow).
"""

from __future__ import annotations

import functools
import io
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from tfpipe.convert.parallel import worker_context
from tfpipe.errors import ConfigError, field_error

if TYPE_CHECKING:
    import pandas as pd  # imported lazily: image-only users don't pay for it

# The ImageNet-1k train set's figures (1,281,167 JPEGs), which the generated images match: mean
# file size and mean resolution.
IMAGENET_MEAN_BYTES = 108_000
IMAGENET_MEAN_SIZE = (390, 470)  # (height, width)

# Calibrated on 1,000 images from imagenet_like_jpeg(default_rng(0)): mean 107.9 KB (sd 27 KB)
# at quality 90 and 469x392 mean size. tests/testing/test_fake_data.py checks 40 of another seed.
_LUM_AMP = 48.0  # strength of the luminance texture, in 8-bit levels
_BASE_LUM_AMP = 30.0  # smooth luminance variation (lighting)
_BETA = 0.75  # amplitude spectrum ~ 1/f^beta; photos are near 1, lower adds fine detail
_CHROMA_AMP = 25.0
_LOW_BETA = 1.6  # the smooth fields (lighting, colour, where texture is strong) fall off faster
_SHAPE_TEXTURE_AMP = 50.0

# Bumped whenever the same seed starts giving other bytes, so caches of generated data (the
# bench's embedded dataset) can include it in their key.
GENERATOR_VERSION = 2

_SYNSET_BASE = 1_440_764  # n01440764, ImageNet's first synset (tench)


# ---------------------------------------------------------------------------- images


def imagenet_like_size(rng: np.random.Generator) -> tuple[int, int]:
    """Draws an ImageNet-like (height, width): most 500 px on the long side, mean ~470x390.

    Long side 500 for 72% of images (as in ImageNet) and 300-640 otherwise; aspect 4:3, 3:2,
    5:4, 16:9 or square; 18% portrait.
    """
    long_side = 500 if rng.random() < 0.72 else int(rng.integers(300, 641))
    aspect = float(rng.choice([4 / 3, 3 / 2, 5 / 4, 16 / 9, 1.0], p=[0.5, 0.25, 0.1, 0.05, 0.1]))
    short_side = round(long_side / aspect)
    if rng.random() < 0.82:
        return short_side, long_side
    return long_side, short_side


def natural_image(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """Returns a photo-like uint8 array of shape (height, width, 3).

    Pink-noise luminance whose strength varies by region, smooth colour fields, and 3-9
    soft-edged textured ellipses and polygons: JPEG size and decode cost are close to a real
    photo's, unlike flat colours or white noise. About 19 ms of CPU for 470x390, measured on
    a shared 2-core machine (53 images/s per core, JPEG encoding included).
    """
    if height < 1 or width < 1:
        raise field_error(ConfigError, "height and width", ">= 1", (height, width))
    # Built as Y, Cb, Cr planes: the fine texture lives in luminance, as in photos.
    texture = _pink_noise(rng, height, width, 1, _BETA)[0]
    low = _pink_noise(rng, max(4, height // 8), max(4, width // 8), 4, _LOW_BETA)
    centre = np.array([rng.uniform(70, 180), *rng.normal(128, 20, 2), 0.0], np.float32)
    amps = np.array([_BASE_LUM_AMP, _CHROMA_AMP, _CHROMA_AMP, 0.0], np.float32)[:, None, None]
    fields = centre[:, None, None] + amps * low
    # Some regions are busy and some smooth, as in photos (and JPEG size depends on it).
    fields[3] = 255 / (1 + np.exp(-2.0 * low[3]))
    # One 4-band uint8 resize upsamples all four smooth fields at once, much faster than four
    # "F" resizes. CMYK, not RGBA: Pillow premultiplies alpha when resizing RGBA.
    small = Image.fromarray(np.clip(fields, 0, 255).astype(np.uint8).transpose(1, 2, 0), "CMYK")
    big = small.resize((width, height), Image.Resampling.BILINEAR).split()
    planes = [np.asarray(band, np.float32) for band in big[:3]]
    strength = np.asarray(big[3], np.float32) * np.float32(_LUM_AMP / 255)
    planes[0] += texture * (strength + np.float32(0.3 * _LUM_AMP))
    _draw_shapes(rng, planes, texture[::-1, ::-1])
    ycbcr = [Image.fromarray(np.clip(p, 0, 255).astype(np.uint8), "L") for p in planes]
    return np.asarray(Image.merge("YCbCr", ycbcr).convert("RGB"))


def encode_jpeg(pixels: np.ndarray, quality: int = 90) -> bytes:
    """Encodes an (H, W, 3) or (H, W) uint8 array as a baseline 4:2:0 JPEG."""
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, "JPEG", quality=quality, subsampling="4:2:0")
    return buf.getvalue()


def imagenet_like_jpeg(
    rng: np.random.Generator, *, size: tuple[int, int] | None = None, quality: int = 90
) -> bytes:
    """Returns the bytes of one ImageNet-like JPEG (mean ~108 KB at the default settings).

    Args:
      rng: source of randomness; the same state gives the same bytes.
      size: (width, height); None draws an ImageNet-like size.
      quality: JPEG quality.
    """
    if size is None:
        height, width = imagenet_like_size(rng)
    else:
        width, height = _check_size(size)
    return encode_jpeg(natural_image(rng, height, width), quality)


def _pink_noise(rng: np.random.Generator, height: int, width: int, channels: int, beta: float) -> np.ndarray:
    """Returns (channels, height, width) float32 noise with amplitude ~ 1/f^beta, unit std."""
    # Uniform, not normal, draws: 4x cheaper, and the inverse FFT sums them into Gaussians.
    spectrum = rng.random((channels, height, width // 2 + 1, 2), dtype=np.float32) - 0.5
    spectrum = spectrum.view(np.complex64)[..., 0]
    spectrum *= _inverse_frequency(height, width, beta)
    out = np.fft.irfft2(spectrum, s=(height, width))
    out /= out.std(axis=(1, 2), keepdims=True) + np.float32(1e-6)
    return out


@functools.lru_cache(maxsize=64)
def _inverse_frequency(height: int, width: int, beta: float) -> np.ndarray:
    fy = np.fft.fftfreq(height).astype(np.float32)[:, None]
    fx = np.fft.rfftfreq(width).astype(np.float32)[None, :]
    f2 = fy * fy + fx * fx
    f2[0, 0] = 1.0
    amp = f2 ** np.float32(-beta / 2)
    amp[0, 0] = 0.0  # no DC: the base colour sets the mean
    amp.flags.writeable = False
    return amp


def _draw_shapes(rng: np.random.Generator, planes: list[np.ndarray], texture: np.ndarray) -> None:
    """Composites 3-9 textured, soft-edged ellipses and polygons onto Y, Cb, Cr `planes`."""
    height, width = planes[0].shape
    layers = [Image.new("L", (width, height)) for _ in range(5)]  # Y, Cb, Cr, texture, alpha
    draws = [ImageDraw.Draw(layer) for layer in layers]
    for _ in range(int(rng.integers(3, 10))):
        radius = float(rng.uniform(0.08, 0.4)) * min(width, height)
        cx, cy = float(rng.uniform(0, width)), float(rng.uniform(0, height))
        fills = [int(rng.integers(25, 230)), *rng.integers(60, 196, 2).tolist(),
                 int(rng.integers(40, 255)), 255]  # fmt: skip
        if rng.random() < 0.5:
            rx, ry = radius * rng.uniform(0.5, 1.3, 2)
            for draw, fill in zip(draws, fills, strict=True):
                draw.ellipse((cx - rx, cy - ry, cx + rx, cy + ry), fill=fill)
        else:
            n = int(rng.integers(3, 8))
            angles = np.sort(rng.uniform(0, 2 * np.pi, n))
            radii = radius * rng.uniform(0.5, 1.3, n)
            xs, ys = (cx + radii * np.cos(angles)).tolist(), (cy + radii * np.sin(angles)).tolist()
            for draw, fill in zip(draws, fills, strict=True):
                draw.polygon(list(zip(xs, ys, strict=True)), fill=fill)
    alpha = np.asarray(layers[4].filter(ImageFilter.BoxBlur(1)), np.float32) / np.float32(255)
    gain = np.asarray(layers[3], np.float32) * np.float32(_SHAPE_TEXTURE_AMP / 255)
    for i, plane in enumerate(planes):
        fill = np.asarray(layers[i], np.float32)
        if i == 0:
            fill += texture * gain
        plane += alpha * (fill - plane)


def _check_size(size: tuple[int, int]) -> tuple[int, int]:
    if len(size) != 2 or min(int(size[0]), int(size[1])) < 1:
        raise field_error(ConfigError, "size", "(width, height) with both >= 1", size)
    return int(size[0]), int(size[1])


# ---------------------------------------------------------------------------- image folders

ODDITY_KINDS: tuple[str, ...] = (
    "cmyk",
    "grayscale",
    "png_as_jpeg",
    "progressive",
    "truncated",
    "empty",
    "not_image",
)
GENERIC_ODDITY_KINDS: tuple[str, ...] = ("gif", "bmp", "webp", "rgba_png")
UNDECODABLE_ODDITIES: frozenset[str] = frozenset({"truncated", "empty", "not_image"})


def class_names(classes: int, *, imagenet_names: bool = True) -> list[str]:
    """Returns `classes` folder names in sorted order: `n01440764`-style synsets or `class_000`."""
    if classes < 1:
        raise field_error(ConfigError, "classes", "an int >= 1", classes)
    if imagenet_names:
        return [f"n{_SYNSET_BASE + 1000 * i:08d}" for i in range(classes)]
    width = max(3, len(str(classes - 1)))
    return [f"class_{i:0{width}d}" for i in range(classes)]


def write_image_folder(
    root: str | os.PathLike[str],
    *,
    classes: int,
    per_class: int | Sequence[int],
    seed: int = 0,
    imagenet_names: bool = True,
    size: tuple[int, int] | None = None,
    quality: int = 90,
    workers: int = 1,
) -> list[str]:
    """Writes an ImageNet-style train tree `root/<class>/<class>_<i>.JPEG`.

    Args:
      root: the folder to write into; created if missing.
      classes: how many class folders.
      per_class: images per class, one count for all or one per class.
      seed: the same seed writes the same bytes, whatever `workers` is.
      imagenet_names: synset-like folder names (`n01440764`) instead of `class_000`.
      size: (width, height) for every image, e.g. (64, 48) for fast tests; None draws
        ImageNet-like sizes (mean ~108 KB per file).
      quality: JPEG quality.
      workers: processes to generate with (about 10 ms per ImageNet-like image on one core).

    Returns:
      The paths written, sorted.
    """
    names = class_names(classes, imagenet_names=imagenet_names)
    counts = [per_class] * classes if isinstance(per_class, int) else list(per_class)
    if len(counts) != classes or any(c < 0 for c in counts):
        raise field_error(ConfigError, "per_class", f"an int >= 0 or {classes} of them", per_class)
    jobs = []
    for label, (name, count) in enumerate(zip(names, counts, strict=True)):
        os.makedirs(os.path.join(root, name), exist_ok=True)
        for i in range(count):
            path = os.path.join(root, name, f"{name}_{i}.JPEG")
            jobs.append((path, (seed, 0, label, i), size, quality))
    _run_jobs(jobs, workers)
    return sorted(job[0] for job in jobs)


def write_validation_flat(
    root: str | os.PathLike[str],
    labels_path: str | os.PathLike[str],
    *,
    classes: int,
    count: int,
    seed: int = 0,
    imagenet_names: bool = True,
    size: tuple[int, int] | None = None,
    quality: int = 90,
    workers: int = 1,
) -> list[tuple[str, str]]:
    """Writes an ILSVRC-style validation split: a flat folder plus a labels file.

    Files are `ILSVRC2012_val_00000001.JPEG` onwards; the labels file has one class name per
    line in sorted file-name order, like `imagenet_2012_validation_synset_labels.txt`.

    Returns:
      (path, class name) for every file, sorted by path.
    """
    names = class_names(classes, imagenet_names=imagenet_names)
    if count < 1:
        raise field_error(ConfigError, "count", "an int >= 1", count)
    labels = np.random.default_rng([seed, 1]).integers(0, classes, count)
    os.makedirs(root, exist_ok=True)
    jobs, pairs = [], []
    for i, label in enumerate(labels.tolist(), start=1):
        path = os.path.join(root, f"ILSVRC2012_val_{i:08d}.JPEG")
        jobs.append((path, (seed, 1, label, i), size, quality))
        pairs.append((path, names[label]))
    _run_jobs(jobs, workers)
    _write_atomic(labels_path, "".join(name + "\n" for _, name in pairs).encode())
    return pairs


def write_oddities(
    root: str | os.PathLike[str],
    *,
    classes: int | Sequence[str] = 2,
    seed: int = 0,
    size: tuple[int, int] = (64, 48),
    generic: bool = True,
) -> dict[str, str]:
    """Writes ImageNet's odd files into class folders, one of each kind in ODDITY_KINDS.

    The kinds are a CMYK JPEG, a grayscale JPEG, a PNG named `.JPEG`, a progressive JPEG, a
    truncated JPEG, an empty file and a text file named `.JPEG`; with `generic`, also a GIF,
    a BMP, a WebP and an RGBA PNG under their own extensions (GENERIC_ODDITY_KINDS). The kinds
    in UNDECODABLE_ODDITIES are the ones a converter must skip.

    Args:
      root: the dataset folder; files go into `root/<class>/`, spread over the classes.
      classes: how many synset-like folders, or their names (e.g. those of an existing tree).
      seed: seeds the pixels.
      size: (width, height) of the images.
      generic: also write the non-JPEG formats.

    Returns:
      {kind: path}.
    """
    names = class_names(classes) if isinstance(classes, int) else list(classes)
    width, height = _check_size(size)
    rng = np.random.default_rng([seed, 2])
    rgb = Image.fromarray(natural_image(rng, height, width))
    files: dict[str, bytes] = {
        "cmyk": _save(to_cmyk(rgb), "JPEG", quality=90),
        "grayscale": _save(rgb.convert("L"), "JPEG", quality=90),
        "png_as_jpeg": _save(rgb, "PNG"),
        "progressive": _save(rgb, "JPEG", quality=90, progressive=True),
        "truncated": _save(rgb, "JPEG", quality=90)[: -max(64, width * height // 20)],
        "empty": b"",
        "not_image": b"This is not an image; ImageNet has no such file, but users' trees do.\n",
    }
    suffixes = dict.fromkeys(files, ".JPEG")
    if generic:
        alpha = Image.fromarray(rng.integers(0, 256, (height, width), dtype=np.uint8), "L")
        rgba = rgb.copy()
        rgba.putalpha(alpha)
        files |= {
            "gif": _save(rgb, "GIF"),
            "bmp": _save(rgb, "BMP"),
            "webp": _save(rgb, "WEBP", quality=90),
            "rgba_png": _save(rgba, "PNG"),
        }
        suffixes |= {"gif": ".gif", "bmp": ".bmp", "webp": ".webp", "rgba_png": ".png"}
    paths = {}
    for i, (kind, data) in enumerate(files.items()):
        name = names[i % len(names)]
        os.makedirs(os.path.join(root, name), exist_ok=True)
        paths[kind] = os.path.join(root, name, f"{name}_odd_{kind}{suffixes[kind]}")
        _write_atomic(paths[kind], data)
    return paths


def to_cmyk(rgb: Image.Image) -> Image.Image:
    """RGB to CMYK with a black channel, as print-ready files have (Pillow's own gives K=0).

    Inverts the rendering Pillow and `tf.io.decode_jpeg` share, R = (255-C)(255-K)/255, so
    either decoder shows the original picture again.
    """
    pixels = np.asarray(rgb, np.float32)
    k = np.floor((255 - pixels.max(axis=2, keepdims=True)) * 0.75)
    cmy = 255 - np.round(pixels * 255 / (255 - k))
    return Image.fromarray(np.concatenate([cmy, k], axis=2).clip(0, 255).astype(np.uint8), "CMYK")


def _save(image: Image.Image, fmt: str, **options: object) -> bytes:
    buf = io.BytesIO()
    image.save(buf, fmt, **options)
    return buf.getvalue()


def _write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Writes via a hidden temporary name, so an interrupted run leaves no partial file."""
    head, tail = os.path.split(os.fspath(path))
    tmp = os.path.join(head, f".{tail}.tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _write_one(job: tuple[str, tuple[int, ...], tuple[int, int] | None, int]) -> None:
    path, key, size, quality = job
    _write_atomic(path, imagenet_like_jpeg(np.random.default_rng(key), size=size, quality=quality))


def _run_jobs(jobs: list, workers: int) -> None:
    if workers < 1:
        raise field_error(ConfigError, "workers", "an int >= 1", workers)
    if workers == 1 or len(jobs) < 2 * workers:
        for job in jobs:
            _write_one(job)
        return
    # worker_context() forks while TensorFlow is not loaded and uses a fork server once it is
    # (TF's threads do not survive a fork).
    with ProcessPoolExecutor(workers, mp_context=worker_context()) as pool:
        list(pool.map(_write_one, jobs, chunksize=max(1, len(jobs) // (8 * workers))))


# ---------------------------------------------------------------------------- tables

# One of each source type the converter maps (int64, int32, float64, float32, bool, str,
# category); wider tables repeat the mix below, mostly floats as in Higgs- or Criteo-like data.
_BASE_KINDS = ("int64", "int32", "float64", "float32", "bool", "str", "cat")
_EXTRA_KINDS = ("float32", "float32", "float64", "int64", "float32", "cat", "int32", "bool", "str")
# Non-ASCII, a comma and a quote make CSV round trips prove something. No "": CSV reads it as NaN.
_WORDS = np.array(
    ["alpha", "beta", "gamma", "naïve", "東京", "x" * 40, "delta, with comma", 'quote "q"'], object
)
_CATEGORIES = ["red", "green", "blue", "cyan", "magenta"]
_NULLABLE = {"int64": "Int64", "int32": "Int32", "bool": "boolean"}  # pandas' NA-capable dtypes


def make_table(
    n_rows: int,
    *,
    seed: int = 0,
    columns: int | None = None,
    with_nulls: bool = False,
    label_classes: int = 2,
) -> pd.DataFrame:
    """Returns a mixed-type table with a learnable int64 `label` column, deterministic per seed.

    Args:
      n_rows: rows.
      seed: the same seed gives the same table.
      columns: feature columns; None (or 7) gives one each of int64, int32, float64, float32,
        bool, str and category. More repeat a float-heavy mix: `columns=40` is the tabular
        benchmark's table. Names are `<kind>_<k>`, e.g. `float32_0`.
      with_nulls: about 5% nulls in every feature column, at least one each: NaN in floats,
        pandas NA in ints (nullable `Int64`/`Int32`) and bools (`boolean`), missing strings
        and categories. The label never has nulls.
      label_classes: the label takes values 0..label_classes-1.

    Example:
      >>> make_table(37, seed=1).dtypes["int32_0"]
      dtype('int32')
    """
    import pandas as pd

    if n_rows < 1:
        raise field_error(ConfigError, "n_rows", "an int >= 1", n_rows)
    n_cols = len(_BASE_KINDS) if columns is None else columns
    if n_cols < 1:
        raise field_error(ConfigError, "columns", "None or an int >= 1", columns)
    if label_classes < 2:
        raise field_error(ConfigError, "label_classes", "an int >= 2", label_classes)
    kinds = (_BASE_KINDS + _EXTRA_KINDS * (n_cols // len(_EXTRA_KINDS) + 1))[:n_cols]
    rng = np.random.default_rng([seed, 3])
    data: dict[str, object] = {}
    score = rng.normal(0, 0.5, n_rows)  # label noise
    seen: dict[str, int] = {}
    for kind in kinds:
        k = seen[kind] = seen.get(kind, -1) + 1
        values = _column(rng, kind, k, n_rows)
        score += _standardized(values) * rng.normal()
        if with_nulls:
            null = rng.random(n_rows) < 0.05
            null[(len(data) * 7) % n_rows] = True
            values = _with_nulls(values, null, kind)
        data[f"{kind}_{k}"] = values
    cuts = np.quantile(score, np.linspace(0, 1, label_classes + 1)[1:-1])
    data["label"] = np.searchsorted(cuts, score).astype(np.int64)
    return pd.DataFrame(data)


def write_table(df: pd.DataFrame, path: str | os.PathLike[str]) -> str:
    """Writes `df` without its index, as CSV (`.csv`, `.csv.gz`) or Parquet (`.parquet`, `.pq`)."""
    path = os.fspath(path)
    if path.endswith((".csv", ".csv.gz")):
        df.to_csv(path, index=False)
    elif path.endswith((".parquet", ".pq")):
        df.to_parquet(path, index=False)
    else:
        raise field_error(ConfigError, "path", "a .csv, .csv.gz, .parquet or .pq name", path)
    return path


def _column(rng: np.random.Generator, kind: str, k: int, n: int) -> object:
    import pandas as pd

    if kind == "int64":
        # The first int64 column spans 2**62, so a float round trip would show.
        high = 2**62 if k == 0 else 10_000
        return rng.integers(-high, high, n, dtype=np.int64)
    if kind == "int32":
        return rng.integers(-(2**31), 2**31, n, dtype=np.int32)
    if kind == "float64":
        return rng.normal(0, 1e3, n)
    if kind == "float32":
        return rng.standard_normal(n, dtype=np.float32)
    if kind == "bool":
        return rng.random(n) < 0.3
    if kind == "str":
        return _WORDS[rng.integers(0, len(_WORDS), n)]
    return pd.Categorical.from_codes(rng.integers(0, len(_CATEGORIES), n), _CATEGORIES)


def _standardized(values: object) -> np.ndarray:
    import pandas as pd

    if isinstance(values, pd.Categorical):
        x = values.codes.astype(np.float64)
    elif values.dtype == object:
        x = np.fromiter((len(v) for v in values), np.float64, len(values))
    else:
        x = np.asarray(values, np.float64)
    return (x - x.mean()) / (x.std() + 1e-9)


def _with_nulls(values: object, null: np.ndarray, kind: str) -> object:
    import pandas as pd

    if kind in _NULLABLE:
        out = pd.array(values, dtype=_NULLABLE[kind])
        out[null] = pd.NA
        return out
    if kind == "cat":
        return pd.Categorical.from_codes(np.where(null, -1, values.codes), values.categories)
    out = values.copy()
    out[null] = None if kind == "str" else np.nan
    return out

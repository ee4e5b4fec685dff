"""Image folder trees as users have them: ImageNet-style class folders, an ILSVRC-style flat
validation split with its labels file, and ImageNet's odd files (CMYK, PNG named .JPEG,
truncated, empty...). Files are written atomically (`tfpipe.storage.write_atomic`), so an
interrupted run leaves no partial file.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from PIL import Image

from tfpipe import storage
from tfpipe._workers import worker_context
from tfpipe.errors import ConfigError, field_error
from tfpipe.synthetic.images import check_size, imagenet_like_jpeg, natural_image, save, to_cmyk

_SYNSET_BASE = 1_440_764  # n01440764, ImageNet's first synset (tench)

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
    _write(labels_path, "".join(name + "\n" for _, name in pairs).encode())
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
    width, height = check_size(size)
    rng = np.random.default_rng([seed, 2])
    rgb = Image.fromarray(natural_image(rng, height, width))
    files: dict[str, bytes] = {
        "cmyk": save(to_cmyk(rgb), "JPEG", quality=90),
        "grayscale": save(rgb.convert("L"), "JPEG", quality=90),
        "png_as_jpeg": save(rgb, "PNG"),
        "progressive": save(rgb, "JPEG", quality=90, progressive=True),
        "truncated": save(rgb, "JPEG", quality=90)[: -max(64, width * height // 20)],
        "empty": b"",
        "not_image": b"This is not an image; ImageNet has no such file, but users' trees do.\n",
    }
    suffixes = dict.fromkeys(files, ".JPEG")
    if generic:
        alpha = Image.fromarray(rng.integers(0, 256, (height, width), dtype=np.uint8), "L")
        rgba = rgb.copy()
        rgba.putalpha(alpha)
        files |= {
            "gif": save(rgb, "GIF"),
            "bmp": save(rgb, "BMP"),
            "webp": save(rgb, "WEBP", quality=90),
            "rgba_png": save(rgba, "PNG"),
        }
        suffixes |= {"gif": ".gif", "bmp": ".bmp", "webp": ".webp", "rgba_png": ".png"}
    paths = {}
    for i, (kind, data) in enumerate(files.items()):
        name = names[i % len(names)]
        os.makedirs(os.path.join(root, name), exist_ok=True)
        paths[kind] = os.path.join(root, name, f"{name}_odd_{kind}{suffixes[kind]}")
        _write(paths[kind], data)
    return paths


def _write(path: str | os.PathLike[str], data: bytes) -> None:
    # Generated data is cheap to make again: no fsync, which would slow a large tree down.
    storage.write_atomic(os.fspath(path), data, overwrite=True, durable=False)


def _write_one(job: tuple[str, tuple[int, ...], tuple[int, int] | None, int]) -> None:
    path, key, size, quality = job
    _write(path, imagenet_like_jpeg(np.random.default_rng(key), size=size, quality=quality))


def _run_jobs(jobs: list, workers: int) -> None:
    if workers < 1:
        raise field_error(ConfigError, "workers", "an int >= 1", workers)
    if workers == 1 or len(jobs) < 2 * workers:
        for job in jobs:
            _write_one(job)
        return
    # worker_context() forks while TensorFlow is not loaded and uses a fork server once it is
    # (TF's threads do not survive a fork).
    with ProcessPoolExecutor(workers, mp_context=worker_context(preload=[__name__])) as pool:
        list(pool.map(_write_one, jobs, chunksize=max(1, len(jobs) // (8 * workers))))

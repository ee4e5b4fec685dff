"""Image folder sources: `SRC/<class>/<file>` trees and flat ImageNet validation folders.

Inputs are listed, labelled (by sorted class name) and shuffled with a fixed seed, so every
shard mixes classes and the same source always gives the same plan.
"""

from __future__ import annotations

import dataclasses
import os
import random
import re

from tfpipe import storage
from tfpipe.convert.encode import ImageItem
from tfpipe.convert.images import IMAGE_EXTENSIONS
from tfpipe.convert.tables import TABLE_SUFFIXES
from tfpipe.errors import DataError

SYNSET_RE = re.compile(r"^n\d{8}$")


@dataclasses.dataclass(frozen=True, slots=True)
class ImageScan:
    layout: str
    items: tuple[ImageItem, ...]
    class_names: tuple[str, ...]
    label_offset: int
    estimated_bytes: int


def _entries(path: str) -> list[tuple[str, bool, int]]:
    """(name, is_dir, size) of the visible entries under `path`."""
    if storage.is_gcs(path):
        names = storage.listdir(path)
        # GCS has no directories: a name that is also a prefix of others is one.
        return [(n, not os.path.splitext(n)[1], 0) for n in names if not n.startswith(".")]
    out = []
    with os.scandir(path) as it:
        for e in it:
            if not e.name.startswith("."):
                out.append((e.name, e.is_dir(), e.stat().st_size if e.is_file() else 0))
    return sorted(out)


def _is_image_name(name: str) -> bool:
    return os.path.splitext(name)[1].lower() in IMAGE_EXTENSIONS


def detect_format(src: str, labels_file: str | None = None) -> str:
    """Picks imagenet, images, csv or parquet by looking at what `src` holds."""
    if storage.is_gcs(src) and os.path.splitext(src)[1].lower() in TABLE_SUFFIXES:
        return TABLE_SUFFIXES[os.path.splitext(src)[1].lower()]
    if not storage.is_gcs(src) and not os.path.exists(src):
        raise DataError(f"Expected a source folder or table file. Received: {src!r}, which does not exist")
    if not storage.is_gcs(src) and os.path.isfile(src):
        with open(src, "rb") as f:
            head = f.read(4)
        if head == b"PAR1":
            return "parquet"
        suffix = os.path.splitext(src)[1].lower()
        return TABLE_SUFFIXES.get(suffix, "csv")
    entries = _entries(src)
    dirs = [n for n, is_dir, _ in entries if is_dir]
    files = [n for n, is_dir, _ in entries if not is_dir]
    if dirs:
        return "imagenet" if all(SYNSET_RE.match(d) for d in dirs) else "images"
    tables = {TABLE_SUFFIXES[os.path.splitext(n)[1].lower()] for n in files
              if os.path.splitext(n)[1].lower() in TABLE_SUFFIXES}
    if len(tables) == 1:
        return tables.pop()
    if labels_file and any(_is_image_name(n) for n in files):
        return "imagenet"
    raise DataError(
        f"{src}: cannot tell its format. Expected class folders of images, a flat image folder "
        f"with --labels, or CSV/Parquet files. Received: {len(dirs)} folders, {len(files)} files "
        f"(e.g. {files[:3]}). Pass --format."
    )


def scan_class_folders(src: str, layout: str, label_offset: int, seed: int) -> ImageScan:
    """Lists `src/<class>/<image>`; labels are label_offset + index of the sorted class name."""
    classes = [n for n, is_dir, _ in _entries(src) if is_dir]
    if not classes:
        raise DataError(f"{src}: expected class folders (SRC/<class>/<image>). Received: none")
    items: list[ImageItem] = []
    total = 0
    for index, cls in enumerate(classes):
        for name, is_dir, size in _entries(storage.join(src, cls)):
            if not is_dir and _is_image_name(name):
                items.append(ImageItem(storage.join(src, cls, name), label_offset + index, cls))
                total += size
    if not items:
        raise DataError(f"{src}: expected image files ({', '.join(sorted(IMAGE_EXTENSIONS))}) in class folders. Received: none")
    random.Random(seed).shuffle(items)
    return ImageScan(layout, tuple(items), tuple(classes), label_offset, _estimate(items, total))


def scan_validation(src: str, labels_file: str, label_offset: int,
                    class_names: tuple[str, ...] = ()) -> ImageScan:
    """A flat folder plus a labels file, as ImageNet ships its validation split.

    The labels file has one line per image: either just the synset, in sorted file-name order
    (`imagenet_2012_validation_synset_labels.txt`), or `<file name> <synset>`. Labels number
    the synsets as `class_names` does (the train split's, when it is already in the
    destination), else the sorted synsets of the labels file.
    """
    files = [(n, size) for n, is_dir, size in _entries(src) if not is_dir and _is_image_name(n)]
    lines = [ln.split() for ln in storage.iter_lines(labels_file) if ln.strip()]
    if all(len(p) == 2 for p in lines):
        by_name = {p[0]: p[1] for p in lines}
        missing = [n for n, _ in files if n not in by_name]
        if missing:
            raise DataError(f"{labels_file}: no label for {len(missing)} file(s) of {src}, e.g. {missing[:3]}")
        synsets = [by_name[n] for n, _ in files]
    elif all(len(p) == 1 for p in lines):
        if len(lines) != len(files):
            raise DataError(
                f"{labels_file}: expected one synset per image of {src} ({len(files)} images). "
                f"Received: {len(lines)} lines"
            )
        synsets = [p[0] for p in lines]
    else:
        raise DataError(f"{labels_file}: expected lines of '<synset>' or '<file> <synset>'. Received: {lines[:2]}")
    names = class_names or tuple(sorted(set(synsets)))
    index = {s: i for i, s in enumerate(names)}
    unknown = sorted(set(synsets) - set(index))
    if unknown:
        raise DataError(f"{labels_file}: synsets {unknown[:5]} are not among the {len(names)} classes of the dataset")
    items = [ImageItem(storage.join(src, n), label_offset + index[s], s) for (n, _), s in zip(files, synsets)]
    total = sum(size for _, size in files)
    return ImageScan("imagenet", tuple(items), tuple(names), label_offset, _estimate(items, total))


def _estimate(items: list[ImageItem], local_total: int) -> int:
    """Output bytes: input sizes (re-encoding only shrinks what `--resize-shorter` touches)."""
    if local_total or not items:
        return local_total
    sample = items[:: max(1, len(items) // 20)][:20]
    return int(sum(storage.size(i.path) for i in sample) / len(sample) * len(items))

"""The images kind: image class folders (ImageNet's layout, or plain `images`) or a flat folder
with a labels file, listed and shuffled, each image one record (`IMAGE_SCHEMA`)."""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import warnings
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from tfpipe.convert.config import ConvertConfig
from tfpipe.convert.encode import Piece
from tfpipe.convert.kind import Kind, OnWorkers
from tfpipe.convert.sources import PlannedShard, relative
from tfpipe.errors import EmptyClassWarning
from tfpipe.format.manifest import Manifest, Split
from tfpipe.format.schema import IMAGE_SCHEMA, Schema
from tfpipe.modalities.images.convert import detect, flags, folders
from tfpipe.modalities.images.convert.encode import ImageItem, ImageTask

IMAGES_PER_TASK = 16
"""Images per worker task: large enough that IPC is <1% of the encode time of a ~110 KB JPEG,
small enough that a shard's worth of tasks spreads over all workers."""


@dataclasses.dataclass(frozen=True, slots=True)
class ImageInputs:
    """The images of one shard, and how to encode them."""

    kind: ClassVar[str] = "images"

    items: tuple[ImageItem, ...]
    resize_shorter: int | None
    quality: int
    check: str

    def pieces(self, shard: int, first: int, count: int) -> Iterator[Piece]:
        for start in range(0, count, IMAGES_PER_TASK):
            chunk = self.items[start : min(count, start + IMAGES_PER_TASK)]
            yield Piece(shard, first + start, ImageTask(chunk, self.resize_shorter, self.quality, self.check))

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ImageInputs:
        body = dict(obj)
        return cls(tuple(ImageItem(**i) for i in body.pop("items")), **body)


@dataclasses.dataclass(frozen=True, slots=True)
class ImageSource:
    """Image class folders, or a flat folder with a labels file, listed and shuffled."""

    scan: folders.ImageScan
    resize_shorter: int | None
    quality: int
    check: str
    fingerprint: str
    schema: Schema = IMAGE_SCHEMA
    unit: str = "images"
    dropped_rows: int = 0
    kind = "images"
    attachments = ()

    layout = property(lambda self: self.scan.layout)
    notes = property(lambda self: self.scan.notes)
    n_items = property(lambda self: len(self.scan.items))
    inputs = property(lambda self: tuple(i.path for i in self.scan.items))
    identities = property(lambda self: self.scan.identities)
    estimated_bytes = property(lambda self: self.scan.estimated_bytes)
    class_names = property(lambda self: self.scan.class_names)
    label_offset = property(lambda self: self.scan.label_offset)
    skipped = property(lambda self: self.scan.skipped)

    def shard_inputs(self, first: int, end: int) -> ImageInputs:
        return ImageInputs(self.scan.items[first:end], self.resize_shorter, self.quality, self.check)

    def pieces(self, tasks: Sequence[PlannedShard]) -> Iterator[Piece]:
        for task in tasks:
            yield from task.pieces()

    def with_schema(self, schema: Schema) -> ImageSource:
        return self  # an image record's schema is the kind's own (`IMAGE_SCHEMA`)


def open_images(
    src: str,
    fmt: str,
    cfg: ConvertConfig,
    joins: Manifest | None,
    dest: str = "",
    on_workers: OnWorkers | None = None,
) -> ImageSource:
    """Lists image class folders (or a flat folder with a labels file) and shuffles them."""
    offset = cfg.label_offset if cfg.label_offset is not None else (1 if fmt == "imagenet" else 0)
    known = joins.class_names if joins else ()
    if cfg.labels_file:
        scan = folders.scan_validation(src, cfg.labels_file, offset, known)
    else:
        scan = folders.scan_class_folders(src, fmt, offset, cfg.seed, known)
    listing = "\n".join(f"{relative(i.path, src)}\t{i.label}" for i in scan.items)
    digest = hashlib.sha256(listing.encode()).hexdigest()
    return ImageSource(scan, cfg.resize_shorter, cfg.quality, cfg.check, digest)


def warn_emptied_classes(source: ImageSource, manifest: Manifest, split: str) -> None:
    """Warns of each class this split listed but wrote nothing of (every image undecodable)."""
    for name, listed in _emptied_classes(source, manifest.split(split)):
        warnings.warn(
            f"class {name!r} has 0 examples in split {split!r}: all {listed} of its image files "
            "were skipped as undecodable (the manifest lists them). Its label stays reserved, so "
            "no other label shifts; replace the files and convert again with --overwrite.",
            EmptyClassWarning,
            stacklevel=4,
        )


def _emptied_classes(source: ImageSource, split: Split) -> list[tuple[str, int]]:
    """(class name, image files listed) of each class this split listed but wrote nothing of."""
    skipped = {s.input for s in split.skipped}
    listed = collections.Counter(i.label for i in source.scan.items)
    kept = collections.Counter(i.label for i in source.scan.items if i.path not in skipped)
    offset = source.label_offset
    return [(source.class_names[label - offset], n) for label, n in sorted(listed.items()) if not kept[label]]


def unused(cfg: ConvertConfig) -> dict[str, str]:
    """A flat folder with --labels keeps its sorted order: the seed shuffles nothing."""
    if cfg.labels_file is None:
        return {}
    return {"seed": "class-folder trees (a flat folder with --labels keeps its sorted order)"}


IMAGES = Kind(
    name="images",
    formats=("imagenet", "images"),
    open=open_images,
    inputs_from_json=ImageInputs.from_json,
    committed=warn_emptied_classes,
    options={
        "resize_shorter": (),
        "quality": (),
        "check": (),
        "strict": (),
        "labels_file": (),
        "label_offset": (),
        "seed": (),  # it shuffles a class-folder tree's files (a labelled flat folder keeps its order)
    },
    sources={("imagenet", "images"): "image folders"},
    nouns={"imagenet": "an image folder", "images": "an image folder"},
    unused=unused,
    signs=((30, detect.class_folders), (50, detect.labelled_flat_folder)),
    expects=detect.EXPECTS,
    split_folder=detect.split_folder,
    add_flags=flags.add_flags,
)

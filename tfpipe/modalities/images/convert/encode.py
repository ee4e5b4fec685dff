"""The images modality's encoding work: a chunk of images -> imagenet_to_gcs records, in a
worker process (`ImageTask`), or copied in the writing process when every JPEG passes the header
check (`copy_images`). Pure: the same task gives the same bytes."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from tfpipe import storage
from tfpipe.convert.encode import Encoded, EncodedPiece, Work, read_input
from tfpipe.errors import DataError
from tfpipe.format.codec import encode_example
from tfpipe.format.schema import IMAGE_SCHEMA

if TYPE_CHECKING:
    from tfpipe.modalities.images.convert.decode import EncodedImage


@dataclasses.dataclass(frozen=True, slots=True)
class ImageItem:
    """One input image: where it is, and the label it gets."""

    path: str
    label: int
    synset: str
    filename: str = ""  # `image/filename`; "" means the base name of `path`


@dataclasses.dataclass(frozen=True, slots=True)
class ImageTask(Work):
    items: tuple[ImageItem, ...]
    resize_shorter: int | None
    quality: int
    check: str = "decode"

    def encode(self, shard: int, first: int) -> EncodedPiece:
        return EncodedPiece(shard, first, encode_images(self))

    def copy(self, shard: int, first: int) -> EncodedPiece | None:
        return copy_images(self, shard, first)

    def local_files(self) -> list[str]:
        return [item.path for item in self.items if not storage.is_gcs(item.path)]


def encode_images(task: ImageTask) -> list[Encoded]:
    """Encodes a chunk of images. Only undecodable bytes become a skip.

    Raises:
      StorageError: a file could not be read (missing, permissions, a gs:// outage after
        the retries): that fails the run, which `--resume` continues, instead of dropping it.
    """
    # PIL and numpy: loaded where images are encoded
    from tfpipe.modalities.images.convert.decode import (
        UndecodableImage,
        normalize_image,
        trusted_passthrough,
    )

    out = []
    for item in task.items:
        data = read_input(item.path)
        try:
            img = (
                task.check == "header" and trusted_passthrough(data, task.resize_shorter)
            ) or normalize_image(data, resize_shorter=task.resize_shorter, quality=task.quality)
        except UndecodableImage as e:
            out.append(Encoded(None, str(e), len(data), item.path))
            continue
        except Exception as e:  # a failure nobody foresaw: name the file, not only the error
            raise DataError(f"{item.path}: cannot be converted: {type(e).__name__}: {e}") from e
        out.append(Encoded(encode_example(_image_row(item, img), IMAGE_SCHEMA), None, len(data)))
    return out


def _image_row(item: ImageItem, img: EncodedImage) -> dict[str, Any]:
    """The features of one image record (the tensorflow/tpu imagenet_to_gcs layout)."""
    return {
        "image/encoded": img.jpeg,
        "image/format": b"JPEG",
        "image/filename": item.filename or storage.basename(item.path),
        "image/class/label": item.label,
        "image/class/synset": item.synset,
        "image/height": img.height,
        "image/width": img.width,
        "image/colorspace": b"RGB",
        "image/channels": 3,
    }


def copy_images(work: ImageTask, shard: int, first: int) -> EncodedPiece | None:
    """The `check="header"` copy of a piece of JPEGs that all pass the header check, or None.

    None (another check, or an image that needs decoding) sends the piece to a worker, which
    reads it again from the page cache: the copy itself runs in the writing process, so the
    bytes never cross a pipe.
    """
    from tfpipe.modalities.images.convert.decode import trusted_passthrough  # PIL and numpy, as above

    if work.check != "header":
        return None
    out = []
    for item in work.items:
        data = read_input(item.path)
        img = trusted_passthrough(data, work.resize_shorter)
        if not img:
            return None
        out.append(Encoded(encode_example(_image_row(item, img), IMAGE_SCHEMA), None, len(data)))
    return EncodedPiece(shard, first, out)

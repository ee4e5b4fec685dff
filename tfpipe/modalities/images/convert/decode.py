"""Image normalisation for `tfpipe convert`: any supported image file in, an RGB JPEG out.

It follows tensorflow/tpu `imagenet_to_gcs.py`, so shards read like the ones that script writes,
but it finds oddities by content instead of by a hard-coded file list:

- An RGB JPEG (baseline or progressive) that needs no resize is passed through byte-identical.
  It is still decoded once, at 1/8 scale (libjpeg DCT scaling): that runs the whole entropy
  decoder, so a truncated or corrupt stream is caught here and not in the middle of training,
  at about 70% of the cost of a full decode. imagenet_to_gcs decodes every image for the same
  reason.
- CMYK and grayscale JPEGs, PNG, GIF (first frame), BMP and WebP become RGB JPEGs. A file whose
  extension lies (ImageNet's PNG named `.JPEG`) is recognised by its magic bytes.
- Alpha is dropped, not composited: Pillow's `convert("RGB")` keeps the colour channels, as
  `tf.io.decode_png(channels=3)` and `tf.io.decode_image(channels=3)` do, so the records hold
  the pixels a TF reader of the original file would see. A GIF keeps its first frame, as
  `tf.io.decode_image(expand_animations=False)` does, and its transparent pixels are black, as
  TF's GIF decoder (and so Keras' `image_dataset_from_directory`) gives them; Pillow would give
  the palette colour hidden under them. CMYK uses Pillow's conversion, which agrees with
  `tf.io.decode_jpeg(channels=3)` to within 2 levels on average.
- EXIF orientation is ignored, as in imagenet_to_gcs and `tf.io.decode_jpeg`: the stored pixel
  grid is kept. Re-encoded files carry no EXIF or ICC data.
- Re-encoding is deterministic: the same bytes and options give the same output bytes in any
  process with the same Pillow build (no timestamps or metadata; fixed 4:2:0, baseline).

No TensorFlow here: this runs in conversion worker processes.
"""

from __future__ import annotations

import dataclasses
import io
import warnings
from typing import Literal

import numpy as np
from PIL import Image, UnidentifiedImageError

from tfpipe.convert.config import check_image_options
from tfpipe.errors import UndecodableImage

SourceFormat = Literal["jpeg", "png", "gif", "bmp", "webp"]

# Lower-case suffixes the image sources pick up; callers compare `suffix.lower()`.
IMAGE_EXTENSIONS: frozenset[str] = frozenset(
    {".jpeg", ".jpg", ".jpe", ".jfif", ".png", ".gif", ".bmp", ".dib", ".webp"}
)

# Pillow refuses images above 2 x its default MAX_IMAGE_PIXELS (about 13,400 x 13,400) as
# decompression bombs. tfpipe checks the same limit itself, so it holds even where other code
# turned Pillow's check off; an RGB image this size takes 537 MB in a worker.
MAX_PIXELS = 178_956_970

JPEG_MAX_SIDE = 65_500
"""libjpeg's JPEG_MAX_DIMENSION: the widest or tallest image it writes (Pillow then fails with
"broken data stream when writing image file")."""

# A downscaled JPEG is first decoded with DCT scaling to at least this many times the target
# size, then resampled with bicubic. Measured (CPU time, 2000x1500 photo-like JPEGs to shorter
# side 256): 27 ms vs 54 ms for a full decode, same PSNR after re-encoding; Lanczos costs 10-30%
# more for 0.3-1 dB. Other formats use Pillow's reducing_gap, the pixel-domain equivalent.
_REDUCING_GAP = 2.0
_RESAMPLE = Image.Resampling.BICUBIC

_PIL_FORMATS: dict[str, str] = {
    "jpeg": "JPEG",
    "png": "PNG",
    "gif": "GIF",
    "bmp": "BMP",
    "webp": "WEBP",
}
# SOF0 baseline, SOF1 extended and SOF2 progressive Huffman: what every TF build decodes.
# Arithmetic-coded and lossless JPEGs are re-encoded rather than trusted to the reader.
_PASSTHROUGH_SOF = frozenset({0xC0, 0xC1, 0xC2})


@dataclasses.dataclass(frozen=True, slots=True)
class EncodedImage:
    """An RGB JPEG ready for `image/encoded`, with the size of its pixel grid.

    Attributes:
      jpeg: the JPEG bytes, always 3-channel RGB (YCbCr-coded).
      height: rows of the stored image.
      width: columns of the stored image.
      reencoded: False when `jpeg` is the input, byte for byte.
      source_format: the input's real format, from its content.
    """

    jpeg: bytes
    height: int
    width: int
    reencoded: bool
    source_format: SourceFormat


def sniff_format(data: bytes) -> SourceFormat | None:
    """Returns the image format named by the magic bytes of `data`, or None.

    Example:
      >>> sniff_format(b"\\x89PNG\\r\\n\\x1a\\n...")
      'png'
    """
    if data[:3] == b"\xff\xd8\xff":
        return "jpeg"
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "png"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    if data[:2] == b"BM" and len(data) >= 14:
        return "bmp"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    return None


def resized_dims(height: int, width: int, resize_shorter: int | None) -> tuple[int, int]:
    """Returns (height, width) after scaling the shorter side down to `resize_shorter`.

    Images whose shorter side is at most `resize_shorter` keep their size; the longer side is
    rounded half up, and is at least 1.
    """
    short = min(height, width)
    if resize_shorter is None or short <= resize_shorter:
        return height, width
    if height <= width:
        return resize_shorter, max(1, (width * resize_shorter * 2 + short) // (2 * short))
    return max(1, (height * resize_shorter * 2 + short) // (2 * short)), resize_shorter


def normalize_image(data: bytes, *, resize_shorter: int | None = None, quality: int = 90) -> EncodedImage:
    """Turns the bytes of an image file into an RGB JPEG for an `image/encoded` feature.

    Args:
      data: the whole file.
      resize_shorter: if the shorter side is larger than this, scale the image so that it
        equals this (aspect kept) and re-encode. None keeps every size.
      quality: JPEG quality (1-100) for every re-encoded image, including format conversions.
        imagenet_to_gcs re-encodes its 23 odd files at 100; pass 100 to match it exactly.

    Returns:
      The EncodedImage; `reencoded` is False when the input passed through unchanged.

    Raises:
      UndecodableImage: empty, truncated, corrupt, too large or not an image.
      ConfigError: `resize_shorter` or `quality` out of range (`config.check_image_options`).

    Example:
      >>> out = normalize_image(open("n01440764_10026.JPEG", "rb").read(), resize_shorter=320)
      >>> out.height, out.width
      (320, 427)
    """
    check_image_options(resize_shorter, quality)
    data = bytes(data)  # a pass-through returns it, so no memoryview or bytearray escapes
    fmt = _sniff_or_refuse(data)
    label = fmt.upper() if fmt != "webp" else "WebP"
    with warnings.catch_warnings():
        # Size is checked against MAX_PIXELS below; Pillow's warnings would only be noise in
        # the workers' output.
        warnings.simplefilter("ignore")
        try:
            image = Image.open(io.BytesIO(data), formats=[_PIL_FORMATS[fmt]])
        except Exception as e:  # Pillow raises many types for a bad header.
            raise _undecodable(label, e) from None
        with image:
            width, height = _checked_size(image, label)
            out_h, out_w = resized_dims(height, width, resize_shorter)
            _check_jpeg_size(label, (width, height), (out_w, out_h), resize_shorter)
            passthrough = (
                fmt == "jpeg"
                and image.mode == "RGB"
                and (out_h, out_w) == (height, width)
                and _jpeg_sof(data) in _PASSTHROUGH_SOF
            )
            _decode(image, fmt, label, passthrough, (out_w, out_h))
            if passthrough:
                return EncodedImage(data, height, width, reencoded=False, source_format=fmt)
            jpeg = _reencode(image, fmt, (out_w, out_h), quality)
    return EncodedImage(jpeg, out_h, out_w, reencoded=True, source_format=fmt)


def _sniff_or_refuse(data: bytes) -> SourceFormat:
    """The image format of `data` by content; UndecodableImage if it is empty or not an image."""
    if not data:
        raise UndecodableImage("empty file")
    fmt = sniff_format(data)
    if fmt is None:
        raise UndecodableImage(f"not an image: starts with {bytes(data[:12])!r}")
    return fmt


def _checked_size(image: Image.Image, label: str) -> tuple[int, int]:
    """(width, height) from the header; UndecodableImage if zero or above MAX_PIXELS."""
    width, height = image.size
    if width <= 0 or height <= 0:
        raise UndecodableImage(f"zero-size {label} image ({width}x{height})")
    if width * height > MAX_PIXELS:
        raise UndecodableImage(f"{label} image too large: {width}x{height} pixels, limit {MAX_PIXELS}")
    return width, height


def _check_jpeg_size(
    label: str, size: tuple[int, int], out: tuple[int, int], resize_shorter: int | None
) -> None:
    """UndecodableImage if the output would be wider or taller than a JPEG can be."""
    if max(out) <= JPEG_MAX_SIDE:
        return
    resized = f", and {out[0]}x{out[1]} after --resize-shorter {resize_shorter}" if out != size else ""
    raise UndecodableImage(
        f"{label} image of {size[0]}x{size[1]} pixels{resized}: a JPEG holds at most "
        f"{JPEG_MAX_SIDE:,} pixels a side (libjpeg's limit), and records store JPEGs. Crop or "
        "split the image"
    )


def _decode(image: Image.Image, fmt: str, label: str, passthrough: bool, size: tuple[int, int]) -> None:
    """Decodes the pixels: a JPEG at the smallest DCT scale the output allows.

    A pass-through only checks that the stream decodes: 1/8 scale runs the same entropy
    decoder. A JPEG to be shrunk decodes at `_REDUCING_GAP` times the output `size`.
    """
    width, height = image.size
    if passthrough:
        image.draft(None, (max(1, width // 8), max(1, height // 8)))
    elif fmt == "jpeg" and size != (width, height):
        image.draft(None, (int(size[0] * _REDUCING_GAP), int(size[1] * _REDUCING_GAP)))
    try:
        image.load()
    except Exception as e:
        raise _undecodable(label, e) from None


def _reencode(image: Image.Image, fmt: str, size: tuple[int, int], quality: int) -> bytes:
    """The decoded image as an RGB baseline JPEG of `size` (width, height)."""
    rgb = _to_rgb(image)
    if rgb.size != size:
        # JPEGs were already reduced in the DCT domain by draft() in _decode.
        gap = None if fmt == "jpeg" else _REDUCING_GAP
        rgb = rgb.resize(size, _RESAMPLE, reducing_gap=gap)
    buf = io.BytesIO()
    try:
        rgb.save(buf, "JPEG", quality=quality, subsampling="4:2:0", progressive=False)
    except (OSError, ValueError) as e:  # what libjpeg refuses, as an unreadable image is treated
        raise UndecodableImage(f"cannot be stored as a JPEG: {e}") from None
    return buf.getvalue()


def _to_rgb(image: Image.Image) -> Image.Image:
    """Converts any decoded mode to RGB the way TF's decoders with channels=3 would."""
    if image.format == "GIF" and image.mode in ("P", "L") and image.info.get("transparency") is not None:
        # TF's GIF decoder writes 0 for the transparent index; Pillow would show its palette colour.
        hidden = np.asarray(image) == image.info["transparency"]
        rgb = np.array(image.convert("RGB"))
        rgb[hidden] = 0
        return Image.fromarray(rgb, "RGB")
    if image.mode == "RGB":
        return image
    if image.mode.startswith("I"):
        # 16-bit grayscale PNG: keep the high byte, as libpng's strip_16 does for TF. Pillow's
        # own I->RGB conversion clips at 255 instead, which turns most such images white.
        high = (np.asarray(image).astype(np.int64) >> 8).clip(0, 255).astype(np.uint8)
        return Image.fromarray(high, "L").convert("RGB")
    return image.convert("RGB")


def _undecodable(label: str, error: Exception) -> UndecodableImage:
    """Turns a Pillow exception into a short reason for the skip list."""
    message = str(error) or type(error).__name__
    if isinstance(error, UnidentifiedImageError):
        message = "unreadable header"  # Pillow's text names a BytesIO object, not the file
    if isinstance(error, Image.DecompressionBombError):
        return UndecodableImage(f"{label} image too large: {message}")
    if isinstance(error, EOFError) or "truncated" in message.lower():
        return UndecodableImage(f"truncated {label}: {message}")
    return UndecodableImage(f"corrupt {label}: {message}")


def _jpeg_frame(data: bytes) -> tuple[int, int, int, int] | None:
    """Returns (start-of-frame marker byte, height, width, components) of a JPEG, or None.

    The marker byte is 0xC0 for baseline, 0xC2 for progressive, and so on.
    """
    i, n = 2, len(data)
    while i + 4 <= n:
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte before a marker
            i += 1
            continue
        if marker == 0x01 or 0xD0 <= marker <= 0xD8:  # markers without a length
            i += 2
            continue
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            if i + 10 > n:
                return None
            height = int.from_bytes(data[i + 5 : i + 7], "big")
            width = int.from_bytes(data[i + 7 : i + 9], "big")
            return marker, height, width, data[i + 9]
        if marker == 0xDA:  # scan data before any frame header
            return None
        i += 2 + int.from_bytes(data[i + 2 : i + 4], "big")
    return None


def _jpeg_sof(data: bytes) -> int | None:
    """Returns the start-of-frame marker byte of a JPEG (0xC0 baseline, 0xC2 progressive...)."""
    frame = _jpeg_frame(data)
    return frame[0] if frame else None


def trusted_passthrough(data: bytes, resize_shorter: int | None = None) -> EncodedImage | None:
    """The `check="header"` fast path: an RGB JPEG that is whole by its structure, without decoding.

    "Whole" means: a JPEG signature, a baseline or progressive frame header with 3 components
    and a non-zero size that needs no resize, and the end-of-image marker as the last bytes.
    That catches truncation (the common damage in a copy) but not corruption inside the
    entropy-coded data, which the default `check="decode"` finds. Anything else returns None,
    and the caller takes the decoding path.
    """
    if data[:3] != b"\xff\xd8\xff" or data.rstrip(b"\x00")[-2:] != b"\xff\xd9":
        return None
    frame = _jpeg_frame(data)
    if frame is None:
        return None
    marker, height, width, components = frame
    if (
        marker not in _PASSTHROUGH_SOF
        or components != 3
        or height == 0
        or width == 0
        or resized_dims(height, width, resize_shorter) != (height, width)
    ):
        return None
    return EncodedImage(bytes(data), height, width, reencoded=False, source_format="jpeg")

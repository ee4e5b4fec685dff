"""Photo-like images that cost what ImageNet's cost to read and decode.

`natural_image` draws 1/f ("pink") noise, whose spectrum falls off like a photograph's, plus
soft-edged textured shapes; `imagenet_like_jpeg` draws ImageNet-like sizes (mean about
470x390) and encodes at quality 90, which gives a mean file size of about 108 KB, ImageNet's
train-set mean. Flat colours would encode to a few KB and decode several times faster than
real data.

Deterministic per seed; numpy and Pillow only (no TensorFlow).
"""

from __future__ import annotations

import functools
import io

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from tfpipe.errors import ConfigError, field_error

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
        width, height = check_size(size)
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


def check_size(size: tuple[int, int]) -> tuple[int, int]:
    if len(size) != 2 or min(int(size[0]), int(size[1])) < 1:
        raise field_error(ConfigError, "size", "(width, height) with both >= 1", size)
    return int(size[0]), int(size[1])


def to_cmyk(rgb: Image.Image) -> Image.Image:
    """RGB to CMYK with a black channel, as print-ready files have (Pillow's own gives K=0).

    Inverts the rendering Pillow and `tf.io.decode_jpeg` share, R = (255-C)(255-K)/255, so
    either decoder shows the original picture again.
    """
    pixels = np.asarray(rgb, np.float32)
    k = np.floor((255 - pixels.max(axis=2, keepdims=True)) * 0.75)
    cmy = 255 - np.round(pixels * 255 / (255 - k))
    return Image.fromarray(np.concatenate([cmy, k], axis=2).clip(0, 255).astype(np.uint8), "CMYK")


def save(image: Image.Image, fmt: str, **options: object) -> bytes:
    buf = io.BytesIO()
    image.save(buf, fmt, **options)
    return buf.getvalue()

"""tfpipe.modalities.images.convert.decode: every input becomes an RGB JPEG that TensorFlow decodes, or a reason."""

from __future__ import annotations

import io
import multiprocessing
import struct

import numpy as np
import pytest
from PIL import Image, ImageFile

from tfpipe.errors import ConfigError, DataError
from tfpipe.modalities.images.convert.decode import (
    IMAGE_EXTENSIONS,
    MAX_PIXELS,
    EncodedImage,
    UndecodableImage,
    normalize_image,
    resized_dims,
    sniff_format,
)
from tfpipe.testing.fake_data import to_cmyk

H, W = 75, 101  # odd sizes, so chroma subsampling and rounding edges show


def _encode(image: Image.Image, fmt: str, **options: object) -> bytes:
    buf = io.BytesIO()
    image.save(buf, fmt, **options)
    return buf.getvalue()


def _decode(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)), dtype=np.int16)


@pytest.fixture(scope="module")
def rgb() -> Image.Image:
    """A smooth picture: JPEG's own error on it stays near 2 levels, so a wrong conversion
    (10+ levels) stands out."""
    y, x = np.mgrid[0:H, 0:W].astype(np.float32)
    r = 128 + 90 * np.sin(x / 13) * np.cos(y / 17)
    g = 128 + 80 * np.cos((x + y) / 19)
    b = 20 + 200 * x / W
    pixels = np.stack([r, g, b], axis=-1)
    pixels[(x - 60) ** 2 / 400 + (y - 35) ** 2 / 200 < 1] = (230, 40, 60)  # a red ellipse
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


@pytest.fixture(scope="module")
def tf():
    from tfpipe._tf import tf

    return tf()


@pytest.fixture(scope="module")
def sources(rgb: Image.Image) -> dict[str, bytes]:
    """One input file per supported kind, all showing the `rgb` picture."""
    cmyk = to_cmyk(rgb)
    # No dithering: a dither pattern is noise JPEG can't keep, which would hide real errors.
    palette = rgb.quantize(colors=256, dither=Image.Dither.NONE)
    rgba = rgb.copy()
    rgba.putalpha(Image.fromarray(np.tile(np.arange(W, dtype=np.uint8), (H, 1)) * 2))
    return {
        "baseline": _encode(rgb, "JPEG", quality=92),
        "progressive": _encode(rgb, "JPEG", quality=92, progressive=True),
        "cmyk": _encode(cmyk, "JPEG", quality=95),
        "grayscale": _encode(rgb.convert("L"), "JPEG", quality=95),
        "png": _encode(rgb, "PNG"),
        "rgba_png": _encode(rgba, "PNG"),
        "palette_png": _encode(palette, "PNG"),
        "gif": _encode(palette, "GIF"),
        "bmp": _encode(rgb, "BMP"),
        "webp": _encode(rgb, "WEBP", quality=95),
        "gray16_png": _encode(Image.fromarray(np.asarray(rgb.convert("L")).astype(np.uint16) * 257), "PNG"),
    }


def test_sniff_format_reads_magic_bytes_not_names(sources: dict[str, bytes]) -> None:
    expected = {
        "baseline": "jpeg", "progressive": "jpeg", "cmyk": "jpeg", "grayscale": "jpeg",
        "png": "png", "rgba_png": "png", "palette_png": "png", "gray16_png": "png",
        "gif": "gif", "bmp": "bmp", "webp": "webp",
    }  # fmt: skip
    assert {kind: sniff_format(data) for kind, data in sources.items()} == expected
    assert sniff_format(b"") is None
    assert sniff_format(b"hello, world") is None
    assert sniff_format(b"II*\x00" + b"\x00" * 20) is None  # TIFF is not a supported source
    assert {".jpeg", ".jpg", ".png", ".gif", ".bmp", ".webp"} <= IMAGE_EXTENSIONS


@pytest.mark.parametrize("kind", ["baseline", "progressive"])
def test_rgb_jpeg_passes_through_byte_identical(sources: dict[str, bytes], kind: str) -> None:
    out = normalize_image(sources[kind])
    assert out == EncodedImage(sources[kind], H, W, reencoded=False, source_format="jpeg")
    # Small enough already: resize_shorter doesn't touch it either, even at the exact size.
    assert normalize_image(sources[kind], resize_shorter=H).jpeg == sources[kind]
    assert normalize_image(bytearray(sources[kind])).jpeg == sources[kind]


def test_cmyk_jpeg_becomes_rgb_close_to_both_renderings(
    sources: dict[str, bytes], rgb: Image.Image, tf
) -> None:
    out = normalize_image(sources["cmyk"])
    assert (out.reencoded, out.source_format, out.height, out.width) == (True, "jpeg", H, W)
    assert Image.open(io.BytesIO(out.jpeg)).mode == "RGB"
    pixels = _decode(out.jpeg)
    # Pillow's rendering of the CMYK file, TF's (what imagenet_to_gcs uses), and the picture.
    pillow = np.asarray(Image.open(io.BytesIO(sources["cmyk"])).convert("RGB"), np.int16)
    tf_rgb = tf.io.decode_jpeg(sources["cmyk"], channels=3).numpy().astype(np.int16)
    assert np.abs(pixels - pillow).mean() < 3.5
    assert np.abs(pixels - tf_rgb).mean() < 4.0  # TF's own CMYK test allows 4
    assert np.abs(pixels - np.asarray(rgb, np.int16)).mean() < 4.0
    # Not the inverted or the black-less rendering, which would be 10+ levels off.
    assert np.abs(255 - pixels - np.asarray(rgb, np.int16)).mean() > 30


def test_grayscale_jpeg_becomes_three_equal_channels(sources: dict[str, bytes], tf) -> None:
    out = normalize_image(sources["grayscale"])
    assert out.reencoded and out.source_format == "jpeg"
    decoded = tf.io.decode_jpeg(out.jpeg, channels=0).numpy().astype(np.int16)
    assert decoded.shape == (H, W, 3)
    assert np.abs(decoded[..., 0] - decoded[..., 2]).max() <= 2
    gray = tf.io.decode_jpeg(sources["grayscale"], channels=1).numpy()[..., 0].astype(np.int16)
    assert np.abs(decoded[..., 1] - gray).mean() < 3.5


@pytest.mark.parametrize(
    ("kind", "fmt", "max_error"),
    [
        ("png", "png", 3.5),
        ("bmp", "bmp", 3.5),
        ("webp", "webp", 3.5),
        ("rgba_png", "png", 3.5),
        # 256 flat colours have hard steps that JPEG rings on; a wrong mapping is 40+ off.
        ("gif", "gif", 6.5),
        ("palette_png", "png", 6.5),
    ],
)
def test_other_formats_become_rgb_jpeg(
    sources: dict[str, bytes], kind: str, fmt: str, max_error: float
) -> None:
    out = normalize_image(sources[kind])
    assert (out.reencoded, out.source_format, out.height, out.width) == (True, fmt, H, W)
    assert sniff_format(out.jpeg) == "jpeg"
    source = np.asarray(Image.open(io.BytesIO(sources[kind])).convert("RGB"), np.int16)
    assert np.abs(_decode(out.jpeg) - source).mean() < max_error


def test_alpha_is_dropped_not_composited(sources: dict[str, bytes], rgb: Image.Image) -> None:
    # TF's decode_png(channels=3) drops alpha; compositing over white would brighten the
    # left edge, where alpha is near 0.
    pixels = _decode(normalize_image(sources["rgba_png"]).jpeg)
    assert np.abs(pixels - np.asarray(rgb, np.int16))[:, :10].mean() < 3.5


def test_png_named_jpeg_is_recognised_by_content(sources: dict[str, bytes]) -> None:
    # normalize_image never sees a name: the ImageNet PNG named .JPEG is just PNG bytes.
    out = normalize_image(sources["png"], quality=100)
    assert out.source_format == "png" and out.reencoded
    assert normalize_image(sources["png"], quality=100).jpeg == out.jpeg


def test_16_bit_png_keeps_the_high_byte(sources: dict[str, bytes], rgb: Image.Image) -> None:
    out = normalize_image(sources["gray16_png"], quality=100)
    gray = np.asarray(rgb.convert("L"), np.int16)
    assert np.abs(_decode(out.jpeg)[..., 0] - gray).mean() < 2.0  # not clipped to white


def test_every_output_decodes_in_tensorflow_as_rgb(sources: dict[str, bytes], tf) -> None:
    for kind, data in sources.items():
        out = normalize_image(data, resize_shorter=40)
        decoded = tf.io.decode_jpeg(out.jpeg, channels=0)
        assert tuple(decoded.shape) == (out.height, out.width, 3), kind
        assert (out.height, out.width) == (40, 54), kind


def test_resize_shorter_sets_dims_and_is_deterministic(rgb: Image.Image) -> None:
    big = rgb.resize((500, 375))
    landscape = _encode(big, "JPEG", quality=90)
    portrait = _encode(big.transpose(Image.Transpose.ROTATE_90), "JPEG", quality=90)
    out = normalize_image(landscape, resize_shorter=256)
    assert (out.height, out.width, out.reencoded) == (256, 341, True)
    assert Image.open(io.BytesIO(out.jpeg)).size == (341, 256)
    assert normalize_image(landscape, resize_shorter=256) == out
    assert normalize_image(landscape, resize_shorter=256, quality=75).jpeg != out.jpeg
    tall = normalize_image(portrait, resize_shorter=256)
    assert (tall.height, tall.width) == (341, 256)
    # Non-JPEG sources take the pixel-domain path to the same size.
    png = normalize_image(_encode(big, "PNG"), resize_shorter=100)
    assert (png.height, png.width) == (100, 133)
    # The resized picture is the original's, not something else of the right size.
    expected = np.asarray(big.resize((341, 256), Image.Resampling.LANCZOS), np.int16)
    assert np.abs(_decode(out.jpeg) - expected).mean() < 6.0


def _normalize_in_child(data: bytes) -> bytes:
    return normalize_image(data, resize_shorter=64, quality=85).jpeg


def test_output_bytes_do_not_depend_on_the_process(sources: dict[str, bytes]) -> None:
    kinds = ["baseline", "cmyk", "png", "gif"]
    here = [_normalize_in_child(sources[k]) for k in kinds]
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        there = pool.map(_normalize_in_child, [sources[k] for k in kinds])
    assert here == there


def test_exif_orientation_is_ignored_like_tf(rgb: Image.Image) -> None:
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 CW to display"
    data = _encode(rgb, "JPEG", quality=90, exif=exif.tobytes())
    assert normalize_image(data).jpeg == data
    out = normalize_image(data, resize_shorter=30)
    assert (out.height, out.width) == (30, 40)  # the stored grid, not the displayed one
    assert 0x0112 not in Image.open(io.BytesIO(out.jpeg)).getexif()


def test_empty_and_non_image_inputs_give_reasons() -> None:
    with pytest.raises(UndecodableImage) as e:
        normalize_image(b"")
    assert e.value.reason == "empty file"
    assert isinstance(e.value, DataError)
    with pytest.raises(UndecodableImage) as e:
        normalize_image(b"<html>Not Found</html>")
    assert e.value.reason == "not an image: starts with b'<html>Not Fo'"


@pytest.mark.parametrize("kind", ["baseline", "progressive", "cmyk", "grayscale"])
def test_truncated_jpeg_is_caught_at_every_cut(sources: dict[str, bytes], kind: str) -> None:
    data = sources[kind]
    # Cutting only the final EOI marker must fail too: tf.io.decode_jpeg rejects that file.
    for cut in (len(data) - 1, len(data) - 2, len(data) - 50, len(data) // 2, 700):
        with pytest.raises(UndecodableImage) as e:
            normalize_image(data[:cut])
        assert e.value.reason.startswith(("truncated JPEG", "corrupt JPEG")), (cut, e.value)
    with pytest.raises(UndecodableImage, match="truncated JPEG"):
        normalize_image(data[: len(data) // 2], resize_shorter=20)
    assert ImageFile.LOAD_TRUNCATED_IMAGES is False


def test_truncated_and_broken_other_formats(sources: dict[str, bytes]) -> None:
    for kind in ("png", "gif", "webp", "bmp"):
        data = sources[kind]
        with pytest.raises(UndecodableImage) as e:
            normalize_image(data[: len(data) * 2 // 3])
        assert e.value.reason.split(":")[0] in {
            f"truncated {kind.upper()}", f"corrupt {kind.upper()}", "truncated WebP",
            "corrupt WebP",
        }, e.value.reason  # fmt: skip
    with pytest.raises(UndecodableImage, match=r"^truncated PNG"):
        normalize_image(sources["png"][:20])


def test_oversized_and_zero_size_headers_are_refused(sources: dict[str, bytes]) -> None:
    data = bytearray(sources["baseline"])
    sof = data.index(b"\xff\xc0")
    data[sof + 5 : sof + 9] = struct.pack(">HH", 20_000, 20_000)
    assert MAX_PIXELS < 20_000 * 20_000
    with pytest.raises(UndecodableImage, match=r"^JPEG image too large"):
        normalize_image(bytes(data))
    data[sof + 5 : sof + 9] = b"\x00\x00\x00\x00"
    with pytest.raises(UndecodableImage, match=r"^(corrupt|zero-size) JPEG"):
        normalize_image(bytes(data))


def test_resized_dims_rounds_half_up_and_keeps_small_images() -> None:
    assert resized_dims(375, 500, 256) == (256, 341)  # 341.33
    assert resized_dims(500, 375, 256) == (341, 256)
    assert resized_dims(300, 450, 200) == (200, 300)
    assert resized_dims(3, 5, 2) == (2, 3)  # 3.33
    assert resized_dims(2, 3, 1) == (1, 2)  # 1.5 rounds up
    assert resized_dims(10, 10000, 1) == (1, 1000)
    assert resized_dims(256, 300, 256) == (256, 300)
    assert resized_dims(100, 80, None) == (100, 80)


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"quality": 0}, "quality"),
        ({"quality": 101}, "quality"),
        ({"quality": 90.0}, "quality"),
        ({"resize_shorter": 0}, "resize_shorter"),
        ({"resize_shorter": True}, "resize_shorter"),
        ({"resize_shorter": "256"}, "resize_shorter"),
    ],
)
def test_bad_options_name_the_field(
    sources: dict[str, bytes], options: dict[str, object], field: str
) -> None:
    with pytest.raises(ConfigError, match=rf"^{field} must be .* Received: {field}="):
        normalize_image(sources["baseline"], **options)


def test_convert_and_normalize_image_share_one_rule_for_their_options(sources: dict[str, bytes]) -> None:
    from tfpipe.convert.config import ConvertConfig

    for options, message in [
        ({"resize_shorter": 7}, "resize_shorter must be an int >= 8 or None. Received: resize_shorter=7"),
        ({"quality": 0}, "quality must be an int in 1..100. Received: quality=0"),
    ]:
        with pytest.raises(ConfigError) as by_image:
            normalize_image(sources["baseline"], **options)
        with pytest.raises(ConfigError) as by_config:
            ConvertConfig(**options)
        assert str(by_image.value) == str(by_config.value) == message
    small = normalize_image(sources["baseline"], resize_shorter=8)
    assert min(small.height, small.width) == 8

"""Images hold what TensorFlow's decoders see, once each: a transparent GIF's hidden pixels are
black, and one file reached under two class folders is refused by name."""

import io
import os

import numpy as np
import pytest
from PIL import Image

import tfpipe
from tfpipe.errors import DataError
from tfpipe.modalities.images.convert.decode import normalize_image
from tfpipe.testing import fake_data

from support.cli import run_cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def transparent_gif() -> bytes:
    """A 64x48 palette GIF: a red square in its transparency index, on blue."""
    image = Image.new("P", (64, 48), 0)
    image.putpalette([0, 0, 255, 255, 0, 0] + [0] * 762)
    image.paste(1, (16, 8, 48, 40))
    buf = io.BytesIO()
    image.save(buf, "GIF", transparency=1)
    return buf.getvalue()


def test_a_transparent_gif_holds_what_tensorflows_decoder_gives():
    from tfpipe._tf import tf

    data = transparent_gif()
    tf_pixels = tf().io.decode_image(data, channels=3, expand_animations=False).numpy().astype(int)
    stored = np.asarray(Image.open(io.BytesIO(normalize_image(data, quality=100).jpeg))).astype(int)
    inside = (slice(12, 36), slice(20, 44))  # away from the JPEG's edge ringing
    assert tf_pixels[inside].max() == 0  # TF: black where the GIF is transparent
    assert np.abs(stored[inside] - tf_pixels[inside]).max() <= 3  # was 255 red before
    assert np.abs(stored - tf_pixels).mean() < 2


def test_one_file_under_two_class_folders_is_refused_by_name(tmp_path):
    src = tmp_path / "photos"
    fake_data.write_image_folder(src, classes=2, per_class=[3, 4], size=(32, 24), imagenet_names=False)
    first = sorted((src / "class_000").iterdir())[0]
    link = src / "class_001" / "again.jpg"
    os.symlink(first, link)
    with pytest.raises(
        DataError, match=rf"{link}: the same file as {first} \(a symbolic or hard link to it\)"
    ):
        tfpipe.convert(str(src), str(tmp_path / "out"))
    os.remove(link)
    os.link(first, link)  # a hard link is the same file too
    with pytest.raises(DataError, match=r"again.jpg: the same file as"):
        tfpipe.convert(str(src), str(tmp_path / "out"))


@pytest.mark.slow
def test_help_says_what_images_hold():
    out = run_cli("convert", "--help", env={"COLUMNS": "200"}).stdout
    text = " ".join(out.split())
    for fact in (
        "EXIF orientation is ignored",
        "alpha is dropped",
        "first frame",
        "transparent pixels are black",
    ):
        assert fact in text


def test_an_image_wider_than_a_jpeg_can_be_is_skipped_naming_the_file_and_the_limit(tmp_path, capsys):
    """A panorama PNG of 70,000 pixels cannot be a JPEG (65,500 a side): it is skipped as the
    unreadable images are, with the reason, and --strict fails naming the file."""
    from tfpipe.cli import main

    fake_data.write_image_folder(
        tmp_path / "src", classes=2, per_class=2, size=(16, 12), imagenet_names=False
    )
    Image.new("RGB", (70_000, 40), (10, 200, 30)).save(tmp_path / "src" / "class_000" / "pano.png")
    assert main(["convert", str(tmp_path / "src"), str(tmp_path / "out"), "--quiet", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    said = "PNG image of 70000x40 pixels: a JPEG holds at most 65,500 pixels a side"
    assert f"skipped {tmp_path / 'src' / 'class_000' / 'pano.png'}: {said}" in out
    split = tfpipe.Manifest.load(str(tmp_path / "out")).split("train")
    assert split.examples == 4 and [s.input for s in split.skipped] == [
        str(tmp_path / "src/class_000/pano.png")
    ]
    args = [
        "convert",
        str(tmp_path / "src"),
        str(tmp_path / "strict"),
        "--quiet",
        "--strict",
        "--workers",
        "1",
    ]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / 'src' / 'class_000' / 'pano.png'}: {said}" in err and "broken data stream" not in err
    # Shrunk to 8 pixels high it is 14,000 wide: it fits, and is converted.
    m = tfpipe.convert(str(tmp_path / "src"), str(tmp_path / "small"), resize_shorter=8, workers=1)
    assert m.split("train").examples == 5 and not m.split("train").skipped

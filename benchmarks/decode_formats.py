"""What reading PNG beside JPEG costs the image preset, in paired rounds (benchmarks/paired.py).

Records tfpipe did not write (imagenet_to_gcs shards without a manifest, a TFDS dataset) may
hold PNG as well as JPEG, so the preset's decode there picks the format per record (`tf.cond`
on the magic bytes): JPEG through the fused decode-and-crop as before, PNG decoded whole and
then cropped. tfpipe's own datasets hold JPEG only and keep the JPEG-only decode. Contenders,
each the preset's training decode (random-resized crop to 224, flip, uint8) of the same
ImageNet-like photos (470x390, natural-image-like), one record at a time, from memory:

- jpeg_only: JPEG records, the decode of tfpipe's own datasets;
- either: the same JPEG records through the per-record format choice;
- png: the same photos stored as PNG, through the per-record format choice.

    python benchmarks/decode_formats.py --rounds 6 --seconds 3
"""

from __future__ import annotations

import argparse
import io

import numpy as np
from paired import cpu_ratio, rounds, speed_ratio, summary

IMAGES, SIZE = 48, (470, 390)


def encoded(fmt: str) -> list[bytes]:
    from PIL import Image

    from tfpipe.testing import fake_data

    rng = np.random.default_rng(0)
    out = []
    for _ in range(IMAGES):
        buf = io.BytesIO()
        Image.fromarray(fake_data.natural_image(rng, SIZE[1], SIZE[0])).save(buf, fmt, quality=90)
        out.append(buf.getvalue())
    return out


def maker(images: list[bytes], jpeg_only: bool):
    import tensorflow as tf

    from tfpipe._tf import plain
    from tfpipe.modalities.images.preset import ImageNet, _decode_fn

    decode = _decode_fn(tf, ImageNet(), True, 0, jpeg_only)
    records = tf.data.Dataset.from_tensor_slices(images).cache()

    def make():
        ds = records.repeat()
        seeds = tf.data.Dataset.random(seed=1).batch(2)
        ds = tf.data.Dataset.zip((ds, seeds)).map(
            plain(
                lambda e, s: decode(
                    {"image/encoded": e, "image/class/label": tf.constant(0, tf.int64)}, s, None
                )
            ),
            num_parallel_calls=1,
        )
        options = tf.data.Options()
        options.threading.private_threadpool_size = 1
        return ds.with_options(options)

    return make


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    jpegs, pngs = encoded("JPEG"), encoded("PNG")
    makers = {"jpeg_only": maker(jpegs, True), "either": maker(jpegs, False), "png": maker(pngs, False)}
    results = rounds(makers, examples_per_element=1, n_rounds=args.rounds, seconds=args.seconds, warmup=1.0)
    for name in ("either", "png"):
        print(
            f"{name} / jpeg_only: images/s {speed_ratio(results, name, 'jpeg_only')}, "
            f"CPU per image {cpu_ratio(results, name, 'jpeg_only')}"
        )
    for name, figures in summary(results).items():
        print(name, {k: round(v, 3) for k, v in figures.items()})


if __name__ == "__main__":
    main()

"""CPU cost of single image operations, one thread, and the accuracy they trade.

Run: TFPIPE_BENCH_DATA=/tmp/tfpipe-bench python benchmarks/micro_ops.py [normalize|decode|quality]
(uses the ImageNet-like JPEGs benchmarks/conftest.py makes; about a minute each).

- normalize: the per-record tail after decode (resize to 224, flip, output dtype), then
  batch 128: uint8, the current float normalisation with row-long constants, the former one
  with a per-channel [3] broadcast, the baseline's float32 cast, and a resize that stays
  uint8 (QuantizedResizeBilinear).
- decode: `decode_and_crop_jpeg` options on random-resized-crop windows: TF's default
  dct_method (libjpeg's INTEGER_FAST), INTEGER_ACCURATE, fancy_upscaling=False; PSNR of the
  224 output against the default's. Also how many windows are at least 2x the output size on
  both sides, where decoding at 1/2 scale (`ratio=2`) would be possible.
- quality: re-encoding at shorter side 256 (as `tfpipe convert --resize-shorter 256`) at
  JPEG quality 95/90/85/75 with 4:2:0 chroma, and 90 with 4:4:4: bytes, train decode CPU, and
  PSNR at 224 (eval centre crop) against the same resized pixels before JPEG encoding.

Ops run one image at a time in graph functions with TF's intra- and inter-op pools at one
thread; variants alternate image by image, so load from other processes hits each alike.
Figures are CPU ms per image (process CPU time): medians of ROUNDS passes.
"""

from __future__ import annotations

import glob
import io
import math
import os
import resource
import statistics
import sys

import numpy as np

ROUNDS = int(os.environ.get("TFPIPE_BENCH_RUNS", "5"))
IMAGES = 160


def cpu() -> float:
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def alternate(fns: dict, inputs: list, rounds: int = ROUNDS) -> dict[str, float]:
    """Median CPU ms per input of each fn, the fns alternating input by input."""
    per = {k: [] for k in fns}
    for _ in range(rounds):
        spent = dict.fromkeys(fns, 0.0)
        for args in inputs:
            for k, fn in fns.items():
                c0 = cpu()
                fn(*args)
                spent[k] += cpu() - c0
        for k in fns:
            per[k].append(1000 * spent[k] / len(inputs))
    return {k: statistics.median(v) for k, v in per.items()}


def psnr(a, b) -> float:
    mse = float(np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2))
    return math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse)


def jpegs(root: str) -> list[bytes]:
    paths = sorted(glob.glob(os.path.join(root, "images", "*", "*.JPEG")))
    if not paths:
        raise SystemExit(f"no JPEGs under {root}/images: run benchmarks/test_pipeline_speed.py first")
    step = max(1, len(paths) // IMAGES)
    out = []
    for p in paths[::step][:IMAGES]:
        with open(p, "rb") as f:
            out.append(f.read())
    return out


def windows(tf, encoded: list) -> list:
    box = tf.constant([0.0, 0.0, 1.0, 1.0], shape=[1, 1, 4])
    out = []
    for i, e in enumerate(encoded):
        begin, size, _ = tf.image.stateless_sample_distorted_bounding_box(
            tf.io.extract_jpeg_shape(e),
            box,
            seed=[i, 0],
            min_object_covered=0.1,
            aspect_ratio_range=(3 / 4, 4 / 3),
            area_range=(0.08, 1.0),
            max_attempts=10,
            use_image_if_no_bounding_boxes=True,
        )
        out.append(tf.stack([begin[0], begin[1], size[0], size[1]]))
    return out


def normalize(tf, encoded: list) -> None:
    size = 224
    mean = tf.constant([123.675, 116.28, 103.53])
    inv = 1.0 / tf.constant([58.395, 57.12, 57.375])
    shift = -mean * inv
    row_scale = tf.reshape(tf.tile(inv, [size]), [1, size, 3])
    row_shift = tf.reshape(tf.tile(shift, [size]), [1, size, 3])
    wins = windows(tf, encoded)
    crops = [tf.io.decode_and_crop_jpeg(e, w, channels=3) for e, w in zip(encoded, wins, strict=True)]

    def resized(x, method="bilinear"):
        return tf.image.flip_left_right(tf.image.resize(x, [size, size], method=method))

    tails = {
        "uint8 (tfpipe default)": lambda x: tf.cast(resized(x) + 0.5, tf.uint8),
        "bfloat16 normalised, row-long constants (tfpipe)": lambda x: tf.cast(
            resized(x) * row_scale + row_shift, tf.bfloat16
        ),
        "float32 normalised, row-long constants (tfpipe)": lambda x: resized(x) * row_scale + row_shift,
        "bfloat16 normalised, [3] broadcast (before)": lambda x: tf.cast(
            tf.nn.bias_add(resized(x) * inv, shift), tf.bfloat16
        ),
        "float32 unnormalised, bilinear": lambda x: resized(x),
        "uint8 through QuantizedResizeBilinear": lambda x: quantized_resize(
            tf, tf.image.flip_left_right(x), size
        ),
        "float32, bicubic + cast (the baseline's)": lambda x: tf.cast(resized(x, "bicubic"), tf.float32),
    }
    opts = tf.data.Options()
    opts.threading.private_threadpool_size = 1
    opts.threading.max_intra_op_parallelism = 1
    opts.autotune.enabled = False
    spec = tf.TensorSpec([None, None, 3], tf.uint8)
    source = tf.data.Dataset.from_generator(lambda: iter(crops), output_signature=spec)
    source = source.cache().repeat()
    per = {k: [] for k in tails}
    batches = 6
    for _ in range(ROUNDS):
        for k, fn in tails.items():
            it = iter(source.map(fn, num_parallel_calls=1).batch(128).with_options(opts))
            next(it)
            c0 = cpu()
            for _ in range(batches):
                next(it)
            per[k].append(1000 * (cpu() - c0) / (batches * 128))
    print("\nper-record tail after decode (resize 224, flip, dtype) + batch 128: CPU ms per image")
    for k, v in per.items():
        print(f"  {k:<50} {statistics.median(v):6.3f}  (min {min(v):.3f})")


def quantized_resize(tf, x, size: int):
    """Bilinear resize that stays uint8 (TF's quantized kernel), for comparison."""
    q = tf.bitcast(x, tf.quint8)[None]
    out = tf.raw_ops.QuantizedResizeBilinear(
        images=q, size=[size, size], min=0.0, max=255.0, half_pixel_centers=True
    )[0]
    return tf.bitcast(out[0], tf.uint8)


def decode(tf, encoded: list) -> None:
    wins = windows(tf, encoded)
    variants = {
        "default (dct_method='' = INTEGER_FAST)": {},
        "INTEGER_ACCURATE": {"dct_method": "INTEGER_ACCURATE"},
        "fancy_upscaling=False": {"fancy_upscaling": False},
    }

    def make(kw: dict):
        return tf.function(
            lambda e, w: tf.image.resize(tf.io.decode_and_crop_jpeg(e, w, channels=3, **kw), [224, 224])
        )

    fns = {k: make(kw) for k, kw in variants.items()}
    ms = alternate(fns, list(zip(encoded, wins, strict=True)))
    ref = [fns["INTEGER_ACCURATE"](e, w) for e, w in zip(encoded, wins, strict=True)]
    print("\ndecode_and_crop_jpeg + bilinear resize to 224 on random-resized-crop windows: CPU ms per image")
    for k in variants:
        quality = statistics.fmean(psnr(fns[k](e, w), r) for e, w, r in zip(encoded, wins, ref, strict=True))
        print(f"  {k:<40} {ms[k]:6.3f}   PSNR vs INTEGER_ACCURATE {quality:5.1f} dB")
    big = sum(1 for w in wins if int(w[2]) >= 448 and int(w[3]) >= 448)
    print(f"  windows >= 2x the 224 output on both sides (ratio=2 possible): {big} of {len(wins)}")


def quality(tf, encoded: list) -> None:
    from PIL import Image

    def resized_pixels(data: bytes) -> np.ndarray:
        # As tfpipe convert --resize-shorter 256: draft to >= 2x the target, then bicubic.
        image = Image.open(io.BytesIO(data))
        w, h = image.size
        scale = 256 / min(w, h)
        out_w, out_h = max(1, round(w * scale)), max(1, round(h * scale))
        image.draft(None, (out_w * 2, out_h * 2))
        return np.asarray(image.convert("RGB").resize((out_w, out_h), Image.Resampling.BICUBIC))

    def encode(pixels: np.ndarray, q: int, sub: str) -> bytes:
        buf = io.BytesIO()
        Image.fromarray(pixels).save(buf, "JPEG", quality=q, subsampling=sub)
        return buf.getvalue()

    def centre(x):
        h, w = x.shape[0], x.shape[1]
        c = int(0.875 * min(h, w))
        return x[(h - c + 1) // 2 : (h - c + 1) // 2 + c, (w - c + 1) // 2 : (w - c + 1) // 2 + c]

    pixels = [resized_pixels(e) for e in encoded]
    settings = [(95, "4:2:0"), (90, "4:2:0"), (85, "4:2:0"), (75, "4:2:0"), (90, "4:4:4")]
    variants = {f"q{q} {sub}": [encode(p, q, sub) for p in pixels] for q, sub in settings}
    variants = {"original (no re-encode)": list(encoded)} | variants
    train = tf.function(
        lambda e, w: tf.image.resize(tf.io.decode_and_crop_jpeg(e, w, channels=3), [224, 224])
    )
    wins = {k: windows(tf, v) for k, v in variants.items()}
    fns = {k: (lambda i, k=k: train(variants[k][i], wins[k][i])) for k in variants}
    ms = alternate(fns, [(i,) for i in range(len(encoded))])
    print(
        "\n--resize-shorter 256 re-encoding: mean KB, train decode + crop + resize CPU ms per image, "
        "PSNR at 224 (eval centre crop) vs the resized pixels before encoding"
    )
    for k, data in variants.items():
        kb = statistics.fmean(len(d) for d in data) / 1000
        if k.startswith("original"):
            print(f"  {k:<24} {kb:6.1f} KB  {ms[k]:6.3f} ms")
            continue
        q = statistics.fmean(
            psnr(centre(tf.io.decode_jpeg(d, channels=3).numpy()), centre(p))
            for d, p in zip(data, pixels, strict=True)
        )
        print(f"  {k:<24} {kb:6.1f} KB  {ms[k]:6.3f} ms  PSNR {q:5.1f} dB")


def main() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    root = os.environ.get("TFPIPE_BENCH_DATA", "/tmp/tfpipe-bench")
    encoded = jpegs(root)
    for name in sys.argv[1:] or ["normalize", "decode", "quality"]:
        {"normalize": normalize, "decode": decode, "quality": quality}[name](tf, encoded)


if __name__ == "__main__":
    main()

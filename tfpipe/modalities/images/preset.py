"""The imagenet preset: JPEG records in the tensorflow/tpu `imagenet_to_gcs` layout (and, in
records tfpipe did not write, such as a TFDS dataset's, PNG too: decoded whole, then cropped).

Train: random-resized crop (sample_distorted_bounding_box: area 0.08-1, aspect 3/4-4/3,
10 attempts, centre-crop fallback) through the fused `decode_and_crop_jpeg`, which skips the
IDCT of everything outside the crop; random horizontal flip; resize. Eval: centre crop of
0.875 of the shorter side, then the resize. Both as in the tensorflow/tpu ResNet reference.

Output dtype. The default is uint8, normalised on the accelerator, as the tensorflow/tpu
reference does: a uint8 batch is a quarter of the float32 bytes to copy, batch and transfer
(docs/guides/images-and-tables.md shows a mixed-bfloat16 Keras model that normalises it in
its first layer). For float or bfloat16 with mean/std normalisation on the host (as the
baseline tensorflow/tpu-style pipeline feeds mixed-bfloat16 training), pass `dtype="bfloat16"` (or
"float32"); `normalize` then defaults to True. Normalisation runs per record on the resized
float pixels, inside the decode map, as one multiply and one add with row-long constants
(see `_normalization_rows`): it costs about what the uint8 rounding does. Measured with
`python benchmarks/micro_ops.py normalize` (one thread, CPU ms per 224 image for resize,
flip, output dtype and batch): uint8 0.47, bfloat16 normalised 0.42, float32 normalised 0.42,
float32 unnormalised 0.40, the baseline's bicubic float32 0.70; the former per-channel
broadcast took 0.89 for bfloat16.

Decode options, measured with `python benchmarks/micro_ops.py decode` on random-resized-crop
windows of ImageNet-like photos: TF's default dct_method is already libjpeg's INTEGER_FAST
(PSNR 46.5 dB at 224 against INTEGER_ACCURATE, which cost 2% more CPU);
fancy_upscaling=False saved nothing measurable and costs 5 dB. Decoding at 1/2 scale
(`ratio=2`) needs a crop window at least twice the output on both sides: 3 of 160 windows at
224 on ~470x390 photos, so it is not used.

Augmentation uses stateless random ops seeded per record (see tfpipe/pipeline/stages/preset.py), so
`seed=` with `deterministic=True` repeats exactly.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import ClassVar, Literal, get_args

from tfpipe._tf import Feature, Nest, Tensor, tf
from tfpipe.errors import ConfigError
from tfpipe.presets.base import Decoder, PresetContext, with_options
from tfpipe.validation import (
    check_bool,
    check_choice,
    check_int,
    check_number,
    check_numbers,
    check_str,
)

ImageDtype = Literal["uint8", "bfloat16", "float32"]
ResizeMethod = Literal["bilinear", "bicubic", "area", "nearest"]

# ImageNet RGB statistics on the 0-255 scale, as in the tensorflow/tpu reference.
MEAN_RGB = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STDDEV_RGB = (0.229 * 255, 0.224 * 255, 0.225 * 255)
# The tensorflow/tpu reference's label offset, for its label key in records without a manifest.
FOREIGN_LABEL_OFFSET = 1
IMAGENET_TO_GCS_LABEL_KEY = "image/class/label"
IMAGE_KEY = "image/encoded"  # the imagenet_to_gcs layout's image
# Sanity bounds: a larger output or more crop attempts is a typo, not a setting.
MAX_IMAGE_SIZE = 8192
MAX_CROP_ATTEMPTS = 1000
_INT32_MAX = (1 << 31) - 1


@dataclasses.dataclass(frozen=True, slots=True)
class ImageNet:
    """The imagenet preset with its options: `preset=tfpipe.presets.ImageNet(image_size=160)`.

    `build(data, image_size=160)` on image records is the same: the keywords override the named
    preset's options, as keras-hub's `from_preset(name, ...)` does.

    Attributes:
      image_size: output height and width.
      dtype: "uint8" (default; normalise on the accelerator), "bfloat16" or "float32".
        Measured against uint8 (`benchmarks/measure_defaults.py image`, under load):
        bfloat16 normalised 0.92x [0.54, 1.58] at 1.05x [0.88, 1.26] the CPU per image,
        float32 normalised 0.84x [0.65, 1.08] at 1.11x [0.98, 1.25].
      normalize: subtract `mean` and divide by `std` on the host. None: True for float dtypes.
      mean, std: per-channel RGB statistics on the 0-255 scale.
      label_offset: subtracted from the stored label so labels start at 0. None: the
        manifest's value for its label feature; for records without a manifest, 1 for the
        imagenet_to_gcs key `image/class/label` (said in a warning and in
        `Pipeline.describe()`); otherwise 0 (labels as stored, e.g. TFDS's 0-based `label`).
      resize_method: bilinear (default) or another tf.image.resize method. Measured against
        bicubic, the reference's choice (`benchmarks/measure_defaults.py image`, paired
        rounds under load): bicubic ran 0.84x [0.62, 1.12] at 1.29x [1.02, 1.64] the CPU per
        image.
      crop_fraction: eval centre-crop fraction of the shorter side (0.875 = 224/256).
      area_range, aspect_ratio_range, max_attempts, min_object_covered: the random crop.
      flip: random horizontal flip in training.
      image_key, label_key: feature keys. None: the data's (a TFDS dataset's image and label
        features), else the imagenet_to_gcs keys `image/encoded` and `image/class/label`.
    """

    name: ClassVar[str] = "imagenet"
    image_size: int = 224
    dtype: ImageDtype = "uint8"
    normalize: bool | None = None
    mean: tuple[float, float, float] = MEAN_RGB
    std: tuple[float, float, float] = STDDEV_RGB
    label_offset: int | None = None
    resize_method: ResizeMethod = "bilinear"
    crop_fraction: float = 0.875
    area_range: tuple[float, float] = (0.08, 1.0)
    aspect_ratio_range: tuple[float, float] = (3 / 4, 4 / 3)
    max_attempts: int = 10
    min_object_covered: float = 0.1
    flip: bool = True
    image_key: str | None = None
    label_key: str | None = None

    def __post_init__(self) -> None:
        fix = functools.partial(object.__setattr__, self)
        fix("image_size", check_int("image_size", self.image_size, 1, MAX_IMAGE_SIZE))
        check_choice("dtype", self.dtype, get_args(ImageDtype))
        check_bool("normalize", self.normalize, optional=True)
        check_choice("resize_method", self.resize_method, get_args(ResizeMethod))
        if self.normalize and self.dtype == "uint8":
            raise ConfigError(
                "normalize=True needs a float output: pass dtype='bfloat16' or 'float32' "
                "(uint8 is normalised on the accelerator). Received: dtype='uint8', normalize=True"
            )
        fix("mean", check_numbers("mean", self.mean, 3, "3 per-channel values"))
        fix("std", check_numbers("std", self.std, 3, "3 per-channel values > 0", lambda v: min(v) > 0))
        fix("label_offset", check_int("label_offset", self.label_offset, None, optional=True))
        fix(
            "crop_fraction",
            check_number("crop_fraction", self.crop_fraction, "a number in (0, 1]", lambda v: 0 < v <= 1),
        )
        fix(
            "area_range",
            check_numbers(
                "area_range",
                self.area_range,
                2,
                "a pair (low, high) with 0 < low <= high <= 1",
                lambda v: 0 < v[0] <= v[1] <= 1,
            ),
        )
        fix(
            "aspect_ratio_range",
            check_numbers(
                "aspect_ratio_range",
                self.aspect_ratio_range,
                2,
                "a pair (low, high) with 0 < low <= high",
                lambda v: 0 < v[0] <= v[1],
            ),
        )
        fix("max_attempts", check_int("max_attempts", self.max_attempts, 1, MAX_CROP_ATTEMPTS))
        fix(
            "min_object_covered",
            check_number(
                "min_object_covered", self.min_object_covered, "a number in [0, 1]", lambda v: 0 <= v <= 1
            ),
        )
        check_bool("flip", self.flip)
        check_str("image_key", self.image_key, optional=True)
        check_str("label_key", self.label_key, optional=True)

    @property
    def normalized(self) -> bool:
        return self.dtype != "uint8" if self.normalize is None else self.normalize

    @property
    def image_feature(self) -> str:
        """The image's feature key (`image_key`, or the imagenet_to_gcs key)."""
        return self.image_key or IMAGE_KEY

    @property
    def label_feature(self) -> str:
        """The label's feature key (`label_key`, or the imagenet_to_gcs key)."""
        return self.label_key or IMAGENET_TO_GCS_LABEL_KEY

    def bind(self, ctx: PresetContext, options: Mapping[str, object]) -> Decoder:
        """This preset, with `options` over its own and the data's feature keys where it names
        none, bound to the image records `ctx` describes."""
        tf_ = tf()
        opts = with_options(self, options)
        opts = dataclasses.replace(
            opts,
            image_key=opts.image_key or _suggested(ctx, "image_key"),
            label_key=opts.label_key or _suggested(ctx, "label_key"),
        )
        image_key, label_key = opts.image_feature, opts.label_feature
        offset, note, changes_labels = label_offset_for(opts, ctx)
        # tfpipe convert's image layouts hold JPEG; other records (TFDS's default, a table
        # written by WriteDataset) may hold PNG too.
        jpeg_only = ctx.manifest is not None and ctx.manifest.layout in ("imagenet", "images")
        spec: dict[str, Feature] = {
            image_key: tf_.io.FixedLenFeature((), tf_.string),
            label_key: tf_.io.FixedLenFeature((), tf_.int64),
        }
        has_filename = "image/filename" in ctx.keys
        if has_filename:
            spec["image/filename"] = tf_.io.FixedLenFeature((), tf_.string, default_value="")

        def check(features: Mapping[str, Tensor]) -> Tensor:
            encoded = features[image_key]
            if jpeg_only:
                return _jpeg_complete(encoded)
            return tf_.logical_or(_jpeg_complete(encoded), _png_complete(encoded))

        def describe(features: Mapping[str, Tensor]) -> list[Tensor]:
            if has_filename:
                return ["image/filename:", features["image/filename"]]
            return []

        return Decoder(
            spec=spec,
            required=(image_key, label_key),
            decode=_decode_fn(tf_, opts, ctx.training, offset, jpeg_only),
            finalize=_label_guard(tf_, offset, label_key, ctx.where),
            batched=False,
            random=ctx.training,
            needs_source=True,
            check=check,
            describe=describe,
            notes=(note,) + (() if jpeg_only else (f"images in {image_key!r} decoded as JPEG or PNG",)),
            warnings=(note,) if changes_labels else (),
        )


def _suggested(ctx: PresetContext, key: str) -> str | None:
    """A feature key the data's own description names (a TFDS dataset's), or None."""
    value = ctx.suggested.get(key)
    return value if isinstance(value, str) else None


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _is_jpeg(tf_: ModuleType, encoded: Tensor) -> Tensor:
    return tf_.equal(tf_.strings.substr(encoded, 0, 3), b"\xff\xd8\xff")


def _png_complete(encoded: Tensor) -> Tensor:
    """True when the bytes start with the PNG signature and end with its IEND chunk (zero
    length, "IEND", a CRC: the last 12 bytes). Catches empty, non-PNG and truncated data."""
    tf_ = tf()
    n = tf_.strings.length(encoded)
    signature = tf_.equal(tf_.strings.substr(encoded, 0, 8), PNG_SIGNATURE)
    end = tf_.equal(tf_.strings.substr(encoded, tf_.maximum(n - 8, 0), 4), b"IEND")
    return tf_.logical_and(signature, end)


def _png_shape(tf_: ModuleType, encoded: Tensor) -> Tensor:
    """[height, width, 3] int32 of a PNG from its IHDR chunk (bytes 16-23, big-endian), without
    decoding it, as `extract_jpeg_shape` for a JPEG (3: decoded as RGB)."""
    wh = tf_.io.decode_raw(tf_.strings.substr(encoded, 16, 8), tf_.int32, little_endian=False)
    return tf_.stack([wh[1], wh[0], 3])


def _jpeg_complete(encoded: Tensor) -> Tensor:
    """True when the bytes start with a JPEG SOI marker and an EOI marker sits in the last
    64 bytes. Catches empty, non-JPEG and truncated data without decoding (and without
    raising). Byte stuffing keeps 0xFFD9 out of entropy-coded data, so it cannot match early."""
    tf_ = tf()
    n = tf_.strings.length(encoded)
    soi = tf_.equal(tf_.strings.substr(encoded, 0, 3), b"\xff\xd8\xff")
    tail = tf_.io.decode_raw(tf_.strings.substr(encoded, tf_.maximum(n - 64, 0), 64), tf_.uint8)
    eoi = tf_.reduce_any(tf_.logical_and(tf_.equal(tail[:-1], 0xFF), tf_.equal(tail[1:], 0xD9)))
    return tf_.logical_and(soi, eoi)


def _decode_fn(
    tf_: ModuleType, opts: ImageNet, training: bool, offset: int, jpeg_only: bool = True
) -> Callable[[Mapping[str, Tensor], Tensor | None, Tensor | None], tuple[Tensor, Tensor]]:
    """`(features, seed, source) -> (image, label)` for one record: crop, resize, flip, cast.
    A JPEG is decoded through the fused decode-and-crop; a PNG (`jpeg_only=False`) whole, then
    cropped: PNG has no partial decode."""
    size = opts.image_size
    out_dtype = {"uint8": tf_.uint8, "bfloat16": tf_.bfloat16, "float32": tf_.float32}[opts.dtype]
    scale, shift = _normalization_rows(tf_, opts)

    def decode(
        features: Mapping[str, Tensor], seed: Tensor | None, source: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        encoded = features[opts.image_feature]
        if jpeg_only:
            shape = tf_.io.extract_jpeg_shape(encoded)
        else:
            jpeg = _is_jpeg(tf_, encoded)
            shape = tf_.cond(
                jpeg, lambda: tf_.io.extract_jpeg_shape(encoded), lambda: _png_shape(tf_, encoded)
            )
        if training:
            crop_seed, flip_seed = tf_.unstack(tf_.random.experimental.stateless_split(seed, 2))
            window = _random_window(tf_, shape, crop_seed, opts)
        else:
            window = _center_window(tf_, shape, opts.crop_fraction)
        if jpeg_only:
            image = tf_.io.decode_and_crop_jpeg(encoded, window, channels=3)
        else:
            image = tf_.cond(
                jpeg,
                lambda: tf_.io.decode_and_crop_jpeg(encoded, window, channels=3),
                lambda: _crop(tf_, tf_.io.decode_png(encoded, channels=3), window),
            )
        image = tf_.image.resize(image, [size, size], method=opts.resize_method)
        if opts.resize_method == "bicubic":  # bicubic overshoots [0, 255]
            image = tf_.clip_by_value(image, 0.0, 255.0)
        if opts.dtype == "uint8":
            image = tf_.cast(image + (0.5 if opts.resize_method != "nearest" else 0.0), tf_.uint8)
        else:
            if opts.normalized:
                image = image * scale + shift
            image = tf_.cast(image, out_dtype)
        if training and opts.flip:
            # Last: a flip commutes with the per-pixel cast and the per-channel normalisation
            # (the same along every row), and moves a quarter (uint8) or half (bfloat16) of the
            # float32 image's bytes here.
            image = tf_.image.stateless_random_flip_left_right(image, flip_seed)
        image = tf_.ensure_shape(image, [size, size, 3])
        # int64 here, int32 from the label guard on the batch: a dataset function with an int32
        # output beside another output cannot run on one device (tfpipe._tf.plain).
        return image, features[opts.label_feature] - offset

    return decode


def _crop(tf_: ModuleType, image: Tensor, window: Tensor) -> Tensor:
    """`image[y : y + h, x : x + w]` for a window [y, x, h, w] (decode_and_crop_jpeg's)."""
    return tf_.slice(image, tf_.stack([window[0], window[1], 0]), tf_.stack([window[2], window[3], 3]))


def _normalization_rows(tf_: ModuleType, opts: ImageNet) -> tuple[Tensor, Tensor]:
    """(x - mean) / std as `x * scale + shift`, with scale and shift one image row long
    ([1, S, 3]). TF's CPU kernels broadcast a [3] vector over the channel axis element by
    element; row-long constants run at the speed of same-shape ops. Measured with
    `python benchmarks/micro_ops.py normalize` (resize, flip, cast to bfloat16 and batch, one
    thread): 0.42 ms per 224 image, against 0.89 ms with the [3] vector."""
    size = opts.image_size
    inv_std = 1.0 / tf_.constant(opts.std, tf_.float32)
    shift = -tf_.constant(opts.mean, tf_.float32) * inv_std
    return (
        tf_.reshape(tf_.tile(inv_std, [size]), [1, size, 3]),
        tf_.reshape(tf_.tile(shift, [size]), [1, size, 3]),
    )


def label_offset_for(opts: ImageNet, ctx: PresetContext) -> tuple[int, str, bool]:
    """The offset subtracted from the label feature, a note saying where it came from, and
    whether that note is a default that changes the stored labels (then it is warned).

    A default offset describes one feature: the manifest's label, or for records without a
    manifest the imagenet_to_gcs key (1-based). Any other key is read as stored.
    """
    key = opts.label_feature
    if opts.label_offset is not None:
        return (
            opts.label_offset,
            f"label_offset={opts.label_offset} (given) is subtracted from {key!r}",
            False,
        )
    if ctx.manifest is not None:
        if key == (ctx.manifest.schema.label or IMAGENET_TO_GCS_LABEL_KEY):
            offset = ctx.manifest.label_offset
            return offset, f"label_offset={offset} from the manifest is subtracted from {key!r}", False
        return (
            0,
            (
                f"labels in {key!r} are read as stored (label_offset=0): the manifest's offset "
                f"describes {ctx.manifest.schema.label!r}"
            ),
            False,
        )
    if key == ctx.suggested.get("label_key"):
        return 0, f"labels in {key!r} are the TFDS dataset's class labels, 0-based: read as stored", False
    if key == IMAGENET_TO_GCS_LABEL_KEY:
        return (
            FOREIGN_LABEL_OFFSET,
            (
                f"the records at {ctx.where} have no tfpipe manifest: labels in {key!r} are taken as "
                f"the imagenet_to_gcs layout's 1-based labels and shifted by label_offset="
                f"{FOREIGN_LABEL_OFFSET} (1..N -> 0..N-1). Pass label_offset=0 if they are 0-based."
            ),
            True,
        )
    return (
        0,
        (
            f"labels in {key!r} are read as stored (label_offset=0): the imagenet_to_gcs "
            f"offset {FOREIGN_LABEL_OFFSET} applies only to {IMAGENET_TO_GCS_LABEL_KEY!r}"
        ),
        False,
    )


def _label_guard(tf_: ModuleType, offset: int, key: str, where: str) -> Callable[[Tensor, Tensor], Nest]:
    """The final map on batches: the labels (int64, offset subtracted) as int32; a label below
    0 means the offset does not fit the records, one beyond int32 that they are not class ids."""

    def guard(images: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
        ok = tf_.reduce_all(labels >= 0)
        message = (
            f"Labels below 0 after subtracting label_offset={offset} from {key!r} in the "
            f"records at {where}: expected stored labels >= {offset}. Pass the label_offset "
            "the records use (label_offset=...). Smallest label after the offset:"
        )
        # The values as strings: an Assert of only strings needs no cond around it.
        check = tf_.debugging.Assert(ok, [message, tf_.strings.as_string(tf_.reduce_min(labels))])
        wide = (
            f"Labels beyond int32 in {key!r} in the records at {where} (after subtracting "
            f"label_offset={offset}): class ids are expected. Largest label:"
        )
        fits = tf_.debugging.Assert(
            tf_.reduce_all(labels <= _INT32_MAX), [wide, tf_.strings.as_string(tf_.reduce_max(labels))]
        )
        with tf_.control_dependencies([check, fits]):
            return images, tf_.cast(labels, tf_.int32)

    return guard


def _center_window(tf_: ModuleType, shape: Tensor, fraction: float) -> Tensor:
    height, width = shape[0], shape[1]
    crop = tf_.cast(fraction * tf_.cast(tf_.minimum(height, width), tf_.float32), tf_.int32)
    crop = tf_.maximum(crop, 1)
    return tf_.stack([(height - crop + 1) // 2, (width - crop + 1) // 2, crop, crop])


def _random_window(tf_: ModuleType, shape: Tensor, seed: Tensor, opts: ImageNet) -> Tensor:
    whole = tf_.constant([0.0, 0.0, 1.0, 1.0], tf_.float32, shape=[1, 1, 4])
    begin, crop_size, _ = tf_.image.stateless_sample_distorted_bounding_box(
        shape,
        bounding_boxes=whole,
        seed=seed,
        min_object_covered=opts.min_object_covered,
        aspect_ratio_range=opts.aspect_ratio_range,
        area_range=opts.area_range,
        max_attempts=opts.max_attempts,
        use_image_if_no_bounding_boxes=True,
    )
    y, x, _ = tf_.unstack(begin)
    h, w, _ = tf_.unstack(crop_size)
    # After max_attempts failures the op returns the whole image: use the eval centre crop
    # instead, as the tensorflow/tpu reference does.
    failed = tf_.logical_and(tf_.equal(h, shape[0]), tf_.equal(w, shape[1]))
    return tf_.where(failed, _center_window(tf_, shape, opts.crop_fraction), tf_.stack([y, x, h, w]))


IMAGENET = ImageNet()  # the registry's "imagenet": its options come from build()'s keywords

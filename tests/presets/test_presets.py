"""Presets: output shapes and dtypes for every option, the registry, and a user preset."""

from __future__ import annotations

import numpy as np
import pytest

import tfpipe
from tfpipe.errors import ConfigError
from tfpipe.modalities.images.preset import MEAN_RGB, STDDEV_RGB
from tfpipe.presets import Preset, get_preset, preset_names, register_preset

from support.pipeline_data import N_ROWS

tf = pytest.importorskip("tensorflow")


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize(
    "options, dtype",
    [
        ({}, tf.uint8),
        ({"dtype": "float32"}, tf.float32),
        ({"dtype": "float32", "normalize": False}, tf.float32),
        ({"dtype": "bfloat16"}, tf.bfloat16),
        ({"dtype": "bfloat16", "normalize": False}, tf.bfloat16),
        ({"resize_method": "bicubic", "image_size": 24}, tf.uint8),
    ],
)
def test_imagenet_shapes_and_dtypes(image_ds, training, options, dtype):
    size = options.get("image_size", 20)
    ds = tfpipe.build(image_ds, batch_size=4, training=training, **({"image_size": size} | options))
    images, labels = ds.element_spec
    batch = 4 if training else None  # eval keeps the partial batch, so the batch dim is open
    assert images.shape.as_list() == [batch, size, size, 3] and images.dtype == dtype
    assert labels.shape.as_list() == [batch] and labels.dtype == tf.int32
    x, y = next(iter(ds))
    assert x.dtype == dtype and int(tf.reduce_min(y)) >= 0 and int(tf.reduce_max(y)) <= 2
    values = x.numpy().astype(np.float32)
    if options.get("dtype", "uint8") != "uint8" and options.get("normalize", True):
        assert values.min() < 0 < values.max()  # mean-subtracted
        assert values.min() >= -MEAN_RGB[0] / STDDEV_RGB[0] - 0.1
    else:
        assert values.min() >= 0 and values.max() <= 255 and values.max() > 1


def test_imagenet_float_output_is_the_normalised_uint8_output(image_ds):
    common = {"batch_size": 37, "training": False, "image_size": 16}
    raw = next(iter(tfpipe.build(image_ds, **common)))[0].numpy().astype(np.float32)
    f32 = next(iter(tfpipe.build(image_ds, dtype="float32", **common)))[0].numpy()
    plain = next(iter(tfpipe.build(image_ds, dtype="float32", normalize=False, **common)))[0].numpy()
    np.testing.assert_allclose(plain, raw, atol=0.5)  # uint8 is the rounded float output
    np.testing.assert_allclose(f32, (plain - np.array(MEAN_RGB)) / np.array(STDDEV_RGB), rtol=1e-4, atol=1e-4)


def test_imagenet_normalisation_per_channel_at_every_pixel(image_ds):
    # The row-long scale/shift constants must line up with every pixel's channel, at any size.
    common = {"batch_size": 37, "training": False, "image_size": 23, "dtype": "float32"}
    plain = next(iter(tfpipe.build(image_ds, normalize=False, **common)))[0].numpy()
    f32 = next(iter(tfpipe.build(image_ds, **common)))[0].numpy()
    for c in range(3):
        expected = (plain[..., c] - MEAN_RGB[c]) / STDDEV_RGB[c]
        np.testing.assert_allclose(f32[..., c], expected, rtol=1e-5, atol=1e-5)
    bf16 = next(iter(tfpipe.build(image_ds, **(common | {"dtype": "bfloat16"}))))[0]
    bf16 = bf16.numpy().astype(np.float32)
    np.testing.assert_allclose(bf16, f32, rtol=2**-8, atol=2**-8)  # bfloat16 keeps 8 significant bits


def test_mixed_bfloat16_model_normalises_uint8_input_as_its_first_layer(image_ds):
    """The recipe of docs/guides/images-and-tables.md: uint8 batches in, Normalization in
    float32 as the first layer of a mixed_bfloat16 model; the same values as host
    normalisation up to uint8 rounding."""
    import keras

    common = {"batch_size": 37, "training": False, "image_size": 16}
    images = next(iter(tfpipe.build(image_ds, **common)))[0]
    host = next(iter(tfpipe.build(image_ds, dtype="float32", **common)))[0].numpy()
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        inputs = keras.Input((16, 16, 3), dtype="uint8")
        x = keras.layers.Normalization(mean=MEAN_RGB, variance=[s * s for s in STDDEV_RGB], dtype="float32")(
            inputs
        )
        conv = keras.layers.Conv2D(2, 3)
        model = keras.Model(inputs, [x, conv(x)])
        normalised, out = model(images)
    finally:
        keras.mixed_precision.set_global_policy(previous)
    assert images.dtype == tf.uint8 and normalised.dtype == "float32" and out.dtype == "bfloat16"
    assert conv.compute_dtype == "bfloat16"
    # uint8 is the float resize output rounded: at most half a level apart, over std.
    np.testing.assert_allclose(np.asarray(normalised), host, atol=0.5 / min(STDDEV_RGB) + 1e-5)


def test_images_are_parsed_inside_the_decode_map(image_ds):
    p = tfpipe.pipeline.plan(image_ds, batch_size=4, image_size=16)
    # The parse stage passes (record, source) through; decode parses and decodes in one map.
    assert p.dataset("parse").element_spec == p.dataset("repeat").element_spec
    images, labels = p.dataset("decode").element_spec
    # int64 until the label guard on the batch makes them int32 (one-device functions, _tf.plain)
    assert images.shape.as_list() == [16, 16, 3] and labels.dtype == tf.int64
    assert p.dataset().element_spec[1].dtype == tf.int32
    counted = tfpipe.pipeline.plan(image_ds, batch_size=4, image_size=16, skip_corrupt=True)
    # skip_corrupt drops bad images by their parsed features, so it parses first.
    assert isinstance(counted.dataset("parse").element_spec[0], dict)


def test_imagenet_eval_is_a_center_crop(image_ds):
    # Eval output depends on nothing random: two builds agree exactly.
    a = [x.numpy() for x, _ in tfpipe.build(image_ds, batch_size=8, training=False, image_size=16)]
    b = [x.numpy() for x, _ in tfpipe.build(image_ds, batch_size=8, training=False, image_size=16)]
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)


def test_imagenet_option_errors(image_ds):
    with pytest.raises(ConfigError, match="normalize=True needs a float output"):
        tfpipe.build(image_ds, batch_size=4, normalize=True)
    with pytest.raises(ConfigError, match=r"dtype must be one of.*Received: dtype='float16'"):
        tfpipe.build(image_ds, batch_size=4, dtype="float16")
    with pytest.raises(ConfigError, match=r"image_size must be an int in \[1, 8192\]"):
        tfpipe.build(image_ds, batch_size=4, image_size=0)
    with pytest.raises(ConfigError, match="area_range"):
        tfpipe.build(image_ds, batch_size=4, area_range=(0.5, 0.1))


def test_tabular_columns_masks_and_labels(table_ds):
    manifest = tfpipe.Manifest.load(table_ds)
    schema = manifest.schema
    ds = tfpipe.build(table_ds, batch_size=8, training=False)
    features, labels = ds.element_spec
    columns = [n for n in schema.names if n != "label"]
    masked = [f.name for f in schema.fields if f.has_mask]
    assert masked, "the fixture table has nulls, so some columns carry masks"
    assert set(features) == set(columns) | {m + "/missing" for m in masked}
    kinds = {"int64": tf.int64, "float32": tf.float32, "bytes": tf.string}
    for f in schema.fields:
        if f.name != "label":
            assert features[f.name].dtype == kinds[f.dtype] and features[f.name].shape.as_list() == [None]
    for m in masked:
        assert features[m + "/missing"].dtype == tf.bool
    assert labels.dtype == tf.int32
    total_masked = 0
    rows = 0
    for batch, y in ds:
        rows += int(y.shape[0])
        total_masked += sum(int(tf.reduce_sum(tf.cast(batch[m + "/missing"], tf.int32))) for m in masked)
    assert rows == N_ROWS and total_masked > 0
    train = tfpipe.build(table_ds, batch_size=8, features=["float32_0"], int_labels=False)
    features, labels = train.element_spec
    assert set(features) == {"float32_0"} | ({"float32_0/missing"} if "float32_0" in masked else set())
    assert features["float32_0"].shape == (8,) and labels.dtype == tf.int64


def test_tabular_errors(table_ds):
    with pytest.raises(ConfigError, match="Column 'nope' is not in the records"):
        tfpipe.build(table_ds, batch_size=8, features=["nope"])
    with pytest.raises(ConfigError, match=r"Unknown option.*'tabular'"):
        tfpipe.build(table_ds, batch_size=8, image_size=3)


def test_user_preset_is_a_spec_plus_a_map_fn(table_ds):
    preset = Preset(
        name="ids_only",
        spec={"row_id": tf.io.FixedLenFeature([], tf.int64), "label": tf.io.FixedLenFeature([], tf.int64)},
        map_fn=lambda f, training: (f["row_id"] * 2, tf.cast(f["label"], tf.int32)),
    )
    register_preset(preset)
    assert "ids_only" in preset_names() and get_preset("ids_only") is preset
    with pytest.raises(ConfigError, match="already registered"):
        register_preset(preset)
    register_preset(preset, overwrite=True)
    ds = tfpipe.build(table_ds, preset="ids_only", batch_size=8, training=False)
    doubled = sorted(int(v) for x, _ in ds for v in x.numpy())
    assert doubled == [2 * i for i in range(N_ROWS)]
    # A preset object works without registering, and per-record presets batch after decode.
    per_record = Preset("per_record", preset.spec, preset.map_fn, batched=False)
    p = tfpipe.pipeline.plan(table_ds, preset=per_record, batch_size=8, training=False)
    assert [s.name for s in p.stages][6:9] == ["parse", "decode", "batch"]
    assert sorted(int(v) for x, _ in p.dataset() for v in x.numpy()) == doubled
    with pytest.raises(ConfigError, match="takes no options"):
        tfpipe.build(table_ds, preset=preset, batch_size=8, image_size=3)
    with pytest.raises(ConfigError, match="register_preset expects a Preset"):
        register_preset(object())

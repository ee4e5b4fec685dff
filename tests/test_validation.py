"""The field rules of validation.py through the real API: an int is any integral type
(numpy's too) and is stored as a Python int; bools, floats and strings are refused by name."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tfpipe
from tfpipe.errors import ConfigError
from tfpipe.testing import fake_data
from tfpipe.validation import as_int

from support.pipeline_data import N_IMAGES


@pytest.mark.parametrize(
    ("value", "expected"),
    [(4, 4), (np.int64(4), 4), (np.uint8(3), 3), (np.int32(-2), -2), (2**70, 2**70)]
    + [(bad, None) for bad in (True, np.bool_(False), 4.0, np.float64(4.0), "4", None, [4])],
)
def test_as_int_takes_every_integral_type_and_nothing_else(value, expected):
    got = as_int(value)
    assert got == expected and (got is None or type(got) is int)


def test_build_plan_and_steps_take_numpy_ints(table_ds, image_ds):
    p = tfpipe.plan(
        table_ds,
        batch_size=np.int64(4),
        seed=np.int32(3),
        shuffle_buffer=np.int64(13),
        cycle_length=np.int16(2),
        start_step=np.int64(2),
    )
    assert (p.global_batch_size, p.config.seed, p.config.shuffle_buffer, p.config.cycle_length) == (
        4,
        3,
        13,
        2,
    )
    assert p.start_step == 2
    assert {type(v) for v in (p.global_batch_size, p.config.seed, p.config.shuffle_buffer, p.start_step)} == {
        int
    }
    first = next(iter(p.dataset()))
    assert first[1].shape == (4,)
    assert tfpipe.steps_per_epoch(image_ds, np.int64(8)) == N_IMAGES // 8


@pytest.mark.parametrize("bad", [True, 4.0, np.float64(4.0), np.bool_(True), "4"])
def test_bools_floats_and_strings_are_not_a_batch_size(table_ds, bad):
    with pytest.raises(
        ConfigError, match=r"batch_size must be a positive int \(the global batch\). Received"
    ):
        tfpipe.plan(table_ds, batch_size=bad)
    with pytest.raises(ConfigError, match="batch_size must be a positive int"):
        tfpipe.steps_per_epoch(table_ds, bad)


def test_convert_takes_numpy_ints_and_writes_plain_json(tmp_path):
    src = tmp_path / "src"
    fake_data.write_image_folder(src, classes=2, per_class=3, size=(32, 24))
    manifest = tfpipe.convert(
        str(src), str(tmp_path / "out"), num_shards=np.int64(3), workers=np.int64(1), seed=np.int64(5)
    )
    assert len(manifest.split("train").shards) == 3
    assert json.loads((tmp_path / "out" / "tfpipe.json").read_text())["splits"]["train"]["examples"] == 6
    for field, bad in (("num_shards", 2.0), ("workers", True), ("seed", "5")):
        with pytest.raises(ConfigError, match=rf"{field} must be .*Received: {field}={bad!r}"):
            tfpipe.convert(str(src), str(tmp_path / "bad"), **{field: bad})


def test_a_position_beyond_the_order_bound_is_refused_when_read(table_ds):
    import tensorflow as tf

    position = tfpipe.resume.Position(2**62)  # the int64 variable holds it; 4 records a step do not
    ds = tfpipe.build(table_ds, batch_size=4, seed=5, cycle_length=2, shuffle_buffer=13, start_step=position)
    too_far = r"step of the Position must be at most 1152921504606846976"
    with pytest.raises(tf.errors.InvalidArgumentError, match=too_far):
        next(iter(ds))
    with pytest.raises(ConfigError, match=r"step must be an int in \[0, 9223372036854775807\]"):
        tfpipe.resume.Position(2**63)

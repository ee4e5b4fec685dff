"""docs/reference/reading-without-tfpipe.md's code, run as the page shows it (its Python block is taken
from the page, so the two cannot drift): on a table with null masks, on images and on text it
reads what `tfpipe.build()` reads, with no tfpipe import in the code."""

from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest

import tfpipe

from support.pipeline_data import N_IMAGES, N_ROWS

tf = pytest.importorskip("tensorflow")

PAGE = pathlib.Path(__file__).parent.parent / "docs" / "reference" / "reading-without-tfpipe.md"


@pytest.fixture(scope="module")
def read_tfpipe():
    """The page's `read_tfpipe`, defined by running its one Python block."""
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    assert len(blocks) == 1
    assert "tfpipe" not in re.sub(r"read_tfpipe|tfpipe\.json|a tfpipe dataset", "", blocks[0])
    namespace: dict = {}
    exec(compile(blocks[0], str(PAGE), "exec"), namespace)
    return namespace["read_tfpipe"]


def arrays(ds) -> list:
    return [tf.nest.map_structure(lambda t: t.numpy(), e) for e in ds]


def test_a_table_with_masks_reads_as_build_reads_it(read_tfpipe, table_ds):
    plain = arrays(read_tfpipe(table_ds, batch_size=8, training=False))
    ours = arrays(tfpipe.build(table_ds, batch_size=8, training=False))
    assert len(plain) == len(ours) == 5
    for (x, y), (want_x, want_y) in zip(plain, ours, strict=True):
        assert sorted(x) == sorted(want_x) and "float32_0/missing" in x
        for key in x:
            np.testing.assert_array_equal(x[key], want_x[key], err_msg=key)
        np.testing.assert_array_equal(y, want_y)
    assert sum(len(y) for _, y in plain) == N_ROWS
    train = read_tfpipe(table_ds, batch_size=8)
    assert len({int(i) for x, _ in train.take(20) for i in x["row_id"]}) == N_ROWS


def test_images_and_text(read_tfpipe, image_ds, text_ds):
    batches = arrays(read_tfpipe(image_ds, batch_size=8, training=False))
    labels = np.concatenate([y for _, y in batches])
    ours = np.concatenate(
        [y.numpy() for _, y in tfpipe.build(image_ds, batch_size=8, training=False, image_size=16)]
    )
    np.testing.assert_array_equal(labels, ours)  # label_offset applied: from 0
    assert len(labels) == N_IMAGES and tf.io.decode_jpeg(batches[0][0]["image/encoded"][0]).shape == (
        48,
        64,
        3,
    )
    text = tfpipe.Manifest.load(text_ds).split("train").text
    docs = [d for x in read_tfpipe(text_ds, batch_size=64, training=False) for d in x["tokens"].to_list()]
    assert len(docs) == text.documents and sum(map(len, docs)) == text.tokens

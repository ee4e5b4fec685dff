"""The text packer: the TensorFlow graph gives exactly the reference's rows on real text, every
piece lands once, and the fill predicted from the length histogram is what the pipeline packs."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from tfpipe.modalities.text import packer
from tfpipe.modalities.text import stages as text_stages
from tfpipe.packing import KEYS, MODES, fill, reference, spec
from tfpipe.pipeline.order import stream as order_stream
from tfpipe.pipeline.order.resumable import KEY_ROWS, domain_key

_graph_pack = tf.function(
    tf.autograph.experimental.do_not_convert(
        lambda values, lengths, L, mode, truncate: packer.pack(
            tf.RaggedTensor.from_row_lengths(values, lengths), L, mode, truncate
        )
    ),
    reduce_retracing=True,
)


def _chunks(ids, size):
    return [ids[s : s + size] for s in range(0, len(ids), size)]


@pytest.mark.parametrize(
    ("L", "mode", "truncate"),
    [(128, m, t) for m in MODES for t in (False, True)] + [(512, "first_fit", False)],
)
def test_graph_packs_the_reference_rows(text_corpus, L, mode, truncate):
    ids = text_corpus[2]
    for chunk in _chunks(ids, spec.chunk_documents(L, np.mean([len(d) for d in ids])))[:2]:
        values = np.concatenate(chunk).astype(np.int64)
        got = _graph_pack(values, np.array([len(d) for d in chunk], np.int64), L, mode, truncate)
        want = reference.pack([np.asarray(d) for d in chunk], L, mode, truncate)
        assert want["tokens"].shape[0] > 0
        for key in KEYS:
            np.testing.assert_array_equal(got[key].numpy(), want[key], err_msg=f"{key}, L={L}, {mode}")


def _unpacked(rows):
    """Each segment's tokens, checking segment ids are 1..n from column 0 and positions restart."""
    out = []
    for tok, seg, pos in zip(rows["tokens"], rows["segment_ids"], rows["positions"], strict=True):
        n = int(seg.max())
        filled = int((seg > 0).sum())
        assert (seg[:filled] > 0).all() and (seg[filled:] == 0).all()  # padding only at the end
        for s in range(1, n + 1):
            at = np.nonzero(seg == s)[0]
            assert len(at) and (np.diff(at) == 1).all()
            np.testing.assert_array_equal(pos[at], np.arange(len(at)))
            out.append(tuple(tok[at]))
    return out


@pytest.mark.parametrize("mode", ["first_fit", "none"])
def test_every_piece_lands_once_in_order(text_corpus, mode):
    ids = [np.asarray(d) for d in text_corpus[2][:400]]
    L = 128
    rows = reference.pack(ids, L, mode)
    pieces = [tuple(d[k : k + L]) for d in ids for k in range(0, len(d), L)]
    assert sorted(_unpacked(rows)) == sorted(pieces)
    assert rows["tokens"].dtype == np.int32


def test_first_fit_fills_real_text(text_corpus):
    ids = text_corpus[2]
    lengths = np.array([len(d) for d in ids])
    for L in (128, 512):
        size = spec.chunk_documents(L, lengths.mean())
        rows = sum(reference.place(c, L, "first_fit").rows for c in _chunks(lengths, size))
        assert lengths.sum() / (rows * L) >= 0.98, L


def test_row_shuffle_is_keyed_by_the_seed_and_the_chunk():
    """A chunk's rows are permuted by a Philox shuffle keyed by (rows key ^ tokens, the
    length-weighted index sum): each seed and each chunk its own order, every row once."""
    lengths = tf.ragged.constant([[1, 2, 3], [4], [5, 6]], dtype=tf.int64)
    seed = text_stages.chunk_seed(tf, domain_key(7, KEY_ROWS), lengths)
    assert seed.numpy().tolist() == [domain_key(7, KEY_ROWS) ^ 6, 3 * 1 + 1 * 2 + 2 * 3]
    got = order_stream.permutation(tf, 50, seed).numpy()
    want = tf.random.experimental.stateless_shuffle(tf.range(50, dtype=tf.int64), seed, alg="philox").numpy()
    np.testing.assert_array_equal(got, want)
    assert sorted(got) == list(range(50)) and list(got) != list(range(50))
    other = text_stages.chunk_seed(tf, domain_key(8, KEY_ROWS), lengths)
    assert list(order_stream.permutation(tf, 50, other).numpy()) != list(got)


@pytest.mark.parametrize("mode", MODES)
def test_predicted_fill_is_the_pipelines(text_ds, mode):
    """The fill build() packs (eval, every document once) against predict_fill on the manifest's
    histogram: within one point."""
    L = 128
    ds = tfpipe.build(text_ds, batch_size=8, sequence_length=L, packing=mode, training=False, split="train")
    real = slots = 0
    for batch in ds:
        seg = batch["segment_ids"].numpy()
        real += int((seg > 0).sum())
        slots += int((seg.max(axis=1) > 0).sum()) * L  # eval's last batch is padded with empty rows
    histogram = tfpipe.Manifest.load(text_ds).split("train").text.length_histogram
    assert abs(fill.predict_fill(histogram, L, mode) - real / slots) < 0.01


def test_steps_per_epoch_of_text_counts_predicted_rows(text_ds):
    from tfpipe.errors import ConfigError

    with pytest.raises(ConfigError, match="needs the sequence_length"):
        tfpipe.steps_per_epoch(text_ds, 8)
    text = tfpipe.Manifest.load(text_ds).split("train").text
    rows = round(text.tokens / (128 * fill.predict_fill(text.length_histogram, 128, "first_fit")))
    assert tfpipe.steps_per_epoch(text_ds, 8, sequence_length=128) == rows // 8
    none = tfpipe.steps_per_epoch(text_ds, 8, sequence_length=128, packing="none")
    h = text.length_histogram
    assert none == sum(-(-n // 128) * c for n, c in zip(h["lengths"], h["counts"], strict=True)) // 8


def test_lengths_of_histogram_keeps_every_token():
    h = {"lengths": [1, 5, 16384, 32768], "counts": [2, 1, 3, 1], "tokens": [2, 5, 49200, 33000]}
    lengths = fill.lengths_of(h)
    assert sorted(lengths.tolist()) == [1, 1, 5, 16400, 16400, 16400, 33000]
    rows = sum(-(-int(x) // 128) for x in lengths)
    assert fill.predict_fill(h, 128, "none") == pytest.approx(82207 / (rows * 128))

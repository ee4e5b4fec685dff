"""build() on text datasets: static [B, L] int32 batches, every document back by segment id,
token id 0 kept, the output forms, resuming at a step, sharding, and refusals by name."""

from __future__ import annotations

import collections
import warnings

import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from tfpipe.errors import ConfigError
from tfpipe.modalities.text import stages as text_stages
from tfpipe.packing import reference
from tfpipe.packing.spec import DEFAULT_CHUNK, MAX_CHUNK, chunk_documents
from tfpipe.pipeline import TilingWarning, plan

B, L = 8, 128


def _batches(ds, n=None):
    out = []
    for batch in ds if n is None else ds.take(n):
        out.append(tf.nest.map_structure(lambda t: t.numpy(), batch))
    return out


def _segments(batches):
    """Every segment's tokens, from rows of {"tokens", "segment_ids", "positions"}."""
    out = []
    for b in batches:
        for tok, seg, pos in zip(b["tokens"], b["segment_ids"], b["positions"], strict=True):
            for s in range(1, int(seg.max()) + 1):
                at = np.nonzero(seg == s)[0]
                np.testing.assert_array_equal(pos[at], np.arange(len(at)))
                out.append(tok[at].tolist())
    return out


def _documents(segments, ids):
    """Joins the pieces of long documents back (each L tokens but the last) by matching the
    source documents' pieces; returns the documents found, as token lists, sorted."""
    pieces = sorted(map(tuple, segments))
    want = sorted(tuple(d[k : k + L]) for d in ids for k in range(0, len(d), L))
    assert pieces == want  # nothing dropped, nothing repeated
    return pieces


def test_eval_reads_every_document_once_and_detokenizes(text_corpus, text_ds):
    docs, tok, ids = text_corpus
    ds = tfpipe.build(text_ds, batch_size=B, sequence_length=L, training=False, split="train")
    spec = ds.element_spec
    assert {k: (v.shape.as_list(), v.dtype) for k, v in spec.items()} == {
        k: ([B, L], tf.int32) for k in ("tokens", "segment_ids", "positions")
    }
    segments = _segments(_batches(ds))
    _documents(segments, ids)
    # Round trip to text: each document's pieces, taken from the batches in order, decode to
    # its source (a byte-level BPE normalises nothing).
    found = collections.Counter(map(tuple, segments))
    for doc, d in zip(docs, ids, strict=True):
        joined = []
        for k in range(0, len(d), L):
            piece = tuple(d[k : k + L])
            assert found[piece] > 0
            found[piece] -= 1
            joined += piece
        assert tok.decode(joined) == doc
    assert not +found  # every segment used once


def test_training_epoch_holds_every_document_once(text_corpus, text_ds):
    """With one chunk an epoch, the first chunk's rows are epoch 0: each document once."""
    ids = text_corpus[2]
    p = plan(text_ds, batch_size=B, sequence_length=L, seed=5, chunk=len(ids))
    rows = reference.place(np.array([len(d) for d in ids]), L, "first_fit").rows
    first = _batches(p.dataset(upto="pack").batch(rows).take(1))
    _documents(_segments(first), ids)
    assert (first[0]["segment_ids"] > 0).sum() == sum(len(d) for d in ids)


def test_token_id_zero_survives(spm_text):
    root, _, ids = spm_text
    zeros = sum(d.count(0) for d in ids)
    assert tfpipe.Manifest.load(root).tokenizer.special_ids["unk"] == 0
    assert zeros > 0  # the text has real <unk> tokens
    batches = _batches(tfpipe.build(root, batch_size=B, sequence_length=L, training=False, split="train"))
    real = np.concatenate([b["tokens"][b["segment_ids"] > 0] for b in batches])
    assert (real == 0).sum() == zeros
    assert len(real) == sum(len(d) for d in ids)


def test_start_step_equals_the_uninterrupted_run(text_ds):
    """Byte for byte, from a step inside the first chunk (a Position, read when the iterator
    starts) and from a fixed step several chunks on."""
    from tfpipe.resume import Position

    def run(start, n):
        ds = tfpipe.build(text_ds, batch_size=B, sequence_length=L, seed=11, start_step=start)
        return _batches(ds, n)

    full = run(0, 160)
    position = Position(3)
    for step, start in ((3, position), (150, 150)):  # a chunk packs ~80 batches here
        for a, b in zip(full[step:], run(start, 10), strict=False):
            for key in a:
                assert a[key].tobytes() == b[key].tobytes(), (step, key)
    assert position.identity["sequence_length"] == L and position.identity["packing"] == "first_fit"


def test_causal_lm_targets_stay_within_documents(text_corpus, text_ds):
    ids = text_corpus[2]
    eos = tfpipe.Manifest.load(text_ds).tokenizer.special_ids["eos"]
    ds = tfpipe.build(
        text_ds, batch_size=B, sequence_length=L, output="causal_lm", training=False, split="train"
    )
    eos_seen = 0
    for x, targets, weights in _batches(ds):
        seg, tok = x["segment_ids"], x["tokens"]
        assert weights.dtype == np.float32 and targets.dtype == np.int32
        same = (seg[:, :-1] == seg[:, 1:]) & (seg[:, :-1] > 0)
        np.testing.assert_array_equal(weights[:, :-1], same.astype(np.float32))
        assert (weights[:, -1] == 0).all() and (weights[seg == 0] == 0).all()
        np.testing.assert_array_equal(targets[:, :-1][same], tok[:, 1:][same])
        eos_seen += int(((tok == eos) & (seg > 0)).sum())
    assert eos_seen == len(ids)  # one EOS a document, appended before packing


def test_keras_causal_lm_form(text_ds):
    ds = tfpipe.build(text_ds, batch_size=B, sequence_length=L, output="keras_causal_lm", seed=1)
    x, y, weights = ds.element_spec
    assert weights.dtype == tf.float32
    assert sorted(x) == ["padding_mask", "token_ids"]
    assert x["padding_mask"].dtype == tf.bool and y.shape.as_list() == [B, L]


def test_keras_classifier_form(text_corpus, labeled_text_ds):
    from support.packed_text import stored_tokenizer

    ids = stored_tokenizer(labeled_text_ds).encode(text_corpus[0])
    info = tfpipe.Manifest.load(labeled_text_ds).tokenizer.special_ids
    ds = tfpipe.build(
        labeled_text_ds, batch_size=B, sequence_length=L, truncate=True, training=False, split="train"
    )
    batches = _batches(ds)
    x, label, weights = batches[0]
    assert sorted(x) == ["padding_mask", "segment_ids", "token_ids"]
    assert label.dtype == np.int32 and weights.dtype == np.float32
    for i in range(B):
        n = min(len(ids[i]), L - 2)
        assert x["token_ids"][i, 0] == info["cls"] and x["token_ids"][i, n + 1] == info["sep"]
        assert x["token_ids"][i, 1 : n + 1].tolist() == ids[i][:n]
        assert x["padding_mask"][i].sum() == n + 2 and label[i] == i % 3
    # Every document is one row counted once: the padding of the last batch weighs 0 (it used to
    # come as label-0 rows of weight 1, counted by every metric).
    assert all(lab.shape[0] == B for _, lab, _ in batches)
    assert sum(float(w.sum()) for *_, w in batches) == len(ids)
    padded = np.concatenate([w for *_, w in batches]) == 0
    assert padded.tolist() == [False] * len(ids) + [True] * (len(batches) * B - len(ids))


def test_classifier_refuses_documents_longer_than_a_row(labeled_text_ds):
    with pytest.raises(ConfigError, match=r"longer than sequence_length - 2 = 126 .*truncate=True"):
        tfpipe.build(labeled_text_ds, batch_size=B, sequence_length=L)


def test_truncate_keeps_first_pieces_and_says_so(text_corpus, text_ds):
    ids = text_corpus[2]
    p = plan(text_ds, batch_size=B, sequence_length=L, truncate=True, training=False, split="train")
    assert "truncate=True" in p.describe() and "lose the rest" in p.describe()
    segments = _segments(_batches(p.dataset()))
    assert sorted(map(tuple, segments)) == sorted(tuple(d[:L]) for d in ids)


def test_refusals_name_the_option(text_ds):
    with pytest.raises(ConfigError, match="needs sequence_length=L"):
        tfpipe.build(text_ds, batch_size=B)
    with pytest.raises(ConfigError, match=r"packing must be one of .*Received: packing='best'"):
        tfpipe.build(text_ds, batch_size=B, sequence_length=L, packing="best")
    with pytest.raises(ConfigError, match="cannot pack several"):
        tfpipe.build(text_ds, batch_size=B, sequence_length=L, output="keras_classifier", packing="first_fit")


def test_classifier_without_cls_and_sep_frames_with_bos_and_eos(spm_text):
    """SentencePiece's default ids give <s> and </s>, no CLS or SEP: framed as RoBERTa frames a
    sequence, and said (a tokenizer with neither is refused: tests/modalities/text/test_special_tokens.py)."""
    pipe = plan(
        spm_text[0], batch_size=B, sequence_length=L, output="keras_classifier", label="tokens", truncate=True
    )
    assert "framed as BOS tokens EOS, <s> (id 1, the tokenizer's model) and </s> (id 2" in pipe.describe()


def test_tpu_tiling_warns(text_ds):
    with pytest.warns(TilingWarning, match="sequence_length=100 is not a multiple of 128"):
        plan(text_ds, batch_size=B, sequence_length=100)
    with pytest.warns(TilingWarning, match="batch per replica, 6, is not a multiple of 8"):
        plan(text_ds, batch_size=6, sequence_length=L)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TilingWarning)
        p = plan(text_ds, batch_size=B, sequence_length=L)
    assert [s.name for s in p.stages][6:10] == ["chunk", "parse", "pack", "batch"]
    assert [s.group for s in p.stages if s.name in ("chunk", "parse", "pack", "batch")] == [
        "read",
        "parse",
        "pack",
        "batch",
    ]


def test_input_pipelines_share_the_documents(text_corpus, text_ds):
    ids = text_corpus[2]
    segments = []
    for i in range(2):
        ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=i, num_replicas_in_sync=2)
        ds = tfpipe.build(
            text_ds, batch_size=2 * B, sequence_length=L, training=False, split="train", input_context=ctx
        )
        segments += _segments(_batches(ds))
    _documents(segments, ids)


def test_token_ids_beyond_int32_are_refused(tmp_path):
    """Records without a manifest: ids must fit the int32 outputs."""
    path = str(tmp_path / "foreign.tfrecord")
    with tf.io.TFRecordWriter(path) as w:
        for tokens in ([5, 6, 7], [8, 1 << 40, 9]):
            feature = {"tokens": tf.train.Feature(int64_list=tf.train.Int64List(value=tokens))}
            w.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    ds = tfpipe.build(path, preset="text", batch_size=1, sequence_length=L, training=False)
    with pytest.raises(tf.errors.InvalidArgumentError, match=rf"in \[0, {1 << 31}\).*{path}"):
        _batches(ds)


def test_attention_mask_is_block_diagonal():
    seg = tf.constant([[1, 1, 2, 2, 2, 0]])
    mask = tfpipe.attention_mask(seg).numpy()[0]
    assert mask[0, 1] and not mask[1, 2] and mask[4, 2] and not mask[5].any() and not mask[:, 5].any()
    causal = tfpipe.attention_mask(seg, causal=True).numpy()[0]
    assert causal[4, 2] and not causal[2, 4] and causal[1, 0] and not causal[0, 1]


def test_chunk_size_follows_the_mean_length():
    assert chunk_documents(512, 64) == 4096
    assert chunk_documents(128, None) == DEFAULT_CHUNK
    assert chunk_documents(2048, 1) == MAX_CHUNK
    assert text_stages.TPU_LANES == 128


def test_shuffle_buffer_order_with_a_disk_cache(text_corpus, text_ds, tmp_path):
    ids = text_corpus[2]
    pieces = {tuple(d[k : k + L]) for d in ids for k in range(0, len(d), L)}
    ds = tfpipe.build(
        text_ds, batch_size=B, sequence_length=L, order="shuffle_buffer", cache=f"disk:{tmp_path}/c", seed=2
    )
    segments = _segments(_batches(ds, 60))
    assert len(segments) > 60 and all(tuple(s) in pieces for s in segments)
    assert list(tmp_path.iterdir())  # the records were cached on disk


@pytest.mark.slow
def test_tf_data_service_equals_local(text_ds):
    from tfpipe import service

    def run(**kw):
        return _batches(
            tfpipe.build(text_ds, batch_size=B, sequence_length=L, training=False, split="train", **kw)
        )

    local = run()
    with service.start_dispatcher(allow_remote=True) as dispatcher:
        worker = service.start_worker(dispatcher.address, allow_remote=True)
        try:
            remote = run(service=dispatcher.target)
        finally:
            worker.stop()
    assert len(remote) == len(local)
    for a, b in zip(local, remote, strict=True):
        for key in a:
            assert a[key].tobytes() == b[key].tobytes()


@pytest.fixture(scope="module")
def small_ds(text_ds, tmp_path_factory):
    """A corpus of 79 documents (the issue's), tokenized by text_ds's tokenizer."""
    import os

    from tfpipe.synthetic import text as corpus

    from support.packed_text import convert

    tok = os.path.join(text_ds, "tokenizer.json")
    return convert(tmp_path_factory.mktemp("small"), corpus.documents(79), "small", tokenizer=tok)


def test_a_batch_larger_than_an_epochs_rows_is_refused_as_for_images(small_ds, capsys):
    """One split, one count: records are documents, a batch holds rows (packed sequences), and
    build(), steps_per_epoch and bench refuse a batch larger than the rows one epoch packs into."""
    import re

    from tfpipe.errors import DataError

    with pytest.raises(DataError) as refused:
        tfpipe.build(small_ds, batch_size=64, sequence_length=2048)
    said = str(refused.value)
    rows = int(
        re.search(r"It gets (\d+) rows \(packed sequences of 2048 tokens; 79 documents", said).group(1)
    )
    assert 0 < rows < 64 and "fewer than one batch of 64 rows: every batch would repeat rows" in said
    with pytest.raises(DataError) as counted:
        tfpipe.steps_per_epoch(small_ds, 64, sequence_length=2048)
    assert (
        f"has 79 records (documents) that pack into {rows} rows of 2048 tokens, fewer than one batch of 64"
        in str(counted.value)
    )
    assert tfpipe.steps_per_epoch(small_ds, rows, sequence_length=2048) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TilingWarning)
        described = plan(small_ds, batch_size=rows, sequence_length=2048).describe()  # accepted
    assert f"one epoch packs into ~{rows} rows of 2048 tokens (predicted)" in described
    assert "(the split has 79: in training a chunk spans" in described  # chunks as the corpus has them
    from tfpipe.cli import main

    capsys.readouterr()
    code = main(["bench", "--data", small_ds, "--sequence-length", "2048", "--batch-size", "64", "--quiet"])
    err = capsys.readouterr().err
    assert code == 1 and f"It gets {rows} rows (packed sequences of 2048 tokens" in err  # before measuring


def test_steps_per_epoch_counts_the_rows_build_packs(small_ds):
    """An EOS per document (the causal outputs) makes more tokens, so as many or more rows."""
    plain = tfpipe.steps_per_epoch(small_ds, 1, sequence_length=128)
    causal = tfpipe.steps_per_epoch(small_ds, 1, sequence_length=128, output="causal_lm")
    assert causal >= plain and causal > 0
    with pytest.raises(ConfigError, match="Unknown option"):
        tfpipe.steps_per_epoch(small_ds, 1, sequence_length=128, colour="red")

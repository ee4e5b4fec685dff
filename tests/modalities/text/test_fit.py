"""Real models train on build()'s text batches: a small Keras transformer LM on the causal-LM
form (with the block-diagonal mask from the segment ids), and a KerasHub BERT classifier built
from a config (no weights download) on the classifier form. The loss goes down."""

from __future__ import annotations

import numpy as np
import pytest

import tfpipe

B, L = 8, 128


def _lm(vocab: int):
    import keras
    import tensorflow as tf

    class Mask(keras.layers.Layer):
        def call(self, segment_ids):
            return tfpipe.attention_mask(segment_ids, causal=True)

    inputs = {k: keras.Input((L,), dtype="int32", name=k) for k in ("tokens", "segment_ids", "positions")}
    x = keras.layers.Embedding(vocab, 64)(inputs["tokens"]) + keras.layers.Embedding(L, 64)(
        inputs["positions"]
    )
    mask = Mask()(inputs["segment_ids"])
    x = x + keras.layers.MultiHeadAttention(4, 16)(x, x, attention_mask=mask)
    x = keras.layers.LayerNormalization()(x)
    x = x + keras.layers.Dense(64)(keras.layers.Dense(128, activation="gelu")(x))
    logits = keras.layers.Dense(vocab)(keras.layers.LayerNormalization()(x))
    model = keras.Model(inputs, logits)
    model.compile(
        optimizer=keras.optimizers.Adam(3e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        weighted_metrics=[],
    )
    tf.random.set_seed(0)
    return model


@pytest.mark.slow
def test_transformer_lm_fits_packed_rows(text_ds):
    vocab = tfpipe.Manifest.load(text_ds).tokenizer.vocab_size
    ds = tfpipe.build(text_ds, batch_size=B, sequence_length=L, output="causal_lm", seed=3)
    history = _lm(vocab).fit(ds, epochs=3, steps_per_epoch=30, verbose=0)
    losses = history.history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < 0.9 * losses[0], losses


@pytest.mark.slow
def test_keras_hub_bert_classifier_fits(labeled_text_ds):
    keras_hub = pytest.importorskip(
        "keras_hub",
        reason="keras-hub is not installed (it needs tensorflow-text: not in the tensorflow-cpu venv)",
    )
    import keras

    info = tfpipe.Manifest.load(labeled_text_ds).tokenizer
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=info.vocab_size,
        num_layers=1,
        num_heads=2,
        hidden_dim=32,
        intermediate_dim=64,
        max_sequence_length=L,
    )
    model = keras_hub.models.BertTextClassifier(backbone, num_classes=3, preprocessor=None, dropout=0.0)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    ds = tfpipe.build(labeled_text_ds, batch_size=B, sequence_length=L, truncate=True, seed=3)
    history = model.fit(ds, epochs=3, steps_per_epoch=30, verbose=0)
    losses = history.history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < losses[0], losses

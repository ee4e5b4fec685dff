"""Checks that run on whichever Keras backend this process has (TensorFlow in the test process,
JAX in the child that tests/test_backends.py starts with KERAS_BACKEND=jax): what a model
does with tfpipe's batches and helpers. Each returns plain JSON values for the test to assert.

Run as a script: `python tests/support/backend_checks.py IMAGE_DS TEXT_DS` prints one JSON line with
every check's result (the backend must be chosen before Keras is imported, so the JAX backend's
checks need a process of their own).
"""

from __future__ import annotations

import json
import os
import sys
import warnings

import numpy as np


def jax_env(devices: int = 2) -> dict[str, str]:
    """The environment of a child process whose Keras runs on JAX's CPU with `devices` devices,
    importing this worktree's tfpipe and the tests' helpers."""
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return dict(
        os.environ,
        KERAS_BACKEND="jax",
        JAX_PLATFORMS="cpu",
        XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}",
        TF_CPP_MIN_LOG_LEVEL="3",
        PYTHONPATH=os.pathsep.join([os.path.dirname(tests), tests, os.environ.get("PYTHONPATH", "")]),
    )


def mask_reference(seg: np.ndarray, causal: bool) -> np.ndarray:
    """The block-diagonal mask in NumPy: same segment, not padding, (causal) key <= query."""
    same = (seg[:, :, None] == seg[:, None, :]) & (seg != 0)[:, :, None]
    if causal:
        same &= np.tril(np.ones((seg.shape[1],) * 2, bool))
    return same


SEGMENTS = np.array([[1, 1, 2, 2, 2, 0, 0], [1, 2, 3, 3, 3, 3, 0], [1, 1, 1, 1, 1, 1, 1]], np.int32)


def attention_mask_checks() -> dict:
    """`tfpipe.attention_mask` on a concrete array and inside a functional model (its input a
    KerasTensor, the length dynamic), against the NumPy reference."""
    import keras

    import tfpipe

    out = {}
    for causal in (False, True):
        want = mask_reference(SEGMENTS, causal)
        direct = keras.ops.convert_to_numpy(tfpipe.attention_mask(SEGMENTS, causal=causal))
        seg = keras.Input((None,), dtype="int32")
        model = keras.Model(seg, keras.ops.cast(tfpipe.attention_mask(seg, causal=causal), "int32"))
        inside = model.predict(SEGMENTS, verbose=0)
        out[f"causal={causal}"] = [bool((direct == want).all()), bool((inside == want).all())]
    return out


def count_metric():
    import keras

    class Count(keras.metrics.Metric):
        """The weight of the examples (or tokens) a metric counted: padding weighs 0."""

        def __init__(self, name="count", **kw):
            super().__init__(name=name, **kw)
            self.total = self.add_variable(shape=(), initializer="zeros", name="total")

        def update_state(self, y_true, y_pred, sample_weight=None):
            w = keras.ops.ones_like(y_true, "float32") if sample_weight is None else sample_weight
            self.total.assign_add(keras.ops.sum(keras.ops.cast(w, "float32")))

        def result(self):
            return keras.ops.cast(self.total, "float32")

    return Count()


def _quiet(fn):
    """(fn's result, the warnings it raised, as strings)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn()
    return result, [f"{w.category.__name__}: {w.message}" for w in caught]


def image_eval_checks(image_ds: str) -> dict:
    """A padded image eval (37 images, batches of 8: 5 batches, the last 3 of padding): evaluate
    and predict, their warnings, and the weighted metrics against what predict gives."""
    import keras

    import tfpipe

    ds = tfpipe.build(image_ds, batch_size=8, training=False, image_size=16, pad_remainder=True)
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((16, 16, 3)),
            keras.layers.Rescaling(1 / 255),
            keras.layers.Flatten(),
            keras.layers.Dense(3),
        ]
    )
    model.compile(
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        weighted_metrics=[count_metric(), keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
    )
    scores, evaluate_warnings = _quiet(lambda: model.evaluate(ds, verbose=0, return_dict=True))
    logits, predict_warnings = _quiet(lambda: model.predict(ds, verbose=0))
    labels = np.concatenate([y.numpy() for _, y, _ in ds])
    weights = np.concatenate([w.numpy() for _, _, w in ds])
    real = weights > 0
    accuracy = float((logits.argmax(-1) == labels)[real].mean())
    return {
        "count": float(scores["count"]),
        "accuracy": [float(scores["accuracy"]), accuracy],
        "predicted_rows": int(logits.shape[0]),
        "warnings": evaluate_warnings + predict_warnings,
    }


def text_eval_checks(text_ds: str) -> dict:
    """A text eval (keras_causal_lm: weights per token) with a tiny model: its cardinality, and
    evaluate and predict without warnings, counting exactly the real target tokens."""
    import keras

    import tfpipe

    L = 128
    ds = tfpipe.build(
        text_ds, batch_size=8, training=False, sequence_length=L, output="keras_causal_lm", split="train"
    )
    vocab = tfpipe.Manifest.load(text_ds).tokenizer.vocab_size
    inputs = {
        "token_ids": keras.Input((L,), dtype="int32", name="token_ids"),
        "padding_mask": keras.Input((L,), dtype="bool", name="padding_mask"),
    }
    embedded = keras.layers.Embedding(vocab, 8)(inputs["token_ids"])
    model = keras.Model(inputs, keras.layers.Dense(vocab)(embedded))
    model.compile(
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), weighted_metrics=[count_metric()]
    )
    scores, evaluate_warnings = _quiet(lambda: model.evaluate(ds, verbose=0, return_dict=True))
    # predict with one output a row (the language model's would be [rows, L, vocab] floats).
    rows = keras.Model(inputs, keras.layers.Dense(1)(keras.layers.GlobalAveragePooling1D()(embedded)))
    out, predict_warnings = _quiet(lambda: rows.predict(ds, verbose=0))
    weights = [w.numpy().sum() for _, _, w in ds]
    return {
        "cardinality": int(ds.cardinality()),
        "batches": len(weights),
        "count": [float(scores["count"]), float(sum(weights))],
        "predicted_rows": int(out.shape[0]),
        "warnings": evaluate_warnings + predict_warnings,
    }


def bench_checks(image_ds: str) -> dict:
    """What `tfpipe bench --model` times and records on this backend: the device, the
    environment, and a real train step of small_cnn."""
    import tfpipe
    from tfpipe.bench.measure import consumer as consumers
    from tfpipe.bench.run import keras_environment

    pipeline = tfpipe.plan(image_ds, batch_size=8, image_size=32, seed=0)
    timed, device = consumers.from_model("small_cnn", pipeline, num_classes=3, seconds=0.2)
    return {
        "environment": keras_environment(),
        "device": [device.kind, device.name, device.backend],
        "consumer": [timed.source, timed.device, timed.step_time_ms > 0],
    }


def input_context_checks(image_ds: str) -> dict:
    """`input_context` with a replica count of its own (JAX's devices, `jax.device_count()`):
    tf.distribute's per-replica batches, refused where Keras runs on JAX (each host's batch
    is its share of the global batch there)."""
    import tensorflow as tf

    import tfpipe

    ctx = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0, num_replicas_in_sync=8)
    try:
        plan = tfpipe.plan(image_ds, batch_size=16, image_size=16, input_context=ctx)
    except tfpipe.ConfigError as e:
        return {"refused": str(e)}
    return {"batch": plan.batch_size}


def main(image_ds: str, text_ds: str) -> dict:
    """Every check's result; a check that raised gives {"error": its message}, so the others
    still report (each test asserts on its own)."""
    import keras

    checks = {
        "attention_mask": attention_mask_checks,
        "image_eval": lambda: image_eval_checks(image_ds),
        "text_eval": lambda: text_eval_checks(text_ds),
        "bench": lambda: bench_checks(image_ds),
        "input_context": lambda: input_context_checks(image_ds),
    }
    out: dict = {"backend": keras.backend.backend()}
    for name, check in checks.items():
        try:
            out[name] = check()
        except Exception as e:
            out[name] = {"error": f"{type(e).__name__}: {e}"[:2000]}
    return out


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:3])))

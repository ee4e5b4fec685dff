"""The bench's Keras models: random-weight models for a pipeline's batches, the device they
train on, and the clock of a `model.fit` step.

`--model` times one on the local device as the consumer (`consumer.from_model`), and `--fit`
trains one on the real pipeline and on synthetic input (`simulate.fit_check`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import time
from typing import TYPE_CHECKING, Any, Literal

from tfpipe import devices
from tfpipe._tf import tf
from tfpipe.errors import ConfigError

# The Keras models `--model` builds with random weights (nothing is downloaded), by the batches
# they take; each modality's bench half names those of its own (`BenchHalf.models`).
IMAGE_MODELS = ("resnet50", "mobilenet_v2", "efficientnet_b0", "small_cnn")
TABLE_MODELS = ("mlp", "small_mlp")
TEXT_MODELS = ("small_transformer",)

# At most this many steps are measured in a monitored fit (as many as `fit_step_seconds` times).
MAX_MONITORED_STEPS = 500

if TYPE_CHECKING:
    from tfpipe.pipeline import Pipeline


@dataclasses.dataclass(frozen=True)
class Device:
    """The device a model trains on, and what places it there.

    Attributes:
      kind, name: e.g. "TPU", "TPU (8 cores)".
      strategy: the `tf.distribute.Strategy` (TensorFlow backend), or the
        `keras.distribution.DataParallel` over the local devices (JAX backend, several devices),
        or None (JAX, one device).
      cores: the replicas a batch is split over.
      backend: the Keras backend the model runs on, "tensorflow" or "jax".
    """

    kind: Literal["TPU", "GPU", "CPU"]
    name: str
    strategy: Any
    cores: int = 1
    backend: str = "tensorflow"

    def build_scope(self) -> Any:
        """The context a model is built in."""
        return self.strategy.scope() if self.strategy is not None else contextlib.nullcontext()

    def fit_scope(self) -> Any:
        """The context `model.fit` runs in: a JAX model's distribution places each batch at fit
        time (a TensorFlow strategy was captured when the model was built)."""
        return self.build_scope() if self.backend == "jax" else contextlib.nullcontext()


def discover_device() -> Device:
    """The best local device of the Keras backend in use. TensorFlow: as `tfpipe.strategy()`
    chooses it, a TPU, else the GPUs, else the CPU (a TPU is looked for only where a TPU VM's
    device files or variables say one is). JAX: its local devices, data-parallel when several."""
    import keras

    if keras.backend.backend() == "jax":
        return _jax_device()
    choice = devices.choose()
    return Device(choice.kind, choice.name, choice.strategy, choice.replicas)


def _jax_device() -> Device:
    """JAX's local devices (the first's platform names the kind), with a DataParallel over them
    when there are several, so the step is timed on all of them as training runs."""
    import jax
    import keras

    local = jax.local_devices()
    platform = local[0].platform.lower()
    kind: Literal["TPU", "GPU", "CPU"] = (
        "TPU" if platform == "tpu" else "GPU" if platform in ("gpu", "cuda", "rocm") else "CPU"
    )
    what = local[0].device_kind
    name = f"{what} (JAX)" if len(local) == 1 else f"{len(local)} x {what} (JAX)"
    strategy = keras.distribution.DataParallel(devices=local) if len(local) > 1 else None
    return Device(kind, name, strategy, len(local), backend="jax")


def build_model(name: str, element_spec: Any, num_classes: int, vocab_size: int | None = None) -> Any:
    """A Keras model with random weights for a batch of `element_spec` (nothing is downloaded).

    Image models take (images, labels) batches and classify into `num_classes`; table models
    take (dict of features, label) batches and regress the label, so any label values work.
    The text model takes packed rows (a dict: a language model over `num_classes` token ids) or
    a classifier's `(dict, label)` rows (into `num_classes` classes), with token ids below
    `vocab_size` (None: `num_classes`).
    """
    if name in TEXT_MODELS:
        return _text_model(element_spec, num_classes, vocab_size or num_classes)
    features_spec, _ = element_spec
    if name in IMAGE_MODELS:
        return _image_model(name, tuple(features_spec.shape[1:]), num_classes)
    if name in TABLE_MODELS:
        if not isinstance(features_spec, dict):
            raise ConfigError(
                f"model={name!r} (--model) expects a table's dict of features. Received: {features_spec}"
            )
        return _table_model(name, features_spec)
    raise ConfigError(f"model must be one of the bench's models (--model). Received: model={name!r}")


def _image_model(name: str, shape: tuple[int, ...], num_classes: int) -> Any:
    import keras

    applications = {
        "resnet50": keras.applications.ResNet50,
        "mobilenet_v2": keras.applications.MobileNetV2,
        "efficientnet_b0": keras.applications.EfficientNetB0,
    }
    if name in applications:
        model = applications[name](weights=None, input_shape=shape, classes=num_classes)
    else:
        inputs = keras.Input(shape)
        x = keras.layers.Conv2D(16, 3, strides=4, activation="relu")(inputs)
        x = keras.layers.Conv2D(32, 3, strides=2, activation="relu")(x)
        x = keras.layers.GlobalAveragePooling2D()(x)
        model = keras.Model(inputs, keras.layers.Dense(num_classes)(x), name="small_cnn")
    # keras.applications end in softmax, so they train on probabilities, as the reference
    # ResNet-50 training scripts do; small_cnn ends in logits.
    model.compile(
        optimizer=keras.optimizers.SGD(0.01, momentum=0.9),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=name not in applications),
    )
    return model


def _table_model(name: str, features_spec: dict[str, Any]) -> Any:
    import keras

    inputs, parts = {}, []
    for key, spec in sorted(features_spec.items()):
        width = int(math.prod(spec.shape[1:]))
        inp = keras.Input(shape=tuple(spec.shape[1:]), dtype=spec.dtype.name, name=_safe(key))
        inputs[key] = inp
        if spec.dtype.name == "string":
            hashed = keras.layers.Hashing(1024)(inp)
            parts.append(keras.layers.Flatten()(keras.layers.Embedding(1024, 8)(hashed)))
        else:
            x = keras.layers.Reshape((max(1, width),))(inp)
            parts.append(keras.layers.Lambda(lambda t: keras.ops.cast(t, "float32"))(x))
    x = keras.layers.Concatenate()(parts) if len(parts) > 1 else parts[0]
    for units in (512, 256, 128) if name == "mlp" else (64,):
        x = keras.layers.Dense(units, activation="relu")(x)
    model = keras.Model(inputs, keras.layers.Dense(1)(x), name=name)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="mse")
    return model


# The small transformer: width, heads, blocks. Small enough to train on a CPU in tests, shaped
# like the real thing (token and position embeddings, attention within each packed document).
TEXT_WIDTH, TEXT_HEADS, TEXT_BLOCKS = 128, 4, 2


def _text_model(element_spec: Any, num_classes: int, vocab: int) -> Any:
    """A small transformer for text batches: a causal language model on packed rows
    (`{"tokens", "segment_ids", "positions"}`), attending only within each document; or, for a
    classifier's `({"token_ids", "padding_mask", "segment_ids"}, label)` rows, a classifier."""
    import keras
    from keras import ops

    classify = isinstance(element_spec, tuple)
    spec = element_spec[0] if classify else element_spec
    ids = "token_ids" if classify else "tokens"
    if not isinstance(spec, dict) or ids not in spec:
        raise ConfigError(
            f"model='small_transformer' (--model) takes the text pipeline's rows. Received: {element_spec}"
        )
    L = int(spec[ids].shape[-1])
    inputs = {k: keras.Input((L,), dtype=v.dtype.name, name=k) for k, v in spec.items()}
    if classify:
        real = ops.cast(inputs["padding_mask"], "bool")
        mask = ops.logical_and(ops.expand_dims(real, 1), ops.expand_dims(real, 2))
        positions = ops.expand_dims(ops.arange(L), 0)
    else:
        seg = inputs["segment_ids"]
        same = ops.logical_and(
            ops.equal(ops.expand_dims(seg, 2), ops.expand_dims(seg, 1)), ops.expand_dims(seg != 0, 2)
        )
        mask = ops.logical_and(same, ops.tril(ops.ones((L, L), "bool")))
        positions = inputs["positions"]
    x = keras.layers.Embedding(vocab, TEXT_WIDTH)(inputs[ids]) + keras.layers.Embedding(L, TEXT_WIDTH)(
        positions
    )
    for _ in range(TEXT_BLOCKS):
        h = keras.layers.LayerNormalization()(x)
        x = x + keras.layers.MultiHeadAttention(TEXT_HEADS, TEXT_WIDTH // TEXT_HEADS)(
            h, h, attention_mask=mask
        )
        h = keras.layers.LayerNormalization()(x)
        x = x + keras.layers.Dense(TEXT_WIDTH)(keras.layers.Dense(4 * TEXT_WIDTH, activation="gelu")(h))
    if classify:
        model = keras.Model(inputs, keras.layers.Dense(num_classes)(x[:, 0]), name="small_transformer")
        model.compile(
            optimizer=keras.optimizers.Adam(1e-3),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
        return model
    model = _packed_lm()(inputs=inputs, outputs=keras.layers.Dense(num_classes)(x), name="small_transformer")
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    return model


@functools.cache
def _packed_lm() -> Any:
    """The Keras model class of the language model (made on first use: keras loads lazily)."""
    import keras
    from keras import ops

    class _PackedLM(keras.Model):
        """A Keras model whose loss is next-token prediction within each packed document: the
        batches carry no targets, which follow from the tokens and segment ids."""

        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
            seg, tokens = x["segment_ids"], x["tokens"]
            targets = ops.concatenate([tokens[:, 1:], ops.zeros_like(tokens[:, :1])], 1)
            following = ops.concatenate([seg[:, 1:], ops.zeros_like(seg[:, :1])], 1)
            # No loss on padding, nor from a document's last token to the next document's first.
            weights = ops.cast(ops.logical_and(ops.equal(seg, following), seg != 0), "float32")
            loss = keras.losses.sparse_categorical_crossentropy(targets, y_pred, from_logits=True)
            return ops.sum(loss * weights) / ops.maximum(ops.sum(weights), 1.0)

    return _PackedLM


def _safe(key: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in key)


def fit_step_seconds(
    model: Any, dataset: Any, *, seconds: float, warmup_steps: int = 2, min_steps: int = 3
) -> tuple[float, int]:
    """Mean seconds per `model.fit` step on `dataset` after `warmup_steps` (tracing, compiling
    and pipeline warm-up); enough steps to fill about `seconds`.

    Returns:
      (seconds per step, steps timed).
    """
    import keras

    class Clock(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.times: list[float] = []

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            self.times.append(time.perf_counter())

    warm = Clock()
    model.fit(
        dataset, epochs=1, steps_per_epoch=max(2, warmup_steps), verbose=0, shuffle=False, callbacks=[warm]
    )
    estimate = max(1e-4, warm.times[-1] - warm.times[-2])
    steps = max(min_steps, min(500, int(seconds / estimate)))
    clock = Clock()
    model.fit(dataset, epochs=1, steps_per_epoch=steps + 1, verbose=0, shuffle=False, callbacks=[clock])
    # Timed from the end of the first step, so fit()'s own start-up is left out.
    return (clock.times[-1] - clock.times[0]) / steps, steps


def monitored_fit(model: Any, dataset: Any, *, seconds: float, warmup_steps: int, min_steps: int = 3) -> Any:
    """`model.fit` on `dataset` for about `seconds` after `warmup_steps`, its wait for input
    measured by `tfpipe.monitor.InputWait` as it would be in the user's own training.

    Returns:
      The monitor's Figure of the steps after warm-up.
    """
    import keras

    from tfpipe.monitor import InputWait  # the monitor imports Keras: only a --fit run loads it

    class Timer(keras.callbacks.Callback):
        """Stops fit `seconds` after warm-up (from a batch's beginning, so Keras keeps its
        batch-end callbacks asynchronous, as in training without it)."""

        def __init__(self) -> None:
            super().__init__()
            self.started: float | None = None

        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            if batch == warmup_steps:
                self.started = time.perf_counter()
            elif self.started is not None and batch >= warmup_steps + min_steps:
                self.model.stop_training = time.perf_counter() - self.started >= seconds

    monitor = InputWait(warmup_steps=warmup_steps, verbose=0)
    model.fit(
        monitor.watch(dataset),
        epochs=1,
        steps_per_epoch=warmup_steps + MAX_MONITORED_STEPS,
        verbose=0,
        shuffle=False,
        callbacks=[Timer(), monitor],
    )
    if monitor.result is None or monitor.result.host is None:
        raise ConfigError(f"model.fit ran no step after {warmup_steps} warm-up steps. Received: {dataset}")
    return monitor.result.host


def num_classes_for(class_names: tuple[str, ...], label_offset: int) -> int:
    """Classes an image model needs so every label (offset included) is a valid index."""
    return max(1000, len(class_names) + label_offset)


def outputs_for(pipeline: Pipeline) -> int:
    """The classes a bench model of `pipeline`'s batches predicts: a text language model's
    token ids (the tokenizer's vocabulary), else the classes of the labels."""
    manifest = pipeline.source.manifest
    pack = pipeline.decoder.packing
    if pack is not None and not pack.classify:
        vocab = pack.vocab_size or (manifest.tokenizer.vocab_size if manifest and manifest.tokenizer else 0)
        if not vocab:
            raise ConfigError(
                f"model='small_transformer' (--model) predicts token ids, but {pipeline.source.where} "
                "names no tokenizer vocabulary (its manifest has none). Received: vocab_size=None"
            )
        return int(vocab)
    return num_classes_for(pipeline.source.class_names, 0)


@dataclasses.dataclass(frozen=True)
class ModelOnDevice:
    """A model built on the best local device, and one real batch repeated from memory.

    Attributes:
      model: the compiled Keras model, built under `device.strategy`.
      device: where it trains.
      real: the pipeline's full dataset.
      synthetic: one batch of `real`, repeated: input with no pipeline work.
    """

    model: Any
    device: Device
    real: Any
    synthetic: Any


def model_on_device(
    name: str, pipeline: Pipeline, *, num_classes: int, device: Device | None = None
) -> ModelOnDevice:
    """Builds `name` for `pipeline`'s batches on `device` (the best local one when None)."""
    device = device or discover_device()
    real = pipeline.dataset()
    batch = next(iter(real.take(1)))
    pack = pipeline.decoder.packing
    with device.build_scope():
        model = build_model(
            name, real.element_spec, num_classes, pack.vocab_size if pack is not None else None
        )
    return ModelOnDevice(model, device, real, tf().data.Dataset.from_tensors(batch).repeat())

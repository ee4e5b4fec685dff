"""The bench's Keras models: random-weight models for a pipeline's batches, the device they
train on, and the clock of a `model.fit` step.

`--model` times one on the local device as the consumer (`consumer.from_model`), and `--fit`
trains one on the real pipeline and on synthetic input (`simulate.fit_check`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import TYPE_CHECKING, Any, Literal

from tfpipe import devices
from tfpipe.bench.config import IMAGE_MODELS, TABLE_MODELS
from tfpipe.errors import ConfigError

if TYPE_CHECKING:
    from tfpipe.pipeline import Pipeline


@dataclasses.dataclass(frozen=True)
class Device:
    """The device a model trains on, and the strategy that places it there."""

    kind: Literal["TPU", "GPU", "CPU"]
    name: str
    strategy: Any
    cores: int = 1


def discover_device() -> Device:
    """The best local device, as `tfpipe.strategy()` chooses it: a TPU, else the GPUs, else the
    CPU. A TPU is looked for only where a TPU VM's device files or variables say one is."""
    choice = devices.choose()
    return Device(choice.kind, choice.name, choice.strategy, choice.replicas)


def build_model(name: str, element_spec: Any, num_classes: int) -> Any:
    """A Keras model with random weights for a batch of `element_spec` (nothing is downloaded).

    Image models take (images, labels) batches and classify into `num_classes`; table models
    take (dict of features, label) batches and regress the label, so any label values work.
    """
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


def num_classes_for(class_names: tuple[str, ...], label_offset: int) -> int:
    """Classes an image model needs so every label (offset included) is a valid index."""
    return max(1000, len(class_names) + label_offset)


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
    from tfpipe._tf import tf

    device = device or discover_device()
    real = pipeline.dataset()
    batch = next(iter(real.take(1)))
    with device.strategy.scope():
        model = build_model(name, real.element_spec, num_classes)
    return ModelOnDevice(model, device, real, tf().data.Dataset.from_tensors(batch).repeat())

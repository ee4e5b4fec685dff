"""The consumer: how fast the accelerator takes examples, from one of three sources.

1. `--step-time-ms`: measured by the user (e.g. from a TPU profile) for the global batch.
2. `--model`: a Keras model's train step timed on the best local device (TPU, then GPU, then
   CPU) with its input already on the device.
3. `--accelerator` or the preset's default: a published throughput from the reference table.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from typing import Any, Literal

from tfpipe.bench import reference
from tfpipe.bench.config import IMAGE_MODELS, TABLE_MODELS, BenchConfig
from tfpipe.bench.report import Consumer
from tfpipe.errors import ConfigError


def from_step_time(step_time_ms: float, global_batch: int, per_host: int) -> Consumer:
    """The user's step time for the global batch, of which each host supplies `per_host`."""
    return Consumer(
        examples_per_sec=per_host / (step_time_ms / 1000.0),
        step_time_ms=step_time_ms,
        source="step_time",
        description=f"user-supplied step time {step_time_ms:g} ms for a global batch of {global_batch}",
    )


def from_reference(row: reference.ReferenceRow, per_host_batch: int) -> Consumer:
    """A published throughput, taken as one host's consumer rate."""
    return Consumer(
        examples_per_sec=float(row.examples_per_sec),
        step_time_ms=per_host_batch / row.examples_per_sec * 1000.0,
        source="reference",
        description=f"{row.model} on {row.accelerator} ({row.precision}, {row.framework}); "
        f"source: {row.source}, {row.derivation}",
        url=row.url,
        approximate=True,
    )


@dataclasses.dataclass(frozen=True)
class Device:
    """The device a model trains on, and the strategy that places it there."""

    kind: Literal["TPU", "GPU", "CPU"]
    name: str
    strategy: Any


def _tpu_expected() -> bool:
    # TPUClusterResolver may wait on the GCE metadata server when there is no TPU, so only try
    # when something says a TPU is there: a TPU VM's device files or the usual variables.
    return bool(
        os.environ.get("TPU_NAME")
        or os.environ.get("COLAB_TPU_ADDR")
        or os.path.exists("/dev/accel0")
        or os.path.exists("/dev/vfio/0")
    )


def discover_device() -> Device:
    """The best local device: a TPU (connected as tensorflow/tpu's scripts do), else GPUs, else
    the CPU."""
    from tfpipe._tf import tf

    tf_ = tf()
    if _tpu_expected():
        try:
            resolver = tf_.distribute.cluster_resolver.TPUClusterResolver(
                tpu=os.environ.get("TPU_NAME", "local")
            )
            tf_.config.experimental_connect_to_cluster(resolver)
            tf_.tpu.experimental.initialize_tpu_system(resolver)
            strategy = tf_.distribute.TPUStrategy(resolver)
            return Device("TPU", f"TPU ({strategy.num_replicas_in_sync} cores)", strategy)
        except Exception:
            pass
    gpus = tf_.config.list_physical_devices("GPU")
    if gpus:
        if len(gpus) > 1:
            return Device("GPU", f"{len(gpus)} GPUs", tf_.distribute.MirroredStrategy())
        return Device("GPU", gpus[0].name, tf_.distribute.OneDeviceStrategy("/gpu:0"))
    return Device("CPU", "CPU", tf_.distribute.get_strategy())


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
    name: str, pipeline: Any, *, num_classes: int, device: Device | None = None
) -> ModelOnDevice:
    """Builds `name` for `pipeline`'s batches on `device` (the best local one when None)."""
    from tfpipe._tf import tf

    device = device or discover_device()
    real = pipeline.dataset()
    batch = next(iter(real.take(1)))
    with device.strategy.scope():
        model = build_model(name, real.element_spec, num_classes)
    return ModelOnDevice(model, device, real, tf().data.Dataset.from_tensors(batch).repeat())


def from_model(
    name: str, pipeline: Any, *, num_classes: int, seconds: float, device: Device | None = None
) -> tuple[Consumer, Device]:
    """Times `name`'s train step on the best local device, with one real batch already there.

    The batch is taken from the pipeline once and repeated from memory, so only the model's
    step is timed, not the input pipeline.
    """
    setup = model_on_device(name, pipeline, num_classes=num_classes, device=device)
    step, steps = fit_step_seconds(setup.model, setup.synthetic, seconds=seconds)
    per_host = pipeline.batch_size
    consumer = Consumer(
        examples_per_sec=per_host / step,
        step_time_ms=step * 1000.0,
        source="model",
        description=f"{name} train step on {setup.device.name}, batch {per_host}, input on device "
        f"(model.fit, mean of {steps} steps after warm-up)",
        device=setup.device.name,
    )
    return consumer, setup.device


def resolve(config: BenchConfig, pipeline: Any, *, num_classes: int) -> tuple[Consumer, Device | None]:
    """The consumer the config asks for; the preset's reference row when it asks for none."""
    if config.step_time_ms is not None:
        return from_step_time(config.step_time_ms, config.global_batch, config.host_batch), None
    if config.model is not None:
        return from_model(config.model, pipeline, num_classes=num_classes, seconds=config.seconds)
    row = (
        reference.lookup(config.accelerator) if config.accelerator else reference.default_for(config.pipeline)
    )
    return from_reference(row, config.host_batch), None

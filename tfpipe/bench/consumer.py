"""The consumer: how fast the accelerator takes examples, from one of four sources.

1. `--from-profile`: the user's profiled training run, as the TensorFlow Profiler measured it:
   the global batch per (step time - input wait), the accelerator's rate when it is fed.
2. `--step-time-ms`: measured by the user for the global batch.
3. `--model`: a Keras model's train step timed on the best local device (TPU, then GPU, then
   CPU) with its input already on the device.
4. `--accelerator` or the preset's default: a published throughput from the reference table.
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from typing import Any, Literal

from tfpipe import devices
from tfpipe.bench import reference
from tfpipe.bench.config import IMAGE_MODELS, TABLE_MODELS, BenchConfig, check_consumer_rate
from tfpipe.bench.fmt import percent
from tfpipe.bench.profiles import Profile, ProfileError
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
    cores: int = 1


def discover_device() -> Device:
    """The best local device, as `tfpipe.strategy()` chooses it: a TPU, else the GPUs, else the
    CPU. A TPU is looked for only where a TPU VM's device files or variables say one is."""
    choice = devices.choose()
    return Device(choice.kind, choice.name, choice.strategy, choice.replicas)


def config_for_profile(cfg: BenchConfig, profile: Profile) -> BenchConfig:
    """`cfg` with the profiled run's global batch, checked against the profile.

    Raises:
      ConfigError: no batch size anywhere, a batch that contradicts the profile's, fewer
        `hosts` than the profile holds, or a consumer rate beyond any host.
      ProfileError: the profile holds no compute time (see `from_profile`).
    """
    recorded = profile.batch_size
    if cfg.batch_size is None and recorded is None:
        raise ConfigError(
            f"--from-profile needs the profiled run's global batch (--batch-size): the profile "
            f"{profile.path!r} does not record it (only older TPU profiles do). Pass the global "
            "batch the profiled run trained with. Received: batch_size=None"
        )
    if cfg.batch_size is not None and recorded is not None and cfg.batch_size != recorded:
        raise ConfigError(
            f"batch_size={cfg.batch_size} (--batch-size), but the profile {profile.path!r} records a "
            f"global batch of {recorded}. The step time belongs to that batch: leave --batch-size "
            "out, or pass the batch the profiled run trained with"
        )
    if profile.host_count > cfg.hosts:
        names = ", ".join(h.host for h in profile.hosts)
        raise ConfigError(
            f"the profile {profile.path!r} holds {profile.host_count} hosts ({names}), but hosts="
            f"{cfg.hosts} (--hosts). Expected --hosts {profile.host_count}, or more when not every "
            "host of the run was profiled"
        )
    checked = dataclasses.replace(cfg, batch_size=cfg.batch_size or recorded)
    from_profile(profile, checked.global_batch, checked.hosts, checked.pipeline)  # refuses now, not later
    return checked


def from_profile(profile: Profile, global_batch: int, hosts: int, pipeline: str) -> Consumer:
    """The accelerator's rate when it is fed: the global batch per (step time - input wait), of
    which each host supplies global_batch / hosts.

    Raises:
      ProfileError: the run waited for input the whole step, so the profile holds no compute
        time to take.
      ConfigError: the rate is beyond any accelerator host (a wrong --batch-size).
    """
    fed = profile.fed_step_time_ms
    if not fed > 0.0:
        raise ProfileError(
            f"The profiled run waited for input {percent(profile.input_wait)} of each step, so the "
            f"profile {profile.path!r} holds no time the accelerator spent computing: it cannot say "
            "how fast the accelerator takes input. Use --step-time-ms or --model"
        )
    check_consumer_rate(
        fed,
        global_batch,
        hosts,
        pipeline,
        what=f"the profiled step without its input wait ({fed:.3g} ms, --from-profile)",
        received=f"batch_size={global_batch}, from_profile={profile.path!r}",
    )
    host_batch = global_batch // hosts
    cores = f", {profile.cores} cores" if profile.cores else ""
    return Consumer(
        examples_per_sec=host_batch / (fed / 1000.0),
        step_time_ms=fed,
        source="profile",
        description=f"your profiled run on {profile.device}{cores}: {profile.steps} steps of "
        f"{profile.step_time_ms:,.1f} ms, {percent(profile.input_wait)} of it waiting for input, so "
        f"{fed:,.1f} ms per step when fed, for a global batch of {global_batch}",
        device=profile.device,
    )


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
    per_host = pipeline.batch_size
    note = devices.tpu_batch_note(per_host, setup.device.cores) if setup.device.kind == "TPU" else None
    if note:
        warnings.warn(f"--model {name}: {note}", devices.TpuBatchWarning, stacklevel=2)
    step, steps = fit_step_seconds(setup.model, setup.synthetic, seconds=seconds)
    consumer = Consumer(
        examples_per_sec=per_host / step,
        step_time_ms=step * 1000.0,
        source="model",
        description=f"{name} train step on {setup.device.name}, batch {per_host}, input on device "
        f"(model.fit, mean of {steps} steps after warm-up)" + (f"; {note}" if note else ""),
        device=setup.device.name,
    )
    return consumer, setup.device


def resolve(
    config: BenchConfig, pipeline: Any, *, num_classes: int, profile: Profile | None = None
) -> tuple[Consumer, Device | None]:
    """The consumer the config asks for; the preset's reference row when it asks for none.

    `profile` is `config.from_profile` already read (bench reads it before timing anything).
    """
    if profile is not None:
        return from_profile(profile, config.global_batch, config.hosts, config.pipeline), None
    if config.step_time_ms is not None:
        return from_step_time(config.step_time_ms, config.global_batch, config.host_batch), None
    if config.model is not None:
        return from_model(config.model, pipeline, num_classes=num_classes, seconds=config.seconds)
    row = (
        reference.lookup(config.accelerator) if config.accelerator else reference.default_for(config.pipeline)
    )
    return from_reference(row, config.host_batch), None

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
import warnings
from typing import TYPE_CHECKING

from tfpipe import devices
from tfpipe.bench import reference
from tfpipe.bench.config import BenchConfig, check_consumer_rate
from tfpipe.bench.fmt import percent
from tfpipe.bench.measure.models import Device, fit_step_seconds, model_on_device
from tfpipe.bench.profiles import Profile, ProfileError
from tfpipe.bench.results import Consumer
from tfpipe.errors import ConfigError, TpuBatchWarning
from tfpipe.plural import counted

if TYPE_CHECKING:
    from tfpipe.pipeline import Pipeline


def from_step_time(
    step_time_ms: float, global_batch: int, per_host: int, sequence_length: int | None = None
) -> Consumer:
    """The user's step time for the global batch, of which each host supplies `per_host`
    (text: sequences of `sequence_length` tokens)."""
    unit = f" sequences of {sequence_length:,} tokens" if sequence_length else ""
    return Consumer(
        examples_per_sec=per_host / (step_time_ms / 1000.0),
        step_time_ms=step_time_ms,
        source="step_time",
        description=f"user-supplied step time {step_time_ms:g} ms for a global batch of {global_batch}{unit}",
    )


def from_reference(
    row: reference.ReferenceRow,
    per_host_batch: int,
    *,
    sequence_length: int | None = None,
    packing: str | None = None,
) -> Consumer:
    """A published throughput, taken as one host's consumer rate.

    A text row's slot tokens per second are taken as they are at the pipeline's
    `sequence_length`: sequences/s = slot tokens/s / L. Where the row trained another L or
    packing, the description says so.
    """
    if row.tokens_per_sec is not None and sequence_length is not None:
        return _from_text_row(row, per_host_batch, sequence_length, packing)
    return Consumer(
        examples_per_sec=float(row.examples_per_sec),
        step_time_ms=per_host_batch / row.examples_per_sec * 1000.0,
        source="reference",
        description=f"{row.model} on {row.accelerator} ({row.precision}, {row.framework}); "
        f"source: {row.source}, {row.derivation}",
        url=row.url,
        approximate=True,
    )


def _from_text_row(row: reference.ReferenceRow, per_host_batch: int, L: int, packing: str | None) -> Consumer:
    """A text row's slot tokens/s as sequences/s of the pipeline's L, its shape said when it is
    not the pipeline's."""
    tokens = float(row.tokens_per_sec or 0.0)
    rate = tokens / L
    shape = f"trained at {row.shape}"
    if row.sequence_length != L:
        shape += (
            f"; at your L={L:,} its slot tokens/s are taken as they are (attention's cost per token "
            "grows with L, so this is approximate)"
        )
    elif packing is not None and packing != {"packed": "first_fit"}.get(row.packing or "", row.packing):
        shape += f"; with your packing={packing} the accelerator computes on every slot all the same"
    return Consumer(
        examples_per_sec=rate,
        step_time_ms=per_host_batch / rate * 1000.0,
        source="reference",
        description=f"{row.model} on {row.accelerator} ({row.precision}, {row.framework}): "
        f"{tokens:,.0f} slot tokens/s per host, {shape}: {rate:,.2f} sequences/s of {L:,} tokens. "
        f"Source: {row.source}, {row.derivation}",
        url=row.url,
        approximate=True,
    )


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
    # Refuses now, not after the timing.
    from_profile(
        profile, checked.global_batch, checked.hosts, checked.modality.preset.name, checked.rows_length
    )
    return checked


def from_profile(
    profile: Profile, global_batch: int, hosts: int, pipeline: str, sequence_length: int | None = None
) -> Consumer:
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
        sequence_length=sequence_length,
    )
    host_batch = global_batch // hosts
    cores = f", {counted(profile.cores, 'core')}" if profile.cores else ""
    unit = f"sequences of {sequence_length:,} tokens" if sequence_length else "examples"
    return Consumer(
        examples_per_sec=host_batch / (fed / 1000.0),
        step_time_ms=fed,
        source="profile",
        description=f"your profiled run on {profile.device}{cores}: {profile.steps} steps of "
        f"{profile.step_time_ms:,.1f} ms, {percent(profile.input_wait)} of it waiting for input, so "
        f"{fed:,.1f} ms per step when fed, for a global batch of {global_batch} {unit}",
        device=profile.device,
    )


def from_model(
    name: str, pipeline: Pipeline, *, num_classes: int, seconds: float, device: Device | None = None
) -> tuple[Consumer, Device]:
    """Times `name`'s train step on the best local device, with one real batch already there.

    The batch is taken from the pipeline once and repeated from memory, so only the model's
    step is timed, not the input pipeline.
    """
    setup = model_on_device(name, pipeline, num_classes=num_classes, device=device)
    per_host = pipeline.batch_size
    note = devices.tpu_batch_note(per_host, setup.device.cores) if setup.device.kind == "TPU" else None
    if note:
        warnings.warn(f"--model {name}: {note}", TpuBatchWarning, stacklevel=2)
    with setup.device.fit_scope():
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
    config: BenchConfig, pipeline: Pipeline, *, num_classes: int, profile: Profile | None = None
) -> tuple[Consumer, Device | None]:
    """The consumer the config asks for; the preset's reference row when it asks for none.

    `profile` is `config.from_profile` already read (bench reads it before timing anything).
    """
    L = config.rows_length
    if profile is not None:
        return from_profile(profile, config.global_batch, config.hosts, config.modality.preset.name, L), None
    if config.step_time_ms is not None:
        return from_step_time(config.step_time_ms, config.global_batch, config.host_batch, L), None
    if config.model is not None:
        return from_model(config.model, pipeline, num_classes=num_classes, seconds=config.seconds)
    row = (
        reference.lookup(config.accelerator)
        if config.accelerator
        else reference.default_for(config.modality.preset.name)
    )
    shape = config.modality.bench.reference_shape(pipeline)  # text: its packing mode
    return from_reference(row, config.host_batch, sequence_length=L, packing=shape.get("packing")), None

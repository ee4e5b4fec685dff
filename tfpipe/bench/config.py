"""BenchConfig: every option of `tfpipe bench`, validated when it is made."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from tfpipe.bench import reference
from tfpipe.errors import ConfigError, field_error
from tfpipe.modalities import modalities, modality_of_layout, modality_of_preset, preset_names
from tfpipe.packing.spec import MAX_SEQUENCE_LENGTH, MODES, Mode
from tfpipe.pipeline.config import check_cache
from tfpipe.pipeline.mixture.spec import check_weights
from tfpipe.pipeline.read.resolve import data_path
from tfpipe.validation import (
    Check,
    check_batch_size,
    check_bool,
    check_choice,
    check_fields,
    check_int,
    check_number,
    check_path,
    check_seconds,
    check_str,
)

if TYPE_CHECKING:
    from tfpipe.format.manifest import Manifest
    from tfpipe.modalities.modality import Modality

# What bench plans without data, or for data whose manifest says nothing (TFRecord files): the
# ImageNet benchmark, the one the reference table's default rows were published for.
DEFAULT_PIPELINE = "imagenet"

# The consumer's sources a config may name, at most one; with none, the preset's reference row.
CONSUMERS = ("step_time_ms", "model", "accelerator", "from_profile")

# No training step is shorter: launching one accelerator kernel alone takes ~5-10 us.
MIN_STEP_TIME_MS = 0.01


def pipelines() -> list[str]:
    """The pipelines bench plans: each registered modality's preset (imagenet, tabular, text)."""
    return preset_names()


def models() -> tuple[str, ...]:
    """The Keras models `--model` builds (each modality's, `BenchHalf.models`)."""
    return tuple(name for m in modalities() for name in m.bench.models)


@dataclasses.dataclass(frozen=True, slots=True)
class BenchConfig:
    """What to benchmark and against which consumer.

    Args:
      pipeline: a modality's preset: "imagenet", "tabular" or "text" (or a registered
        modality's). None picks the modality an option of its own names (sequence_length,
        packing, truncate: text), else the one `data`'s manifest calls for, as build() picks its
        preset: tabular for a table, text for a tokenized corpus, else imagenet.
      data: a tfpipe dataset (local or gs://); None generates a synthetic one once and reuses it
        (for text: the standard library's docstrings, tokenized by a tokenizer trained on them).
        A mapping of at least two names to text datasets is a weighted mixture, planned as
        `build()` plans one; the report gives each source's share of real tokens.
      weights: a mixture's weight of each source by name, as `build()` takes them (in tokens);
        None weighs each source by its size, as build() does. Only with a mapping `data`.
      batch_size: the global batch; each of `hosts` hosts produces batch_size / hosts.
        None uses 128 for imagenet, 1024 for tabular and 64 sequences for text; with
        `from_profile`, the profiled run's batch when the profile records it (else it must be
        given). For text, a batch counts sequences (rows of `sequence_length` tokens).
      sequence_length: text only: L, the tokens in a row. None uses 512.
      packing: text only: "first_fit", "none" or "concat", as build() takes it. None uses the
        preset's default (first_fit; none for a classifier's one document a row).
      truncate: text only: keep only each document's first L tokens, as build() takes it
        (a classifier needs it when documents are longer than its row).
      step_time_ms: the consumer's measured step time for the global batch, in milliseconds.
      model: a Keras model to time a train step of on the best local device.
      accelerator: a row of the reference table (see `tfpipe.bench.reference.names()`), taken
        as each host's consumer rate.
      from_profile: a TensorFlow Profiler profile of the real training run (a TensorBoard log
        dir, a plugins/profile/<run> folder or one file; local or gs://): the consumer is the
        global batch per (step time - input wait), as the Profiler measured them. With none of
        the four consumers, the preset's reference row is used.
      profile_run: the run folder of `from_profile` to read; None reads the newest.
      seconds: the steady-state window timed for each measurement.
      warmup_seconds: time run before each window and excluded; None scales with `seconds`.
      simulate: also run the pipeline against a sleeping consumer and measure the input wait.
      fit: also run `model.fit` of `model` on the real pipeline and on synthetic input.
      profile: directory for a TensorFlow profiler trace of the full pipeline's window.
      compare: also bench the baseline pipeline (tensorflow/tpu-style, `tfpipe.modalities.images.bench.recipe`)
        on the same data and report the ratio.
      hosts: hosts training together; the producer measured here is one host's.
      workdir: where the synthetic dataset is cached; None uses the user cache directory.
      max_cores: the most cores in the scaling curve; None uses the cores this process may use.
      worker_cores: cores of one tf.data service worker for the workers estimate; None uses
        `max_cores`.
      split: the split of `data` to read; None reads "train". Only for tfpipe datasets.
      synthetic_examples: size of the generated dataset; None uses the preset's default.
      cache: the pipeline's cache, as training will set it: "auto" (build()'s default: memory
        when the whole split fits the RAM budget), "memory", "none" or "disk:<path>". A sample
        that fits in memory is cached after its first epoch while the real dataset may not be;
        pass "none" to time the reading of every epoch. The storage figures are measured
        uncached either way.
    """

    pipeline: str | None = None
    data: str | Mapping[str, str] | None = None
    weights: Mapping[str, float] | None = None
    batch_size: int | None = None
    sequence_length: int | None = None
    packing: Mode | None = None
    truncate: bool = False
    step_time_ms: float | None = None
    model: str | None = None
    accelerator: str | None = None
    from_profile: str | None = None
    profile_run: str | None = None
    seconds: float = 3.0
    warmup_seconds: float | None = None
    simulate: bool = False
    fit: bool = False
    profile: str | None = None
    compare: bool = False
    hosts: int = 1
    workdir: str | None = None
    max_cores: int | None = None
    worker_cores: int | None = None
    split: str | None = None
    synthetic_examples: int | None = None
    cache: str = "auto"

    def __post_init__(self) -> None:
        object.__setattr__(self, "data", _data(self.data))
        object.__setattr__(self, "weights", _weights(self.data, self.weights))
        if self.pipeline is None:  # an option of a modality's own names it (text: sequence_length)
            shaped = [
                m for m in modalities() if any(getattr(self, n) not in (None, False) for n in m.bench.options)
            ]
            first = next(iter(self.data.values())) if isinstance(self.data, Mapping) else self.data
            object.__setattr__(self, "pipeline", shaped[0].preset.name if shaped else pipeline_for(first))
        check_fields(self, _FIELDS)
        for check in _RELATIONS:
            check(self)

    def _check_consumer_rate(self) -> None:
        """Refuses a step time that implies more examples/s than any host takes in."""
        assert self.step_time_ms is not None
        check_consumer_rate(
            self.step_time_ms,
            self.global_batch,
            self.hosts,
            self.modality.preset.name,
            what=f"step_time_ms={self.step_time_ms:g} (--step-time-ms)",
            received=f"step_time_ms={self.step_time_ms!r}",
            sequence_length=self.rows_length,
        )

    @property
    def mixture(self) -> bool:
        """Whether `data` names a weighted mixture of datasets."""
        return isinstance(self.data, Mapping)

    @property
    def modality(self) -> Modality:
        """The modality whose preset `pipeline` names: bench asks it what to measure and say."""
        return modality_of_preset(str(self.pipeline))

    @property
    def global_batch(self) -> int:
        default = self.modality.bench.default_batch
        return self.batch_size if self.batch_size is not None else default * self.hosts

    @property
    def rows_length(self) -> int | None:
        """The tokens of a row (text: the sequence length L, 512 when not given); else None."""
        return self.modality.bench.row_length(self)

    @property
    def host_batch(self) -> int:
        return self.global_batch // self.hosts

    @property
    def warmup(self) -> float:
        """Seconds run and discarded before each timed window."""
        if self.warmup_seconds is not None:
            return float(self.warmup_seconds)
        # Measured on the default synthetic imagenet data (1 s bins over 9 s, 2 runs): the rate
        # is flat from the second after the first batch, so half the window, at least 1 s.
        return max(1.0, 0.5 * self.seconds)


def _data(value: object) -> str | dict[str, str] | None:
    """One dataset's path, or a mixture's names to paths (at least two, as build() takes them)."""
    if not isinstance(value, Mapping):
        return check_path("data", value, optional=True)
    names = list(value)
    if len(names) < 2 or not all(isinstance(n, str) and n for n in names):
        raise ConfigError(
            "data as a mapping is a mixture: at least two names (non-empty strings) to datasets, "
            f"e.g. {{'web': PATH, 'code': PATH}} (--data web=PATH --data code=PATH). Received: {names!r}"
        )
    return {n: str(check_path(f"data[{n!r}]", value[n])) for n in names}


def _weights(data: object, value: object) -> dict[str, float] | None:
    """A mixture's weights by name, checked as build() checks them; refused for one dataset."""
    if value is None:
        return None
    if not isinstance(data, Mapping):
        raise ConfigError(
            "weights weigh the sources of a mixture: name each source, data={'web': PATH, "
            "'code': PATH} (--data web=PATH --data code=PATH). Received: weights="
            f"{value!r} with data={data!r}"
        )
    return check_weights(list(data), value)


def _cache(name: str, value: object) -> str:
    return check_cache(value, name)


def _step_time(name: str, value: object) -> object:
    if value is not None:
        check_step_time_ms(value)
        if isinstance(value, str):  # a field takes one type; the command line parses its text
            raise field_error(ConfigError, name, "a number of milliseconds, not text", value)
    return value  # as given: the report says the step time the user gave


def _warmup(name: str, value: object) -> object:
    if value is not None:
        check_number(name, value, "a number of seconds >= 0", lambda v: v >= 0)
    return value


def _sequence_length(name: str, value: object) -> object:
    return check_int(name, value, 2, MAX_SEQUENCE_LENGTH, optional=True)


def _packing(name: str, value: object) -> object:
    if value is not None and value not in MODES:
        raise field_error(ConfigError, name, f"None or one of {MODES}", value)
    return value


_optional_name = functools.partial(check_str, optional=True, what="None or a non-empty path or name")
_optional_count = functools.partial(check_int, low=1, optional=True)


def _pipeline(name: str, value: object) -> object:
    return check_choice(name, value, tuple(pipelines()))


# Each field's own check, in order (`pipeline` is defaulted from `data` first).
_FIELDS: dict[str, Check] = {
    "pipeline": _pipeline,
    "batch_size": functools.partial(check_batch_size, optional=True),
    "sequence_length": _sequence_length,
    "packing": _packing,
    "truncate": check_bool,
    "step_time_ms": _step_time,
    "model": functools.partial(check_str, optional=True),
    "accelerator": functools.partial(check_str, optional=True),
    "from_profile": _optional_name,
    "profile_run": _optional_name,
    "seconds": functools.partial(check_seconds, expected="a positive number of seconds"),
    "warmup_seconds": _warmup,
    "simulate": check_bool,
    "fit": check_bool,
    "profile": functools.partial(check_path, optional=True),
    "compare": check_bool,
    "hosts": functools.partial(check_int, low=1, what="an integer >= 1"),
    "workdir": functools.partial(check_path, optional=True),
    "max_cores": _optional_count,
    "worker_cores": _optional_count,
    "split": functools.partial(check_str, optional=True, what="None or a split name such as 'train'"),
    "synthetic_examples": _optional_count,
    "cache": _cache,
}


def _batch_per_host(cfg: BenchConfig) -> None:
    # The one home of the per-host batch rule: every host gets the same batch.
    if cfg.batch_size is not None and cfg.batch_size % cfg.hosts:
        raise ConfigError(
            "batch_size must be a multiple of hosts, so each host gets the same batch. "
            f"Received: batch_size={cfg.batch_size}, hosts={cfg.hosts}"
        )


def _one_consumer(cfg: BenchConfig) -> None:
    if cfg.step_time_ms is not None:
        cfg._check_consumer_rate()
    given = [n for n in CONSUMERS if getattr(cfg, n) is not None]
    if len(given) > 1:
        raise ConfigError(
            "Give at most one consumer: step_time_ms, model, accelerator or from_profile. "
            f"Received: {', '.join(f'{n}={getattr(cfg, n)!r}' for n in given)}"
        )
    if cfg.profile_run is not None and cfg.from_profile is None:
        raise ConfigError(
            "profile_run (--profile-run) picks a run of from_profile (--from-profile), which is "
            f"not given. Received: profile_run={cfg.profile_run!r}, from_profile=None"
        )


def _options_of_the_pipeline(cfg: BenchConfig) -> None:
    """An option of a modality's own (`BenchHalf.options`: text's sequence_length, packing and
    truncate shape its rows) is given for its pipeline only."""
    for m in modalities():
        if m is cfg.modality:
            continue
        for name in m.bench.options:
            if getattr(cfg, name) not in (None, False):
                raise ConfigError(
                    f"{name} shapes the rows of the {m.preset.name} pipeline; pipeline={cfg.pipeline!r} has "
                    f"none. Received: {name}={getattr(cfg, name)!r}"
                )


def _model_fits_pipeline(cfg: BenchConfig) -> None:
    if cfg.model is not None:
        allowed = cfg.modality.bench.models
        if cfg.model not in allowed:
            raise field_error(
                ConfigError, "model", f"one of {allowed} for pipeline={cfg.pipeline!r}", cfg.model
            )
    if cfg.fit and cfg.model is None:
        raise ConfigError("fit needs a model to train: pass model (--model). Received: model=None")


def _accelerator_fits_pipeline(cfg: BenchConfig) -> None:
    if cfg.accelerator is None:
        return
    row = reference.lookup(cfg.accelerator)
    rows = [r.name for r in reference.rows() if r.preset == cfg.pipeline]
    if row.preset != cfg.pipeline:
        raise ConfigError(
            f"accelerator {row.name!r} is a {row.preset} reference; for pipeline={cfg.pipeline!r} "
            f"use one of {rows}"
        )


def _mixture_is_measured(cfg: BenchConfig) -> None:
    """bench measures a mixture's shares of a modality that says how (`BenchHalf.mixes`: text's,
    in real tokens)."""
    if cfg.mixture and not cfg.modality.bench.mixes:
        mixes = " or ".join(f"pipeline={m.preset.name!r}" for m in modalities() if m.bench.mixes)
        raise ConfigError(
            "bench measures a mixture's share of real tokens by source, so a mixture needs "
            f"{mixes} (tokenized corpora). Received: pipeline={cfg.pipeline!r}, data "
            f"naming {list(cfg.data)}"  # type: ignore[arg-type]
        )


def _compare_has_a_baseline(cfg: BenchConfig) -> None:
    """--compare times the modality's baseline pipeline (`BenchHalf.baseline`: images' is the
    tensorflow/tpu-style ImageNet pipeline)."""
    if cfg.compare and cfg.modality.bench.baseline is None:
        having = " or ".join(f"pipeline={m.preset.name!r}" for m in modalities() if m.bench.baseline)
        raise ConfigError(
            "compare benches the baseline ImageNet pipeline (tensorflow/tpu-style), so it needs "
            f"{having}. "
            f"Received: pipeline={cfg.pipeline!r}"
        )


# The checks between fields, after each field's own.
_RELATIONS: tuple[Callable[[BenchConfig], None], ...] = (
    _options_of_the_pipeline,
    _batch_per_host,
    _one_consumer,
    _model_fits_pipeline,
    _accelerator_fits_pipeline,
    _compare_has_a_baseline,
    _mixture_is_measured,
)


def check_consumer_rate(
    step_time_ms: float,
    global_batch: int,
    hosts: int,
    pipeline: str,
    *,
    what: str,
    received: str,
    sequence_length: int | None = None,
) -> None:
    """Refuses a step time that implies more examples/s per host than any host takes in, in the
    modality's unit (`BenchHalf.max_consumer_rate`; text: slot tokens, sequences of
    `sequence_length`)."""
    half = modality_of_preset(pipeline).bench
    rate = global_batch // hosts / (step_time_ms / 1000.0) * half.slots(sequence_length)
    cap, unit = half.max_consumer_rate, half.rate_unit
    if rate > cap:
        raise ConfigError(
            f"{what} for a global batch of {global_batch} means {rate:.3g} {unit}/s per host, beyond "
            f"what any accelerator host takes in ({cap:.0e}/s for the {pipeline} pipeline). "
            f"Expected the milliseconds of one training step of the global batch. Received: {received}"
        )


def pipeline_for(data: object) -> str:
    """The pipeline a dataset's manifest calls for, as `build()` picks its preset: its modality's
    (tabular for a table, text for a tokenized corpus); DEFAULT_PIPELINE without a manifest, or
    without data."""
    return pipeline_of(data_path(data).manifest if isinstance(data, str) and data else None)


def pipeline_of(manifest: Manifest | None) -> str:
    """The pipeline for a manifest: its layout's modality's preset (DEFAULT_PIPELINE without)."""
    return modality_of_layout(manifest.layout).preset.name if manifest is not None else DEFAULT_PIPELINE


def check_step_time_ms(value: object) -> float:
    """Returns `value` as a float if it is a finite step time of at least MIN_STEP_TIME_MS."""
    expected = f"a number of milliseconds >= {MIN_STEP_TIME_MS:g} (one training step)"
    try:
        ms = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise field_error(ConfigError, "step_time_ms", expected, value) from None
    if isinstance(value, bool) or not math.isfinite(ms) or ms < MIN_STEP_TIME_MS:
        raise field_error(ConfigError, "step_time_ms", expected, value)
    return ms

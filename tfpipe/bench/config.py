"""BenchConfig: every option of `tfpipe bench`, validated when it is made."""

from __future__ import annotations

import dataclasses
import math
from typing import Literal, get_args

from tfpipe.errors import ConfigError, field_error
from tfpipe.validation import check_int

PipelineName = Literal["imagenet", "tabular", "text"]
PIPELINES: tuple[str, ...] = get_args(PipelineName)
Packing = Literal["first_fit", "none", "concat"]
PACKINGS: tuple[str, ...] = get_args(Packing)

# Keras models `--model` builds with random weights (nothing is downloaded).
IMAGE_MODELS = ("resnet50", "mobilenet_v2", "efficientnet_b0", "small_cnn")
TABLE_MODELS = ("mlp", "small_mlp")
TEXT_MODELS = ("small_transformer",)
MODELS = IMAGE_MODELS + TABLE_MODELS + TEXT_MODELS
MODELS_OF = {"imagenet": IMAGE_MODELS, "tabular": TABLE_MODELS, "text": TEXT_MODELS}

# The consumer's sources a config may name, at most one; with none, the preset's reference row.
CONSUMERS = ("step_time_ms", "model", "accelerator", "from_profile")

# Per-host batch when none is given: a common per-accelerator batch for each kind of model
# (for text, sequences: a multiple of 8, a TPU core's rows per tile).
DEFAULT_BATCH = {"imagenet": 128, "tabular": 1024, "text": 64}
# Tokens in a text row when none is given: BERT-large's, as the default reference row trained.
DEFAULT_SEQUENCE_LENGTH = 512

# No training step is shorter: launching one accelerator kernel alone takes ~5-10 us.
MIN_STEP_TIME_MS = 0.01
# The most examples/s one host's accelerators can take in, far above anything published (the
# fastest reference row is 13,800 images/s per TPU v4 host): a million 224x224x3 uint8 images
# or a billion table rows a second are each ~150 GB/s, beyond a host's memory bandwidth. Text
# counts slot tokens (sequences x sequence length): a billion a second is 3,000x the fastest
# text row (297,114 per TPU v4 host).
MAX_CONSUMER_EPS = {"imagenet": 1e6, "tabular": 1e9}
MAX_CONSUMER_TOKENS = 1e9


@dataclasses.dataclass(frozen=True, slots=True)
class BenchConfig:
    """What to benchmark and against which consumer.

    Args:
      pipeline: the preset, "imagenet", "tabular" or "text". None picks the one `data`'s
        manifest calls for, as build() picks its preset: tabular for a table, text for a
        tokenized corpus, else imagenet.
      data: a tfpipe dataset (local or gs://); None generates a synthetic one once and reuses it
        (for text: the standard library's docstrings, tokenized by a tokenizer trained on them).
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
      compare: also bench the baseline pipeline (tensorflow/tpu-style, `tfpipe.bench.recipe`)
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

    pipeline: PipelineName | None = None
    data: str | None = None
    batch_size: int | None = None
    sequence_length: int | None = None
    packing: Packing | None = None
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
        from tfpipe.pipeline.config import check_cache

        check_cache(self.cache)
        if self.pipeline is None:
            object.__setattr__(self, "pipeline", pipeline_for(self.data))
        if self.pipeline not in PIPELINES:
            raise field_error(ConfigError, "pipeline", f"one of {PIPELINES}", self.pipeline)
        check_int("hosts", self.hosts, 1, what="an integer >= 1")
        self._check_text()
        if self.batch_size is not None:
            check_int("batch_size", self.batch_size, 1)
            # The one home of the per-host batch rule: every host gets the same batch.
            if self.batch_size % self.hosts:
                raise ConfigError(
                    "batch_size must be a multiple of hosts, so each host gets the same batch. "
                    f"Received: batch_size={self.batch_size}, hosts={self.hosts}"
                )
        if self.step_time_ms is not None:
            check_step_time_ms(self.step_time_ms)
            self._check_consumer_rate()
        given = [n for n in CONSUMERS if getattr(self, n) is not None]
        if len(given) > 1:
            raise ConfigError(
                "Give at most one consumer: step_time_ms, model, accelerator or from_profile. "
                f"Received: {', '.join(f'{n}={getattr(self, n)!r}' for n in given)}"
            )
        for name in ("from_profile", "profile_run"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise field_error(ConfigError, name, "None or a non-empty path or name", value)
        if self.profile_run is not None and self.from_profile is None:
            raise ConfigError(
                "profile_run (--profile-run) picks a run of from_profile (--from-profile), which is "
                f"not given. Received: profile_run={self.profile_run!r}, from_profile=None"
            )
        if self.model is not None:
            allowed = MODELS_OF[self.pipeline]
            if self.model not in allowed:
                raise field_error(
                    ConfigError, "model", f"one of {allowed} for pipeline={self.pipeline!r}", self.model
                )
        if self.accelerator is not None:
            from tfpipe.bench import reference

            row = reference.lookup(self.accelerator)
            if row.preset != self.pipeline:
                raise ConfigError(
                    f"accelerator {row.name!r} is a {row.preset} reference; for pipeline="
                    f"{self.pipeline!r} use one of "
                    f"{[r.name for r in reference.rows() if r.preset == self.pipeline]}"
                )
        if self.fit and self.model is None:
            raise ConfigError("fit needs a model to train: pass model (--model). Received: model=None")
        if not (isinstance(self.seconds, (int, float)) and math.isfinite(self.seconds) and self.seconds > 0):
            raise field_error(ConfigError, "seconds", "a positive number of seconds", self.seconds)
        if self.warmup_seconds is not None and not (
            math.isfinite(self.warmup_seconds) and self.warmup_seconds >= 0
        ):
            raise field_error(ConfigError, "warmup_seconds", "a number of seconds >= 0", self.warmup_seconds)
        for name in ("max_cores", "worker_cores", "synthetic_examples"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), 1)
        if self.compare and self.pipeline != "imagenet":
            raise ConfigError(
                "compare benches the baseline ImageNet pipeline (tensorflow/tpu-style), so it needs "
                "pipeline='imagenet'. "
                f"Received: pipeline={self.pipeline!r}"
            )
        if self.split is not None and (not isinstance(self.split, str) or not self.split):
            raise field_error(ConfigError, "split", "None or a split name such as 'train'", self.split)

    def _check_text(self) -> None:
        """sequence_length and packing: given for text only, and valid."""
        if not isinstance(self.truncate, bool):
            raise field_error(ConfigError, "truncate", "True or False", self.truncate)
        if self.pipeline != "text":
            for name in ("sequence_length", "packing", "truncate"):
                if getattr(self, name) not in (None, False):
                    raise ConfigError(
                        f"{name} shapes the rows of the text pipeline; pipeline={self.pipeline!r} has "
                        f"none. Received: {name}={getattr(self, name)!r}"
                    )
            return
        if self.sequence_length is not None:
            from tfpipe.presets.text import MAX_SEQUENCE_LENGTH

            check_int("sequence_length", self.sequence_length, 2, MAX_SEQUENCE_LENGTH)
        if self.packing is not None and self.packing not in PACKINGS:
            raise field_error(ConfigError, "packing", f"None or one of {PACKINGS}", self.packing)

    def _check_consumer_rate(self) -> None:
        """Refuses a step time that implies more examples/s than any host takes in."""
        assert self.step_time_ms is not None
        check_consumer_rate(
            self.step_time_ms,
            self.global_batch,
            self.hosts,
            self.pipeline,
            what=f"step_time_ms={self.step_time_ms:g} (--step-time-ms)",
            received=f"step_time_ms={self.step_time_ms!r}",
            sequence_length=self.rows_length,
        )

    @property
    def global_batch(self) -> int:
        return self.batch_size if self.batch_size is not None else DEFAULT_BATCH[self.pipeline] * self.hosts

    @property
    def rows_length(self) -> int | None:
        """Text: the sequence length L of the rows (DEFAULT_SEQUENCE_LENGTH when not given);
        else None."""
        if self.pipeline != "text":
            return None
        return self.sequence_length or DEFAULT_SEQUENCE_LENGTH

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
    """Refuses a step time that implies more examples/s per host than any host takes in (for
    text, more slot tokens/s: sequences of `sequence_length`)."""
    rate = global_batch // hosts / (step_time_ms / 1000.0)
    if pipeline == "text":
        rate, cap, unit = (
            rate * (sequence_length or DEFAULT_SEQUENCE_LENGTH),
            MAX_CONSUMER_TOKENS,
            "slot tokens",
        )
    else:
        cap, unit = MAX_CONSUMER_EPS[pipeline], "examples"
    if rate > cap:
        raise ConfigError(
            f"{what} for a global batch of {global_batch} means {rate:.3g} {unit}/s per host, beyond "
            f"what any accelerator host takes in ({cap:.0e}/s for the {pipeline} pipeline). "
            f"Expected the milliseconds of one training step of the global batch. Received: {received}"
        )


def pipeline_for(data: object) -> PipelineName:
    """The pipeline a dataset's manifest calls for, as `build()` picks its preset: tabular for a
    table, text for a tokenized corpus, else imagenet (also without a manifest, or without data)."""
    from tfpipe.manifest import Manifest

    manifest = Manifest.find(data.rstrip("/")) if isinstance(data, str) and data else None
    layout = manifest.layout if manifest is not None else None
    return "tabular" if layout == "table" else "text" if layout == "text" else "imagenet"


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

"""What bench measures, as plain values: the types the measuring modules return and the
report holds.

They import nothing from bench, so the measuring modules (producer, consumer, reading,
simulate, data), the conclusion and the report all point down to them, never at each other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Literal

ConsumerSource = Literal["step_time", "model", "reference", "profile"]


@dataclasses.dataclass(frozen=True, slots=True)
class HostLoad:
    """What else ran on the cores this process may use while something was timed.

    A rate timed while a neighbour takes a core is the rate of this host under that load, not
    of a quiet one, and it moves as the neighbour does. Measured from the kernel's counters
    (/proc/stat) against the wall clock; see `tfpipe.bench.measure.host`.

    Attributes:
      cores: the cores this process may run on (its CPU affinity).
      others_cores: CPU seconds per wall second that everything but this process ran on those
        cores (other processes, and the kernel's own threads).
      steal_cores: CPU seconds per wall second the hypervisor gave to other virtual machines
        instead of this one (0 on bare metal).
      window_sec: the wall seconds measured.
    """

    cores: int
    others_cores: float
    steal_cores: float
    window_sec: float

    @property
    def taken_cores(self) -> float:
        """The cores' time this process could not have: other processes' and the hypervisor's."""
        return self.others_cores + self.steal_cores

    @classmethod
    def combined(cls, loads: Sequence[HostLoad | None]) -> HostLoad | None:
        """Several windows' loads as one, weighted by their seconds; None when none was
        measured."""
        known = [h for h in loads if h is not None and h.window_sec > 0]
        if not known:
            return None
        wall = sum(h.window_sec for h in known)
        return cls(
            max(h.cores for h in known),
            sum(h.others_cores * h.window_sec for h in known) / wall,
            sum(h.steal_cores * h.window_sec for h in known) / wall,
            wall,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class Rate:
    """A steady-state throughput measurement, with its CPU cost.

    CPU time is the process's own (user + system, every TensorFlow thread included) over the
    window. It barely moves when a neighbour takes cores, while throughput does, so it tells
    what the work costs on a shared host.

    Attributes:
      examples_per_sec: examples per second over the timed window.
      elements_per_sec: dataset elements (batches once batched) per second.
      elements: elements taken in the window.
      window_sec: length of the timed window.
      first_element_sec: from creating the iterator to the first element (reported apart).
      warmup_sec: time run after the first element and before the window, excluded from it.
      cpu_ms_per_example: CPU milliseconds spent in the window per example taken.
      cores_busy: CPU seconds over wall seconds in the window: how many cores the work kept
        busy on average.
      spread: the relative standard deviation of the rate between the window's half-second
        pieces (0.1 = 10%): the run's own uncertainty of the rate. None when the window held
        fewer than wait.MIN_PIECES pieces.
      pieces: the examples/s of each of those pieces, in order.
      host: what else ran on this process's cores over the window; None where the host's
        counters cannot be read (not Linux).
    """

    examples_per_sec: float
    elements_per_sec: float
    elements: int
    window_sec: float
    first_element_sec: float
    warmup_sec: float
    cpu_ms_per_example: float
    cores_busy: float
    spread: float | None = None
    pieces: tuple[float, ...] = ()
    host: HostLoad | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class StageRate:
    """Throughput of one prefix of the pipeline's stage list.

    Attributes:
      name: the group the prefix ends with: read, parse, decode, batch or final.
      stages: names of the stages this prefix adds to the previous one.
      upto: how many stages of the list the prefix applies.
      rate: the measurement.
    """

    name: str
    stages: tuple[str, ...]
    upto: int
    rate: Rate


@dataclasses.dataclass(frozen=True, slots=True)
class ScalingPoint:
    """The full pipeline with its private threadpool limited to `cores` threads. The point at
    the threadpool build() itself uses (its private pool, or tf.data's default of one thread
    per available core) is the producer's own window, not a second measurement.

    Attributes:
      cores: threads in tf.data's private threadpool.
      examples_per_sec: steady-state throughput.
      cpu_ms_per_example: CPU milliseconds per example (see `Rate`).
      cores_busy: cores kept busy on average; may exceed `cores`, since work outside the
        threadpool (the loop taking elements, TensorFlow's runtime threads) counts too.
    """

    cores: int
    examples_per_sec: float
    cpu_ms_per_example: float
    cores_busy: float

    @classmethod
    def of(cls, cores: int, rate: Rate) -> ScalingPoint:
        return cls(cores, rate.examples_per_sec, rate.cpu_ms_per_example, rate.cores_busy)


@dataclasses.dataclass(frozen=True, slots=True)
class Consumer:
    """How fast the accelerator takes examples, per host.

    Attributes:
      examples_per_sec: examples one host's accelerator(s) consume per second.
      step_time_ms: time of one step on one host's batch.
      source: "step_time" (given by the user), "model" (timed here), "reference" (published)
        or "profile" (the user's profiled run, less its input wait).
      description: what the number is, in words.
      device: the device a model was timed on, if any.
      url: the source of a reference number, if any.
      approximate: True for published reference numbers.
    """

    examples_per_sec: float
    step_time_ms: float
    source: ConsumerSource
    description: str
    device: str = ""
    url: str = ""
    approximate: bool = False


# A simulated consumer whose steps take longer than asked by more than this share did not
# simulate the step (see Simulation.holds_step).
SIMULATE_STEP_SLACK = 0.05


@dataclasses.dataclass(frozen=True, slots=True)
class Simulation:
    """The pipeline run against a consumer that holds each batch for the step time, sleeping.

    Attributes:
      step_time_ms: how long the consumer held each batch.
      steps: steps in the timed window.
      window_sec: total length of the consumer phases timed (after warm-up).
      wait_sec: time spent waiting for the next batch within the window.
      producer_examples_per_sec: the full pipeline's rate in producer phases alternated with
        the consumer phases on the same iterator.
      predicted_input_wait: the prediction from that rate and the step time.
      measured_input_wait: wait_sec / window_sec.
      host: what else ran on this process's cores over the whole simulation; None where it
        cannot be read.
    """

    step_time_ms: float
    steps: int
    window_sec: float
    wait_sec: float
    producer_examples_per_sec: float
    predicted_input_wait: float
    measured_input_wait: float
    host: HostLoad | None = None

    @property
    def consumer_step_ms(self) -> float:
        """The consumer's achieved time per step without its waits: step_time_ms when it held
        its schedule, longer when the loop's own cost (the call taking a batch, the GIL, the
        sleep) exceeded the step."""
        return (self.window_sec - self.wait_sec) / self.steps * 1000.0 if self.steps else 0.0

    @property
    def holds_step(self) -> bool:
        """True when the simulated consumer kept to its step (within SIMULATE_STEP_SLACK): its
        measured wait then checks the prediction for that step."""
        return self.consumer_step_ms <= self.step_time_ms * (1 + SIMULATE_STEP_SLACK)


@dataclasses.dataclass(frozen=True, slots=True)
class FitCheck:
    """`model.fit` on the real pipeline, measured by `tfpipe.monitor.InputWait`, beside the same
    model on on-device synthetic input.

    Attributes:
      model: the Keras model name.
      device: where it trained.
      steps: steps measured on the real pipeline (after warm-up steps).
      real_step_ms: mean step time with the real pipeline (the monitor's).
      synthetic_step_ms: mean step time with synthetic input already on the device.
      measured_input_wait: the share of the real steps' time spent waiting for their batch, as
        the monitor measured it (the ground truth).
      input_wait_low, input_wait_high: its 95% interval (None: too few steps).
      differential_input_wait: max(0, 1 - synthetic / real), the differential method
        (DS-Analyzer's): the wait, plus the model's compute slowed by sharing the host's
        cores with the pipeline, which synthetic input does not.
      contention: differential_input_wait - measured_input_wait: that slowdown's share of the
        real step (about 0 on an accelerator, whose compute takes no host cores).
    """

    model: str
    device: str
    steps: int
    real_step_ms: float
    synthetic_step_ms: float
    measured_input_wait: float
    input_wait_low: float | None = None
    input_wait_high: float | None = None
    differential_input_wait: float | None = None
    contention: float | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Comparison:
    """The baseline pipeline (tensorflow/tpu-style, see `tfpipe.modalities.images.bench.recipe`) and tfpipe's, on
    the same data, measured the same way."""

    tfpipe_examples_per_sec: float
    baseline_examples_per_sec: float

    @property
    def ratio(self) -> float:
        return self.tfpipe_examples_per_sec / self.baseline_examples_per_sec

    @property
    def recipe_examples_per_sec(self) -> float:
        """Deprecated alias of `baseline_examples_per_sec`; removed in the next release."""
        import warnings

        warnings.warn(
            "Comparison.recipe_examples_per_sec is deprecated: use baseline_examples_per_sec",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.baseline_examples_per_sec


@dataclasses.dataclass(frozen=True, slots=True)
class DatasetInfo:
    """The data benchmarked.

    Attributes:
      path: the dataset root (local or gs://).
      examples: examples in the split.
      shards: shard files in the split.
      bytes: bytes in the split.
      synthetic: True when tfpipe generated it.
      generated_sec: time spent generating it in this run (0 when reused or given).
    """

    path: str
    examples: int
    shards: int
    bytes: int
    synthetic: bool
    generated_sec: float = 0.0


Location = Literal["gcs", "local"]


@dataclasses.dataclass(frozen=True, slots=True)
class Storage:
    """What the storage gives the read stage, measured without a cache.

    Attributes:
      location: "gcs" for gs:// data, else "local".
      cache: the pipeline's resolved cache ("none", "memory" or "disk:<path>"). Unless "none",
        the steady state reads from the cache and the storage feeds only the first epoch.
      examples_per_sec: the uncached read prefix's records per second.
      mb_per_sec: the bytes those records take on storage, in MB (10**6 bytes) per second.
      requests_per_sec: GET requests per second those reads cost on gs:// (estimated from the
        read pattern, see `tfpipe.bench.measure.reading`); None for local files.
      bytes_per_example: mean stored bytes per record: the files' bytes over their records.
      needed_mb_per_sec: MB/s the consumer's examples/s take off storage.
      The three byte figures are None for files without a manifest (no record count).
      cpu_ms_per_example: the uncached read prefix's CPU cost per record.
      first_epoch_examples_per_sec: the whole pipeline without its cache, the rate of the first
        epoch; None when the pipeline does not cache (the producer's rate is the first epoch's).
    """

    location: Location
    cache: str
    examples_per_sec: float
    mb_per_sec: float | None
    requests_per_sec: float | None
    bytes_per_example: float | None
    needed_mb_per_sec: float | None
    cpu_ms_per_example: float
    first_epoch_examples_per_sec: float | None = None

    @property
    def cached(self) -> bool:
        return self.cache != "none"


@dataclasses.dataclass(frozen=True, slots=True)
class MixShare:
    """One source of a text mixture, as bench counted it (modalities/text/bench/mixshare.py).

    Attributes:
      name: the source's name (`--data NAME=PATH`).
      weight: its weight, normalised to sum to 1 over the sources, in the mixture's unit
        (tokens for text, unless mix_by="documents").
      real_tokens: its real tokens (segment id not 0) in the counted batches.
      epoch: its epoch (passes over its documents begun, from 0) at the last counted step.
      worst_window: the most its share strayed from its weight, in points, over every window of
        `window` consecutive counted batches.
      window: the batches of those windows: 100, or all the counted batches when fewer.
    """

    name: str
    weight: float
    real_tokens: int
    epoch: int
    worst_window: float = 0.0
    window: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class SourceText:
    """One source of a text mixture as its own manifest predicts it, alone (beside the mixture's
    own figures, from the mix).

    Attributes:
      name: the source's name (`--data NAME=PATH`).
      documents: documents in its split (its manifest's).
      tokens: tokens in them.
      lengths: its document length percentiles, as `TextMeasure.lengths`.
      predicted_fill: each packing mode's fill at L for its documents alone, as
        `TextMeasure.predicted_fill`.
      epoch_rows: the rows one epoch of its split packs into alone.
      suggested_length: the smallest multiple of 128 that holds 99% of its documents whole.
      suggested_fill: the fill predicted at `suggested_length` for its documents alone.
    """

    name: str
    documents: int
    tokens: int
    lengths: dict[str, int]
    predicted_fill: dict[str, float]
    epoch_rows: int
    suggested_length: int
    suggested_fill: float


@dataclasses.dataclass(frozen=True, slots=True)
class TextMeasure:
    """What a text pipeline's counting passes measured, beside what its manifest says.

    The bench's unit for text is the sequence (a row of `sequence_length` slots): batches,
    the consumer and every prefix are counted in sequences. A prefix before the pack stage
    yields chunks of documents; `rows_per_chunk` turns them into the sequences they pack into.

    Attributes:
      sequence_length: L, the slots in a row.
      packing: the packing mode the pipeline uses ("first_fit", "none" or "concat").
      classify: one document a row as [CLS] tokens [SEP], with its label (a labeled corpus).
      truncate: only each document's first L tokens are kept (a classifier's: L - 2).
      chunk_documents: documents the pipeline packs together (one chunk).
      rows_per_chunk: the rows a chunk packs into: its documents' tokens as packed (from the
        manifest's lengths) over L x the measured fill.
      rows: rows counted in the pipeline's batches.
      real_tokens: the non-padding slots of those rows (segment id not 0).
      fill_sd: the standard deviation of one batch's fill over those batches.
      batches: batches counted.
      predicted_fill: each packing mode's fill at L, predicted from the manifest's length
        histogram (`tfpipe.packing.fill.predicted_fill`) as this pipeline packs (its chunks, EOS,
        [CLS]/[SEP], truncation); modes the pipeline cannot use are absent.
      documents: documents in the split (the manifest's; a mixture's: all its sources').
      tokens: tokens in them (the manifest's; a mixture's: all its sources').
      lengths: document length percentiles in tokens from the histogram: "p50", "p90",
        "p99" and "max", and "longer" (documents longer than L).
      suggested_length: the smallest multiple of 128 that holds 99% of the documents whole
        (a TPU's lane width; the smallest document length a TPU computes on without padding).
      suggested_fill: the fill predicted at `suggested_length` with the same packing.
      tokenizer: the dataset's tokenizer, in words ("huggingface, 8,000 ids").
      tokenize_ms_per_1k: CPU ms the dataset's own tokenizer took to encode 1,000 tokens of a
        sample of its documents (decoded first), here; None when not measured.
      tokenize_note: why it was not measured, when it was not.
      epoch_rows: the rows one epoch of the split packs into, predicted from its length
        histogram as the pipeline packs (`fill.epoch_rows`: the count build() and
        steps_per_epoch use).
      tokenize_ms_range: the lowest and highest of `tokenize_ms_per_1k` over its
        `tokenize_rounds` timed rounds (the figure is their median); None when not measured.
      mixture: a mixture's sources, their real tokens counted in the same pass over the same
        batches, each with its worst window; empty for one dataset.
      sources: a mixture's sources as each one's own manifest predicts it alone (lengths, fill,
        epoch rows); empty for one dataset. `lengths`, `predicted_fill`, `epoch_rows` and the
        suggested length above are the mixture's own, from the mix (modalities/text/mixture/numbers.py).
    """

    sequence_length: int
    packing: str
    classify: bool
    truncate: bool
    chunk_documents: int
    rows_per_chunk: float
    rows: int
    real_tokens: int
    fill_sd: float
    batches: int
    predicted_fill: dict[str, float]
    documents: int
    tokens: int
    lengths: dict[str, int]
    suggested_length: int
    suggested_fill: float
    tokenizer: str = ""
    tokenize_ms_per_1k: float | None = None
    tokenize_note: str = ""
    epoch_rows: int = 0
    tokenize_ms_range: tuple[float, float] | None = None
    tokenize_rounds: int = 0
    mixture: tuple[MixShare, ...] = ()
    sources: tuple[SourceText, ...] = ()

    @property
    def fill(self) -> float:
        """Measured real tokens / slots of the pipeline's batches."""
        return self.real_tokens / (self.rows * self.sequence_length) if self.rows else 0.0


@dataclasses.dataclass(frozen=True, slots=True)
class ProducerMeasurement:
    """Every measurement of the producer one bench makes.

    Attributes:
      text: a text pipeline's counts (the fill, the rows a chunk packs into), taken before
        anything is timed; None for other pipelines.
      stages: each stage prefix, in order; the last is the whole pipeline: the producer's
        first window.
      scaling: the whole pipeline on 1..N cores.
      read: the read prefix without a cache: what the storage gives.
      first_epoch: the whole pipeline without its cache when it caches (the first epoch, which
        fills the cache from storage); None for a pipeline without a cache.
      again: the whole pipeline timed again after everything else: the producer's second
        window, tens of seconds after the first (None when not taken).
    """

    text: TextMeasure | None
    stages: tuple[StageRate, ...]
    scaling: tuple[ScalingPoint, ...]
    read: Rate
    first_epoch: Rate | None
    again: Rate | None = None

    @property
    def windows(self) -> tuple[Rate, ...]:
        """The producer's windows: the whole pipeline's, first and (when taken) again."""
        return (self.stages[-1].rate,) + ((self.again,) if self.again is not None else ())

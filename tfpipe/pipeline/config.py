"""build()'s options by topic, and `PipelineConfig`, every one of them as one record.

A topic is what changes together, a small frozen object that checks its own values:
- `Order`: the training order, which records each step sees. A function of its fields and the
  step: a resumed run passes the same ones.
- `Tuning`: the cache, the threads and the buffers: speed and memory, never which records the
  batches hold (but for `ram_budget`, which also caps the order's shuffle buffer).
- `Remainder`: the last partial batch, dropped (training), kept or padded (eval).
- `Integrity`: how a corrupt shard is met: named in an error, or skipped and counted.
- `DataService`: the tf.data service job that runs the pipeline on other machines.
Hosts (tfpipe/pipeline/hosts.py) and the mixture (mixture/sources.py) are the others.

`PipelineConfig` holds every field of these topics (each under its own name, which is also
build()'s short keyword for it: `TOPIC_OF`) with the split: the one record the pipeline's
stages read, and what `Pipeline.config` shows plan() decided. Its checks are the topics':
a topic object checks itself by building one.

Defaults marked "measured" come from `benchmarks/measure_defaults.py SWEEP` in paired,
alternating rounds (benchmarks/paired.py) on the project machine: 2 cores, local disk, 800
ImageNet-like ~470x390 JPEGs in 8 shards at batch 128 and image_size 224; a 200k-row
40-column table at batch 1024. A figure reads "throughput ratio [95% interval], CPU ratio
[95% interval]" against the default: CPU time per example barely moves when other jobs take
cores, throughput does. The read, verify and image sweeps ran while other jobs loaded the
machine (load 3-6 on 2 cores), so their throughput intervals are wide and the CPU ratio
decides; the threads sweep ran on the quiet machine. The full tables are in
benchmarks/RESULTS.md. Knobs left to AUTOTUNE are the ones
where tf.data's autotuner is the better judge.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Literal, TypeAlias

from tfpipe.errors import ConfigError, field_error
from tfpipe.service.address import DEFAULT_CONNECT_TIMEOUT
from tfpipe.service.stage import DEFAULT_PEER_TIMEOUT, ProcessingMode
from tfpipe.validation import check_bool, check_choice, check_int, check_seconds, check_str

AUTOTUNE = -1
# The training orders (see `Order.order`; order/resumable.py decides and describes them).
OrderKind = Literal["resumable", "shuffle_buffer"]
ORDERS: tuple[OrderKind, ...] = ("resumable", "shuffle_buffer")
# THE SWITCH: the training order when `order` is not given. "resumable" (a pure function of
# seed and position: start_step, Position, resume after preemption) or "shuffle_buffer" (the
# order before it: files shuffled, interleaved as they arrive, a shuffle buffer). It becomes
# "resumable" when that costs at most 5% throughput against "shuffle_buffer" in paired rounds:
# benchmarks/test_resume_speed.py (see benchmarks/RESULTS.md).
DEFAULT_TRAINING_ORDER: OrderKind = "resumable"
# Files in one group of the resumable order. Its windows mix only the files of their group,
# so this is what its mixing rests on. On a class-sorted ImageNet-shaped table (1,000
# classes, 1,024 shards, batch 1,024; `python benchmarks/mixing.py`) the shuffle buffer
# order (16 files) gives 76.9 classes per batch (worst batch 26); the resumable order 24.9
# (worst 18) with 16 files, 71.5 (worst 65) with 64, 133.8 (worst 128) with 128. 64 open
# files cost their read-ahead buffers (together at most 1/8 of ram_budget) and 64
# concurrent reads, which GCS serves well.
RESUMABLE_CYCLE_LENGTH = 64
# Files a training read opens at once on gs:// when read_parallelism is AUTOTUNE (or the cores
# the autotuner assumes, if more). A gs:// read waits on requests (tens of ms to the first
# byte), which tf.data's autotuner, modelling CPU, does not see: it settles near the core
# count. Measured on the local GCS twin shaped like GCS (measure_defaults_gcs.py
# train-parallel, 2 cores, 16 shards of 5.4 MB, cache="none"): 8 read 1.46x [1.40, 1.52] the
# examples/s of AUTOTUNE at 0.99x the CPU per image; 4 read 1.29x, 16 1.29x.
GCS_READ_PARALLELISM = 8
# The shuffle buffer order's files read at once (see `cycle_length`).
SHUFFLE_BUFFER_CYCLE_LENGTH = 16
CACHE_CHOICES = ("auto", "memory", "none", "disk:<path>")

# Upper bounds on sizes TensorFlow allocates up front or per thread. Past them TF crashes or
# stalls instead of raising (measured with TF 2.21 on the project machine): a TFRecordDataset
# buffer of 2**35 bytes segfaults; a shuffle buffer allocates its slots at once (10**8 took
# 3 s before the first record, 10**9 over a minute, 2**31 segfaults); a private thread pool
# starts its threads at once (4096 took 17 s, 10**6 hangs). The interleave buffers
# 2 * block_length + 1 records per open file, and opens `cycle_length` files with a worker each.
# TF 2.20 behaves the same at and past each bound (`python tools/tf_bounds.py` on both: the
# bounds themselves run, 2**35 bytes and 2**31 slots segfault).
MAX_READER_BUFFER = 1 << 30
MAX_SHUFFLE_BUFFER = 10_000_000
MAX_THREADS = 1024
MAX_CYCLE_LENGTH = 1024
MAX_BLOCK_LENGTH = 1024
# Prefetched elements are whole batches: beyond this a prefetch buffer is memory, not speed.
MAX_PREFETCH = 1024


def check_cache(value: object, field: str = "cache") -> str:
    """Returns `value` if it is a cache setting: "auto", "memory", "none" or "disk:<path>"."""
    if not isinstance(value, str) or not (
        value in ("auto", "memory", "none") or (value.startswith("disk:") and len(value) > len("disk:"))
    ):
        raise field_error(ConfigError, field, f"one of {CACHE_CHOICES}", value)
    return value


@dataclasses.dataclass(frozen=True, slots=True)
class Order:
    """The training order: which records each step sees (eval always reads in source order).

    `tfpipe.build(data, batch_size=1024, order=tfpipe.Order(seed=7))`; each field is also a
    keyword of build() (`seed=7`). A resumed run passes the same order.

    Attributes:
      order: "resumable": files permuted per epoch and read `cycle_length` at a time, their
        records in windows of `shuffle_buffer` permuted whole; each record's place and
        augmentation follow from (seed, epoch, position), so a run can start at any step
        (`build(..., start_step=)`) and resume exactly after a preemption. "shuffle_buffer":
        files shuffled, interleaved as they arrive, a shuffle buffer; not resumable. None:
        DEFAULT_TRAINING_ORDER, except "shuffle_buffer" (said in a note) for files without a
        manifest (no record counts) and with tf.data service.
      seed: seeds file order, record shuffle and augmentation. None: fresh randomness (the
        resumable order draws a seed and names it in `Pipeline.describe()`).
      deterministic: produce elements in a fixed order (with `seed`, runs repeat exactly).
        None: True for the resumable order and in eval; False for "shuffle_buffer" training
        (no order is needed, so a slow record never holds up the others). The resumable
        order refuses False. Measured (threads sweep, quiet machine): deterministic=True
        0.96x [0.87, 1.06], CPU 1.04x [0.95, 1.15].
      shuffle_buffer: records in the shuffle buffer, or in one window of the resumable order.
        Not a speed knob: 10,000 is the TF Model Garden's ImageNet value; it is capped so the
        buffer (the resumable order: its ~3 windows) takes at most a quarter of
        `Tuning.ram_budget` given the manifest's mean record size.
      cycle_length: files read concurrently by the training interleave; for the resumable
        order, the files of a group, read together and mixed in its windows. None: 16 for
        "shuffle_buffer", RESUMABLE_CYCLE_LENGTH for "resumable". Measured flat on local disk
        (read sweep, cache="none": cycle_length=4 0.88x [0.53, 1.46], CPU 1.03x [0.97, 1.11])
        and on gs:// (the local GCS twin shaped like GCS, 16 shards: cycle_length=4 1.02x
        [1.00, 1.04], 8 1.06x [1.02, 1.10] the read's records/s): how well batches mix decides
        it (`benchmarks/mixing.py`). Eval reads the shards one after another in manifest order
        (the next ones are opened ahead), so predictions line up with the source; on the shaped
        twin that read gave 1.37x the training read's records/s (eval-read sweep: training
        0.73x [0.68, 0.79]).
      block_length: consecutive records taken from each file in turn ("shuffle_buffer"; the
        resumable order takes runs of its own, see order/resumable.py). 1 mixes files the
        most; measured no gain from more (read sweep, cache="none": block_length=4 0.65x
        [0.36, 1.17], CPU 1.03x [0.93, 1.14]; on the shaped twin 0.99x [0.96, 1.02]).
    """

    order: OrderKind | None = None
    seed: int | None = None
    deterministic: bool | None = None
    shuffle_buffer: int = 10_000
    cycle_length: int | None = None
    block_length: int = 1

    def __post_init__(self) -> None:
        _checked_by_config(self)


@dataclasses.dataclass(frozen=True, slots=True)
class Tuning:
    """The cache, the threads and the buffers: how fast, and in how much memory.

    `tfpipe.build(data, batch_size=1024, tuning=tfpipe.Tuning(cache="none"))`; each field is
    also a keyword of build() (`cache="none"`).

    Attributes:
      cache: "auto" caches the serialized records in memory when the manifest says they fit
        in half of `ram_budget`; "memory"; "disk:<path>" (a file prefix); "none". The cache
        sits before shuffle and augmentation, never after a random one. Measured (read
        sweep): cached images took 0.91x [0.82, 1.00] the CPU of reading the files again.
        The resumable order caches in memory only: the dataset's first iterator loads every
        record (before its first batch) and the dataset keeps them, as `cache()` does, for
        every later `iter()`; each epoch's order is gathered from memory. It refuses "disk:"
        (and with skip_corrupt=True, "auto" does not cache).
      ram_budget: bytes tf.data may use for buffers (autotune.ram_budget) and "auto" caching.
        0: half of this machine's physical memory.
      reader_buffer: bytes of read-ahead per open file. Measured flat on local disk (read
        sweep, cache="none": 256 KiB 1.05x [0.71, 1.55], CPU 0.98x [0.91, 1.06]) and on gs://
        (the shaped twin: 256 KiB 0.99x [0.96, 1.02], 32 MiB 0.98x [0.95, 1.01]), where it
        changes no request: TensorFlow fetches GCS_READ_CACHE_BLOCK_SIZE_MB (64 MiB) per
        request whatever this buffer is. Capped so all open files' buffers take at most 1/8
        of `ram_budget`.
      read_parallelism, map_parallelism, prefetch: AUTOTUNE (-1) or a fixed count
        (read_parallelism at most the files in the cycle). Measured (threads sweep, quiet
        machine): map_parallelism=2 0.98x [0.91, 1.07], CPU 1.02x [0.95, 1.09]; prefetch=2
        0.97x [0.83, 1.14], CPU 1.03x [0.89, 1.19]: no fixed value beats AUTOTUNE locally.
        On gs:// a training read's AUTOTUNE becomes GCS_READ_PARALLELISM (8) files at once,
        or the cores if more (see GCS_READ_PARALLELISM for the measurement); Pipeline.config
        shows the value used.
      private_threadpool_size: tf.data's own thread pool; 0 keeps TF's shared pool. Measured
        (threads sweep, quiet machine): 2 threads 0.99x [0.86, 1.14], 4 threads 0.96x [0.84,
        1.10], both at 1.95-1.96 cores busy like the shared pool. Set it when the training
        step also runs on the CPU and the two should not compete.
      max_intra_op_parallelism: threads one tf.data op may use. Measured (threads sweep,
        quiet machine): TF's default (0) ran 0.82x [0.72, 0.94] at 1.12x [1.00, 1.26] the
        CPU per image (under load: 1.17x [1.14, 1.20]); records already run in parallel,
        and splitting one op costs more than it gains.
      cpu_budget: cores the autotuner assumes; 0 = all.
    """

    cache: str = "auto"
    ram_budget: int = 0
    reader_buffer: int = 8 << 20
    read_parallelism: int = AUTOTUNE
    map_parallelism: int = AUTOTUNE
    prefetch: int = AUTOTUNE
    private_threadpool_size: int = 0
    max_intra_op_parallelism: int = 1
    cpu_budget: int = 0

    def __post_init__(self) -> None:
        _checked_by_config(self)


@dataclasses.dataclass(frozen=True, slots=True)
class Remainder:
    """The last partial batch: dropped, kept short, or padded to a whole batch.

    `tfpipe.build(data, batch_size=1024, training=False, remainder=tfpipe.Remainder(pad_remainder=True))`,
    or the keyword `pad_remainder=True`.

    Attributes:
      drop_remainder: drop the last partial batch. None: True when training (static shapes
        for TPUs), False in eval (every record is seen).
      pad_remainder: eval only: pad the last batch to the full batch, with a per-example weight
        of 0 on the padding, and give every input pipeline (host) the same number of batches,
        so every batch has one shape and every example counts once in weighted metrics (as
        the TF Model Garden and T5X evaluate on TPUs; see pipeline/stages/padding.py). Batches
        `(x, y)` become `(x, y, weights)`. None: True for text (its rows always padded) and
        across hosts (`Hosts` of several, each its share of the batch: each host must run the
        same steps), else False.
    """

    drop_remainder: bool | None = None
    pad_remainder: bool | None = None

    def __post_init__(self) -> None:
        _checked_by_config(self)


@dataclasses.dataclass(frozen=True, slots=True)
class Integrity:
    """How a corrupt shard is met: named in an error, or skipped and counted.

    `tfpipe.build(data, batch_size=1024, integrity=tfpipe.Integrity(skip_corrupt=True))`, or
    the keyword `skip_corrupt=True`.

    Attributes:
      skip_corrupt: drop corrupt records and undecodable images, counting them (see
        `tfpipe.skipped`). False: raise an error naming the shard. Network and storage errors
        are never counted as corruption: they are raised. Needs `verify_shards=True`.
      verify_shards: check each shard was read to its end (needed to name a corrupt shard).
        Measured free on images (read sweep, cache="none": False 0.80x [0.29, 2.17], CPU
        0.99x [0.88, 1.11]); on the 40-column table (verify sweep) False took 0.77x [0.60,
        0.98] the CPU per row, throughput 1.14x [0.62, 2.11]. False trades the shard's name
        in corruption errors for that.
    """

    skip_corrupt: bool = False
    verify_shards: bool = True

    def __post_init__(self) -> None:
        _checked_by_config(self)


@dataclasses.dataclass(frozen=True, slots=True)
class DataService:
    """The tf.data service job that runs the pipeline on its workers.

    `tfpipe.build(data, batch_size=1024, service=tfpipe.DataService("grpc://d:5050", job_name="a"))`;
    `service="grpc://d:5050"` is the address alone, and each other field is also a keyword.

    Attributes:
      address: the dispatcher, "grpc://host:port".
      processing_mode: "parallel_epochs" (each worker runs the whole pipeline) or "dynamic"
        (the dispatcher hands out the files one split at a time).
      job_name: consumers with the same name share one job and split its elements.
      service_connect_timeout: seconds to wait for the dispatcher to answer at `build()`
        before raising; None waits as long as TensorFlow does (forever).
      service_peer_timeout: while the client waits for data, seconds the dispatcher or a
        worker may stay unreachable before the epoch ends with an error naming it; None
        reads the service without the watchdog (TensorFlow then waits forever).
    """

    address: str
    processing_mode: ProcessingMode = "parallel_epochs"
    job_name: str | None = None
    service_connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT
    service_peer_timeout: float | None = DEFAULT_PEER_TIMEOUT

    def __post_init__(self) -> None:
        check_address(self.address)
        _checked_by_config(self)


Topic: TypeAlias = Order | Tuning | Remainder | Integrity | DataService
# The topics a PipelineConfig is made of, in the order they are given to `PipelineConfig.of`.
TOPICS: tuple[type[Topic], ...] = (Order, Tuning, Remainder, Integrity, DataService)
# Each PipelineConfig field but the split: the topic that holds it, under the same name (also
# build()'s short keyword for it: pipeline/arguments.py's SHORT_FORMS starts from this table).
TOPIC_OF: dict[str, type[Topic]] = {
    f.name: topic for topic in TOPICS for f in dataclasses.fields(topic) if f.name != "address"
}


def check_address(address: object) -> str:
    """A tf.data service dispatcher's address, "grpc://host:port"."""
    if not isinstance(address, str) or "://" not in address:
        raise ConfigError(
            f"service must be a dispatcher address like 'grpc://host:port'. Received: {address!r}"
        )
    return address


def _checked_by_config(topic: Topic) -> None:
    """Checks a topic by building the PipelineConfig of its fields (its rules are written once,
    there, naming each field and the value received), and keeps the values as checked (ints
    as Python ints)."""
    names = [f.name for f in dataclasses.fields(PipelineConfig) if TOPIC_OF.get(f.name) is type(topic)]
    checked = PipelineConfig(**{name: getattr(topic, name) for name in names})
    for name in names:
        object.__setattr__(topic, name, getattr(checked, name))


@dataclasses.dataclass(frozen=True, slots=True)
class PipelineConfig:
    """Every option of `build()` as one record: the split and the fields of its topics.

    The stages read it, and `Pipeline.config` shows what plan() decided (the seed drawn, the
    cycle length and read parallelism filled in). Each field is documented on its topic:
    `Order`, `Tuning`, `Remainder`, `Integrity`, `DataService`; each is also a keyword of
    `build()`/`plan()`. Every field is type-checked (a bool is True or False, never "no" or 1),
    and sizes TensorFlow would crash or stall on are refused (the MAX_* bounds above).
    `build(data, config=PipelineConfig(...))` gives them all at once, the keywords over it.

    Attributes:
      split: the manifest split to read. None: "train" when training; in eval "validation",
        else "test", else the only split.
    """

    split: str | None = None
    order: OrderKind | None = None
    seed: int | None = None
    deterministic: bool | None = None
    drop_remainder: bool | None = None
    pad_remainder: bool | None = None
    shuffle_buffer: int = 10_000
    cache: str = "auto"
    ram_budget: int = 0
    cycle_length: int | None = None
    block_length: int = 1
    reader_buffer: int = 8 << 20
    read_parallelism: int = AUTOTUNE
    map_parallelism: int = AUTOTUNE
    prefetch: int = AUTOTUNE
    private_threadpool_size: int = 0
    max_intra_op_parallelism: int = 1
    cpu_budget: int = 0
    skip_corrupt: bool = False
    verify_shards: bool = True
    processing_mode: ProcessingMode = "parallel_epochs"
    job_name: str | None = None
    service_connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT
    service_peer_timeout: float | None = DEFAULT_PEER_TIMEOUT

    def __post_init__(self) -> None:
        for name in ("deterministic", "drop_remainder", "pad_remainder"):
            check_bool(name, getattr(self, name), optional=True)
        for name in ("skip_corrupt", "verify_shards"):
            check_bool(name, getattr(self, name))
        check_str("split", self.split, optional=True)
        if self.order is not None:
            check_choice("order", self.order, ORDERS)
        ints = {"seed": check_int("seed", self.seed, None, optional=True)}
        for name, low, high in (
            ("shuffle_buffer", 1, MAX_SHUFFLE_BUFFER),
            ("block_length", 1, MAX_BLOCK_LENGTH),
            ("reader_buffer", 1, MAX_READER_BUFFER),
            ("ram_budget", 0, None),
            ("private_threadpool_size", 0, MAX_THREADS),
            ("max_intra_op_parallelism", 0, MAX_THREADS),
            ("cpu_budget", 0, None),
        ):
            ints[name] = check_int(name, getattr(self, name), low, high)
        ints["cycle_length"] = check_int(
            "cycle_length", self.cycle_length, 1, MAX_CYCLE_LENGTH, optional=True
        )
        for name, high in (
            ("read_parallelism", MAX_THREADS),
            ("map_parallelism", MAX_THREADS),
            ("prefetch", MAX_PREFETCH),
        ):
            value = getattr(self, name)
            if value != AUTOTUNE:
                ints[name] = check_int(name, value, 1, high, what=f"AUTOTUNE (-1) or an int in [1, {high}]")
        for name, number in ints.items():  # stored as Python ints (numpy's np.int64 too)
            object.__setattr__(self, name, number)
        check_cache(self.cache)
        check_choice("processing_mode", self.processing_mode, ProcessingMode)
        check_str("job_name", self.job_name, optional=True)
        for name in ("service_connect_timeout", "service_peer_timeout"):
            if getattr(self, name) is not None:
                check_seconds(name, getattr(self, name), "None or seconds > 0")
        if self.pad_remainder and self.drop_remainder:
            raise ConfigError(
                "pad_remainder=True pads the last batch that drop_remainder=True drops: pass one. "
                "Received: drop_remainder=True, pad_remainder=True"
            )
        if self.skip_corrupt and not self.verify_shards:
            raise ConfigError(
                "skip_corrupt=True needs verify_shards=True: a shard that ends early can only be "
                "counted, and told apart from a network error, when it is checked to its end. "
                "Received: skip_corrupt=True, verify_shards=False"
            )

    @classmethod
    def of(cls, split: str | None, *topics: Topic) -> PipelineConfig:
        """The config of `split` and these topics (one of each at most; those not given at
        their defaults)."""
        fields = {
            f.name: getattr(t, f.name) for t in topics for f in dataclasses.fields(t) if f.name != "address"
        }
        return dataclasses.replace(cls(split=split), **fields)

    def resolved_ram_budget(self) -> int:
        """`ram_budget`, with 0 meaning half of the physical memory."""
        if self.ram_budget:
            return self.ram_budget
        import psutil

        # Half the machine: the rest is the model's, the framework's and the OS page cache's.
        return int(psutil.virtual_memory().total // 2)

    def for_storage(self, on_gcs: bool) -> PipelineConfig:
        """AUTOTUNE's read_parallelism made GCS_READ_PARALLELISM (at least the cores) for gs://."""
        if not on_gcs or self.read_parallelism != AUTOTUNE:
            return self
        cores = self.cpu_budget or os.cpu_count() or 1
        return dataclasses.replace(self, read_parallelism=max(GCS_READ_PARALLELISM, cores))

    def for_mode(self, training: bool, order: OrderKind | None = None) -> PipelineConfig:
        """Fills the fields whose default depends on training vs eval and on the order
        (`order`: the training order decided for this data, see `build.plan`)."""
        if training and self.pad_remainder:
            raise ConfigError(
                "pad_remainder pads the last batch of an eval pass; training (endless, its "
                "remainder dropped) has only whole batches. Received: training=True, pad_remainder=True"
            )
        resumable = training and order == "resumable"
        cycle = RESUMABLE_CYCLE_LENGTH if resumable else SHUFFLE_BUFFER_CYCLE_LENGTH
        return dataclasses.replace(
            self,
            order=order if training else self.order,
            cycle_length=cycle if self.cycle_length is None else self.cycle_length,
            deterministic=(resumable or not training) if self.deterministic is None else self.deterministic,
            drop_remainder=training if self.drop_remainder is None else self.drop_remainder,
        )

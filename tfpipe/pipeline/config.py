"""PipelineConfig: every knob of `build()`, frozen and validated.

Defaults marked "measured" come from benchmarks/measure_defaults.py on the project machine
(2 cores shared with other jobs, local disk, 800 ImageNet-like 470x390 JPEGs in 8 shards at
batch 128 and image_size 224; a 200k-row 40-column table at batch 1024). Run-to-run noise on
that machine was about +-20%, so "flat" below means "no difference beyond that". Knobs left
to AUTOTUNE are the ones where tf.data's autotuner is the better judge.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, get_args

from tfpipe.errors import ConfigError, field_error

AUTOTUNE = -1
ProcessingMode = Literal["parallel_epochs", "dynamic"]
CACHE_CHOICES = ("auto", "memory", "none", "disk:<path>")


@dataclasses.dataclass(frozen=True, slots=True)
class PipelineConfig:
    """How `build()` assembles and tunes the tf.data pipeline.

    Every field can also be passed to `build()`/`plan()` as a keyword, e.g.
    `tfpipe.build(data, batch_size=256, seed=7, deterministic=True)`.

    Attributes:
      split: the manifest split to read. None: "train" when training; in eval "validation",
        else "test", else the only split.
      seed: seeds file order, record shuffle and augmentation. None: fresh randomness.
      deterministic: produce elements in a fixed order (with `seed`, runs repeat exactly).
        None: False when training, True in eval. Measured: non-deterministic training ran
        548-691 img/s against 390-608 deterministic (alternating runs).
      drop_remainder: drop the last partial batch. None: True when training (static shapes
        for TPUs), False in eval (every record is seen).
      shuffle_buffer: records in the shuffle buffer (training). Not a speed knob: 10,000 is
        the TF Model Garden's ImageNet value; it is capped so the buffer takes at most a
        quarter of `ram_budget` given the manifest's mean record size.
      cache: "auto" caches the serialized records in memory when the manifest says they fit
        in half of `ram_budget`; "memory"; "disk:<path>" (a file prefix); "none". The cache
        sits before shuffle and augmentation, never after a random one.
      ram_budget: bytes tf.data may use for buffers (autotune.ram_budget) and "auto" caching.
        0: half of this machine's physical memory.
      cycle_length: files read concurrently by the interleave. Measured flat on local disk
        (2, 4, 8, 16: 478-627 img/s). 16 is for GCS, where each open file hides request
        latency; that was not measurable here (no real GCS), so it is a judgement.
      block_length: consecutive records taken from each file in turn.
      reader_buffer: bytes of read-ahead per open file. Measured flat on local disk
        (256 KiB..32 MiB: 611-675 img/s); 8 MiB is the tensorflow/tpu reference's value for
        GCS. Capped so all open files' buffers take at most 1/8 of `ram_budget`.
      read_parallelism, map_parallelism, prefetch: AUTOTUNE (-1) or a fixed count.
      private_threadpool_size: tf.data's own thread pool; 0 keeps TF's shared pool. Measured:
        2 or 4 threads gave 543 and 565 img/s against 536 shared, i.e. no gain; set it when
        the training step also runs on the CPU and the two should not compete.
      max_intra_op_parallelism: threads one tf.data op may use. Measured: 1 gave 536 img/s
        against 447 with TF's default (ops already run in parallel across records).
      cpu_budget: cores the autotuner assumes; 0 = all.
      skip_corrupt: drop corrupt records and undecodable images, counting them (see
        `tfpipe.pipeline.skipped`). False: raise an error naming the shard.
      verify_shards: check each shard was read to its end (needed to name a corrupt shard).
        Measured: free on images (decode dominates); on the 40-column table it cost between
        nothing and 40% in alternating runs (still 9x per-row parsing). False trades the
        shard's name in corruption errors for that.
      processing_mode: tf.data service sharding: "parallel_epochs" or "dynamic".
      job_name: tf.data service job name, to share one job between consumers.
    """

    split: str | None = None
    seed: int | None = None
    deterministic: bool | None = None
    drop_remainder: bool | None = None
    shuffle_buffer: int = 10_000
    cache: str = "auto"
    ram_budget: int = 0
    cycle_length: int = 16
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

    def __post_init__(self) -> None:
        for name in ("deterministic", "drop_remainder"):
            _check_bool(name, getattr(self, name), optional=True)
        for name in ("skip_corrupt", "verify_shards"):
            _check_bool(name, getattr(self, name))
        if self.split is not None and (not isinstance(self.split, str) or not self.split):
            raise field_error(ConfigError, "split", "a split name or None", self.split)
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)):
            raise field_error(ConfigError, "seed", "an int or None", self.seed)
        for name, low in (("shuffle_buffer", 1), ("cycle_length", 1), ("block_length", 1),
                          ("reader_buffer", 1), ("ram_budget", 0), ("private_threadpool_size", 0),
                          ("max_intra_op_parallelism", 0), ("cpu_budget", 0)):
            _check_int(name, getattr(self, name), low)
        for name in ("read_parallelism", "map_parallelism", "prefetch"):
            value = getattr(self, name)
            _check_int(name, value, AUTOTUNE)
            if value == 0:
                raise field_error(ConfigError, name, "AUTOTUNE (-1) or a positive int", value)
        if not isinstance(self.cache, str) or not (
            self.cache in ("auto", "memory", "none")
            or (self.cache.startswith("disk:") and len(self.cache) > len("disk:"))
        ):
            raise field_error(ConfigError, "cache", f"one of {CACHE_CHOICES}", self.cache)
        if self.processing_mode not in get_args(ProcessingMode):
            raise field_error(ConfigError, "processing_mode", f"one of {get_args(ProcessingMode)}",
                              self.processing_mode)
        if self.job_name is not None and (not isinstance(self.job_name, str) or not self.job_name):
            raise field_error(ConfigError, "job_name", "a non-empty string or None", self.job_name)

    @classmethod
    def field_names(cls) -> frozenset[str]:
        return frozenset(f.name for f in dataclasses.fields(cls))

    def resolved_ram_budget(self) -> int:
        """`ram_budget`, with 0 meaning half of the physical memory."""
        if self.ram_budget:
            return self.ram_budget
        import psutil

        # Half the machine: the rest is the model's, the framework's and the OS page cache's.
        return int(psutil.virtual_memory().total // 2)

    def for_mode(self, training: bool) -> PipelineConfig:
        """Fills the fields whose default depends on training vs eval."""
        return dataclasses.replace(
            self,
            deterministic=(not training) if self.deterministic is None else self.deterministic,
            drop_remainder=training if self.drop_remainder is None else self.drop_remainder,
        )


def _check_bool(name: str, value: Any, optional: bool = False) -> None:
    if not (isinstance(value, bool) or (optional and value is None)):
        raise field_error(ConfigError, name, "True or False" + (" or None" if optional else ""), value)


def _check_int(name: str, value: Any, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise field_error(ConfigError, name, f"an int >= {low}", value)

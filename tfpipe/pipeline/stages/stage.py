"""`Stage`, one named step `tf.data.Dataset -> tf.data.Dataset`; `StagePlan`, everything the
stage factories read, as `plan()` decided it; and `Batching`, how a preset's records become its
batches. The factories are by what they do: reading (stages/read.py), the preset's parse,
decode, batch and map (stages/preset.py), the final stages (stages/final.py); the stages between
reading and the final ones are the batching's (records: stages/batching.py; a modality's own,
such as text's chunk, pack and batch); `make_stages` (stages/pipeline.py) puts them in order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, Protocol

from tfpipe._tf import Dataset, Tensor
from tfpipe.pipeline.read import skips
from tfpipe.pipeline.read.sharding import FileShare, ShardBy

if TYPE_CHECKING:
    from tfpipe.pipeline.config import PipelineConfig
    from tfpipe.pipeline.order.resumable import OrderSpec
    from tfpipe.pipeline.read.resolve import ResolvedData
    from tfpipe.presets import Decoder

StageName = Literal[
    "list_files",
    "shard",
    "interleave",
    "chunk",
    "cache",
    "shuffle",
    "repeat",
    "batch",
    "parse",
    "decode",
    "pack",
    "map",
    "pad",
    "service",
    "prefetch",
]
Group = Literal["read", "parse", "decode", "pack", "batch", "final"]
StageFn = Callable[[Dataset], Dataset]


@dataclasses.dataclass(frozen=True, slots=True)
class Stage:
    """One named step `tf.data.Dataset -> tf.data.Dataset` (the first stage ignores its input).

    Attributes:
      name: the stage name (see the module docstring).
      fn: the transformation.
      group: the benchmark's prefix group: read, parse, decode, batch or final.
      batches: from this stage on, elements are batches of the batch size.
    """

    name: StageName
    fn: StageFn
    group: Group
    batches: bool = False


class Batching(Protocol):
    """How a preset's records become its pipeline's batches, as the pipeline asks it: the stages
    between reading and the final ones, the resumable order's stream and where a resumed run
    starts, what a batch counts and how eval pads it. A preset's Decoder carries one
    (`Decoder.batching`); without one a record is an example (`stages.batching.Records`: one
    record at a time, or batched first); text packs documents into rows (its modality's
    `TextRows`). No stage asks which modality it reads: it asks the batching.

    Attributes:
      unit: what the reading stages yield, one an element ("records", "documents").
      pads_eval: eval pads its last batch when pad_remainder is None (`padding.resolve_pad`).
      marks_padding: a batch marks its own padding (text: segment ids 0), so padding adds no
        weights.
      mixing: how a weighted mixture of such datasets is weighed and streamed
        (`pipeline.mixture.mixing.Mixing`); None: by records.
    """

    unit: str
    pads_eval: bool
    marks_padding: bool
    mixing: Any

    def stages(self, p: StagePlan) -> list[Stage]:
        """The stages between "repeat" and "map"."""
        ...

    def batched_read(self, p: StagePlan) -> bool:
        """The resumable order's stream ("interleave") yields batches already."""
        ...

    def ordered(self, p: StagePlan, read: Callable[..., Any], parallelism: int) -> Any:
        """The resumable order's stream, made in "interleave" from `read(path, size, count)`."""
        ...

    def start(self, spec: Any, position: Any, step: int) -> Callable[[], Any]:
        """The step a resumable pipeline starts at: fixed, or the Position's (read when an
        iterator starts), as a function giving an int64 tensor."""
        ...

    def notes(
        self, batch: int, src: ResolvedData, resumable: bool
    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(notes for `describe()`, warnings) of a pipeline of `batch` a batch reading `src`."""
        ...

    def units(self, records: int, src: ResolvedData) -> tuple[int, str]:
        """(the batch elements `records` of `src` make, what they are): the count a batch is
        checked against."""
        ...

    def eval_counts(self, src: ResolvedData, pipelines: int) -> tuple[list[int] | None, str]:
        """(the batch elements each of `pipelines` eval input pipelines yields, or None; why
        they are unknown, "" when known)."""
        ...

    def identity(self) -> dict[str, Any] | None:
        """What a resumed run (and each source of a mixture) must share of it; None: nothing."""
        ...


@dataclasses.dataclass(frozen=True, slots=True)
class StagePlan:
    """Everything the stage factories read, decided by `plan()`.

    `source.files` are all the data's files, which "list_files" lists; `files` are the ones
    this input pipeline reads (`share`: after file sharding).
    """

    source: ResolvedData
    share: FileShare  # what this input pipeline reads of the source's files
    read_records: int | None  # records the interleave yields, when known for sure
    decoder: Decoder
    batching: Batching  # how its records become batches (the decoder's, or records)
    config: PipelineConfig  # with deterministic and drop_remainder resolved
    training: bool
    batch_size: int  # per pipeline
    num_shards: int  # input pipelines
    shard_index: int
    cache: str  # resolved: "none", "memory" or "disk:<path>"
    shuffle_buffer: int
    service: str | None
    counter: skips.SkipCounter | None
    order: OrderSpec | None = None  # the resumable order; None: "shuffle_buffer"
    start: Callable[[], Tensor] | None = None  # its start position (read when an iterator starts)
    batches: int | None = None  # eval: the batches it yields, when known (its cardinality)
    padding_batches: int = 0  # eval: whole batches of padding after its own (pad_remainder)

    @property
    def files(self) -> tuple[str, ...]:
        """The files this input pipeline reads (all of them with record sharding)."""
        return tuple(self.source.files[j] for j in self.share.files)

    @property
    def shard_by(self) -> ShardBy:
        return self.share.shard_by

    @property
    def read_files(self) -> int:
        """Files this input pipeline reads."""
        return len(self.share.files)

    @property
    def keyed(self) -> bool:
        """Records carry their augmentation seed (resumable order, random per-record preset)."""
        return self.order is not None and self.decoder.random and not self.decoder.batched

    @property
    def deterministic(self) -> bool:
        return bool(self.config.deterministic)

    @property
    def ordered_read(self) -> bool:
        """Record sharding needs every pipeline to see the same record order before the split."""
        return self.shard_by == "record"

    @property
    def verify(self) -> bool:
        """Check each shard was read to its end: needs a manifest count or an uncompressed size."""
        return self.config.verify_shards and (
            self.source.manifest is not None or self.source.compression == ""
        )

    @property
    def parse_in_decode(self) -> bool:
        """Per-record presets parse inside the decode map, so each record takes one map, as
        in the baseline pipeline, and the decode map fuses with the batch (tf.data's
        map_and_batch_fusion). skip_corrupt's filter needs parsed features before decode."""
        counting = self.counter is not None and self.decoder.check is not None
        return not self.decoder.batched and not counting

    @property
    def cycle(self) -> int:
        return max(1, min(self.config.cycle_length, self.read_files))

    @property
    def reader_buffer(self) -> int:
        """Read-ahead bytes per open file: the open files' buffers take at most 1/8 of the RAM budget."""
        cfg = self.config
        open_files = self.cycle if self.training else min(3, self.read_files)  # eval: one, plus two ahead
        return max(64 << 10, min(cfg.reader_buffer, cfg.resolved_ram_budget() // (8 * open_files)))

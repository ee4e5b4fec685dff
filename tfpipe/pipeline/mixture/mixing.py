"""How a mixture of datasets read with one batching is weighed, streamed and counted: `Mixing`,
asked of the batching (`Batching.mixing`); by records (`RecordMixing`) unless the modality has its
own (text's, in tfpipe/modalities/text/mixture/mixing.py: weights in tokens or documents, its
documents cut into pieces in virtual time and packed a source a row).

The plan (mixture/plan.py) weighs and checks the sources, then asks the mixing for what is its
own: the mixture's decoder and groups (`Mixed`), its read stage and any stage it replaces, the
last step a run may start at; the planned mixture (mixture/pipeline.py) asks it for each source's
start at a step, the fill, an epoch and what describe() says of them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from tfpipe._tf import Tensor
from tfpipe.packing.spec import Mode
from tfpipe.pipeline.mixture import spec as mixture_spec
from tfpipe.pipeline.mixture import stream as mixture_stream
from tfpipe.pipeline.mixture.spec import BLOCK, MixSpec
from tfpipe.pipeline.order import resumable
from tfpipe.pipeline.stages.batching import batching_of
from tfpipe.pipeline.stages.stage import StageFn, StagePlan

if TYPE_CHECKING:
    from tfpipe.pipeline.stages.pipeline import Pipeline
    from tfpipe.presets.base import Decoder


@dataclasses.dataclass(frozen=True)
class Mixed:
    """What a mixing plans of a mixture beside its spec.

    Attributes:
      decoder: the mixture's decoder (text: its packing with the mix's histogram and mean).
      identity: what a resumed run must share of it, beside the sources' orders.
      blocks: items each source's scan takes a step (about its share of a group).
      chunk: positions a chunk of the mixed stream holds (text by documents), else 0.
      own: the mixing's own plan, which its methods read back (text: its cut and sources).
    """

    decoder: Decoder
    identity: dict[str, Any]
    blocks: tuple[int, ...]
    chunk: int = 0
    own: object = None


class MixedPipeline(Protocol):
    """What a mixing reads of a planned mixture (mixture/pipeline.py's `MixturePipeline`, a floor
    above this one)."""

    @property
    def mix(self) -> MixSpec: ...
    @property
    def decoder(self) -> Decoder: ...
    @property
    def parts(self) -> tuple[Pipeline, ...]: ...
    @property
    def reads(self) -> tuple[mixture_stream.SourceRead, ...]: ...
    @property
    def chunk(self) -> int: ...
    @property
    def own(self) -> object: ...


class Mixing(Protocol):
    """How a mixture of datasets read with one batching (`Batching.mixing`) is weighed and
    streamed: by records (`RecordMixing`, the default) or in a modality's own units (text:
    tokens or documents).

    Attributes:
      by: what the weights may share, the default first (`mix_by`).
      by_words: those, for a refusal.
      unit: what a position of a source's stream is ("records", "documents").
    """

    @property
    def by(self) -> tuple[str, ...]: ...

    @property
    def by_words(self) -> str: ...

    @property
    def unit(self) -> str: ...

    def size(self, p: Pipeline, by: str) -> float:
        """A source's size in `by` (its default weight)."""
        ...

    def source_extra(self, p: Pipeline) -> object:
        """What the mixed stream needs of a source besides its order (`SourceRead.lengths`)."""
        ...

    def mixed(self, mix: MixSpec, decoder: Decoder, parts: Sequence[Pipeline]) -> Mixed:
        """The mixture's decoder, groups and identity (`Mixed`)."""
        ...

    def read(
        self,
        mix: MixSpec,
        reads: Sequence[mixture_stream.SourceRead],
        plan: StagePlan,
        start: Callable[[], Tensor],
        mixed: Mixed,
        per_step: int,
    ) -> StageFn:
        """The mixture's "interleave" stage, from the step `start()` gives."""
        ...

    def replaced(self, mix: MixSpec, plan: StagePlan) -> dict[str, StageFn]:
        """The stages the mixture runs in place of its first source's, by name."""
        ...

    def limit(self, mix: MixSpec, parts: Sequence[Pipeline], mixed: Mixed, per_step: int) -> int:
        """The last step a run of the mixture can start at."""
        ...

    def starts_at(self, pipe: MixedPipeline, step: int, per_step: int) -> list[int]:
        """Each source's items of this input pipeline before the group holding step `step`."""
        ...

    def predicted_fill(self, pipe: MixedPipeline, L: int | None, mode: Mode | None) -> float:
        """The fill predicted from the mix (text), at another L or mode when given; else 0."""
        ...

    def epoch_units(self, pipe: MixedPipeline) -> int:
        """What one epoch of the mixture holds in units of a batch (rows, records)."""
        ...

    def how(self, pipe: MixedPipeline) -> list[str]:
        """What describe() says of the mixture's groups, fill and epoch."""
        ...

    def replaces(self, note: str) -> bool:
        """A source's own note the mixture leaves out (text: its chunks, its fill)."""
        ...


def blocks(per_group: Sequence[float]) -> tuple[int, ...]:
    """Items each source's scan takes a step from its items a group, within [16, 4096]: a
    step's fixed cost once a group."""
    return tuple(int(min(4096, max(16, n))) for n in per_group)


class RecordMixing:
    """A mixture of records (images, tables): weights in records, one record a position."""

    by: tuple[str, ...] = ("records",)
    by_words = "records (images, tables)"
    unit = "records"

    def size(self, p: Pipeline, by: str) -> float:
        return float(p.source.examples or 0)

    def source_extra(self, p: Pipeline) -> None:
        return None

    def mixed(self, mix: MixSpec, decoder: Decoder, parts: Sequence[Pipeline]) -> Mixed:
        return Mixed(decoder, {}, blocks([BLOCK * w for w in mix.shares()]))

    def read(
        self,
        mix: MixSpec,
        reads: Sequence[mixture_stream.SourceRead],
        plan: StagePlan,
        start: Callable[[], Tensor],
        mixed: Mixed,
        per_step: int,
    ) -> StageFn:
        """The mixed records (batched for batched presets)."""
        return lambda _: mixture_stream.records(
            mix,
            list(reads),
            start,
            positions_per_step=per_step,
            keys=plan.keyed,
            needs_source=plan.decoder.needs_source,
            batch=plan.batch_size if plan.decoder.batched else None,
        )

    def replaced(self, mix: MixSpec, plan: StagePlan) -> dict[str, StageFn]:
        return {}

    def limit(self, mix: MixSpec, parts: Sequence[Pipeline], mixed: Mixed, per_step: int) -> int:
        return resumable.MAX_POSITION // per_step

    def starts_at(self, pipe: MixedPipeline, step: int, per_step: int) -> list[int]:
        return mixture_spec.counts(pipe.mix.rates, (step * per_step // BLOCK) * BLOCK)

    def predicted_fill(self, pipe: MixedPipeline, L: int | None, mode: Mode | None) -> float:
        return 0.0

    def epoch_units(self, pipe: MixedPipeline) -> int:
        """Records of one epoch: until the source that takes longest at its weight has been read
        whole."""
        examples = [p.source.examples or 0 for p in pipe.parts]
        return math.ceil(max(n / w for w, n in zip(pipe.mix.shares(), examples, strict=True)))

    def how(self, pipe: MixedPipeline) -> list[str]:
        return [
            f"one epoch of the mixture (until every source was read whole): {self.epoch_units(pipe):,} records"
        ]

    def replaces(self, note: str) -> bool:
        return False


RECORD_MIXING: Mixing = RecordMixing()


def mixing_of(decoder: Decoder) -> Mixing:
    """How a mixture of the decoder's datasets is weighed and streamed: its batching's, or by
    records."""
    mixing: Mixing | None = batching_of(decoder).mixing
    return mixing if mixing is not None else RECORD_MIXING

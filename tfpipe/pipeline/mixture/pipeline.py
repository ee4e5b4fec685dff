"""What `plan()` returns for a mixture: `MixturePipeline`, the mixed stream with its sources'
own pipelines and the mixture's own numbers; `MixtureEval`, a mixture's evaluation.

Evaluating a mixture: every record (document) of every source exactly once, source after
source, each source as `build(path, training=False)` reads it (in source order, the last batch
padded where eval pads). A user's eval needs a fixed, finite set; the union of the sources' eval
splits is one, whatever the weights, and its loss weighs each source by its size. The weights
shape what a model trains on, not what it is measured on: to see each source's own loss,
evaluate each source on its own (`MixtureEval.parts`, or `build(path, training=False)`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tfpipe._tf import Dataset
from tfpipe.pipeline.mixture import stream as mixture_stream
from tfpipe.pipeline.mixture.mixing import Mixing, mixing_of
from tfpipe.pipeline.mixture.spec import MIXTURE_VERSION, MixSpec
from tfpipe.pipeline.order.resumable import ORDER_VERSION
from tfpipe.pipeline.stages.pipeline import Pipeline


@dataclasses.dataclass(frozen=True)
class MixturePipeline(Pipeline):
    """A planned mixture: the `Pipeline` of the mixed stream, with its sources' own pipelines.
    What is its modality's own (its groups, fill and epoch) it asks its mixing
    (mixture/mixing.py).

    Attributes:
      mixture: the choice function's spec (names, weights, rates, seed).
      parts: each source's own Pipeline (its order, files, notes), in `mixture.names` order.
      chunk: positions a chunk of the mixed stream holds (text by documents), else 0.
      reads: how each source is streamed (its order, reader, cache, lengths file).
      own: its mixing's own plan (`Mixed.own`; text: its cut and sources), else None.
    """

    mixture: MixSpec | None = None
    parts: tuple[Pipeline, ...] = ()
    chunk: int = 0
    reads: tuple[mixture_stream.SourceRead, ...] = ()
    own: Any = None

    @property
    def mix(self) -> MixSpec:
        assert self.mixture is not None
        return self.mixture

    @property
    def mixing(self) -> Mixing:
        return mixing_of(self.decoder)

    def _per_step(self) -> int:
        o = self.parts[0].order
        assert o is not None
        return o.global_batch // o.pipelines

    def starts_at(self, step: int) -> list[int]:
        """Each source's items (documents for text, records otherwise) of this input pipeline
        before training step `step`: for text, before the chunk holding the step's first row
        (found by walking the chunks before it, lengths only)."""
        return self.mixing.starts_at(self, step, self._per_step())

    def epochs_at(self, step: int) -> dict[str, int]:
        """Each source's epoch (passes over its data begun, from 0) at training step `step`:
        its items before the step over its items an epoch."""
        return {
            name: count // _examples(part)
            for name, count, part in zip(self.mix.names, self.starts_at(step), self.parts, strict=True)
        }

    def predicted_fill(self, sequence_length: int | None = None, mode: Any = None) -> float:
        """The mixture's fill (real tokens / slots) predicted from the mix, at another L or mode
        when given; 0.0 for records."""
        return self.mixing.predicted_fill(self, sequence_length, mode)

    def epoch_rows(self) -> int:
        """Rows (text) or records of one epoch of the mixture, globally: until the source that
        takes longest at its weight has been read whole."""
        return self.mixing.epoch_units(self)

    def describe(self) -> str:
        mix = self.mix
        unit = {"tokens": "tokens", "documents": "documents", "records": "records"}[mix.mix_by]
        lines = [
            f"tfpipe mixture of {len(mix.names)} sources, preset {self.preset.name!r}, weights in {unit}, "
            f"batch {self.batch_size} (training), seed {self.config.seed}, starting at "
            + ("the step of its Position" if self.position is not None else f"step {self.start_step}")
            + f" (order version {ORDER_VERSION}, mixture version {MIXTURE_VERSION})"
        ]
        epochs = self.epochs_at(self.start_step) if self.position is None else None
        what = self.mixing.unit
        for s, (name, part) in enumerate(zip(mix.names, self.parts, strict=True)):
            lines.append(
                f"  {name}: weight {mix.weights[s]:.3f} (rate {mix.rates[s]} of {mix.total}), "
                f"{part.source.where}, {_examples(part):,} {what} an epoch"
                + (f", epoch {epochs[name]} at the start" if epochs is not None else "")
            )
        lines.append(
            "  each source's items are merged in order of virtual time (weighted fair queueing, exact "
            "rates): a small source repeats while the large ones go on; its epoch at step K follows "
            "from K (mixture/spec.py)"
        )
        lines += [f"  {line}" for line in self.mixing.how(self)]
        return "\n".join(lines + [f"  note: {n}" for n in self.notes])


def _examples(part: Pipeline) -> int:
    """Items of one epoch of a source's stream on this input pipeline."""
    o = part.order
    assert o is not None
    return o.examples // o.pipelines if o.by_record else o.examples


@dataclasses.dataclass(frozen=True)
class MixtureEval(Pipeline):
    """A mixture's evaluation: its sources' eval pipelines read one after another.

    Attributes:
      names: the sources' names.
      parts: each source's own eval Pipeline.
    """

    names: tuple[str, ...] = ()
    parts: tuple[Pipeline, ...] = ()

    def dataset(
        self, upto: str | int | None = None, *, threadpool_size: int | None = None, options: bool = True
    ) -> Dataset:
        """Each source's eval dataset (`Pipeline.dataset` of its stages through `upto`), one
        after another: every record of every source once."""
        out = None
        for part in self.parts:
            ds = part.dataset(upto, threadpool_size=threadpool_size, options=options)
            out = ds if out is None else out.concatenate(ds)
        return out

    def describe(self) -> str:
        lines = [
            f"tfpipe mixture evaluation of {len(self.parts)} sources, preset {self.preset.name!r}, batch "
            f"{self.batch_size}: every record of every source once, source after source (the weights "
            "do not apply: a fixed, finite set; evaluate a source on its own for its own loss)"
        ]
        for name, part in zip(self.names, self.parts, strict=True):
            lines.append(f"  {name}: {part.source.where}, {part.source.examples or 0:,} records")
        return "\n".join(lines + [f"  note: {n}" for n in self.notes])

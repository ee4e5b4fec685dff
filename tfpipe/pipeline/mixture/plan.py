"""`build({"web": PATH, "code": PATH}, weights=...)`: a weighted mixture of datasets, in the
resumable order, packed across sources for text, sharded per host like one dataset.

Each source is planned as one dataset would be (`plan()` of its path, with a seed of its own
drawn from the pipeline's), and refused unless the sources agree: one preset, one schema, for
text one tokenizer (its fingerprint) and one packing. The mixture replaces the first source's
"interleave" stage by the mixed stream (mixture/stream.py); every later stage (parse, decode or
pack, batch, map) is the first source's, which the agreement makes every source's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from tfpipe import storage
from tfpipe._tf import Tensor, tf
from tfpipe.errors import ConfigError, TfpipeError
from tfpipe.modalities import modality_of_records
from tfpipe.pipeline import checks
from tfpipe.pipeline.mixture import spec as mixture_spec
from tfpipe.pipeline.mixture import stream as mixture_stream
from tfpipe.pipeline.mixture.spec import BLOCK, MixSpec
from tfpipe.pipeline.order import resumable
from tfpipe.pipeline.order.resumable import ORDER_VERSION
from tfpipe.pipeline.read.resolve import resolve
from tfpipe.pipeline.stages.batching import batching_of
from tfpipe.pipeline.stages.pipeline import Pipeline, make_stages
from tfpipe.pipeline.stages.read import read_calls, shard_reader
from tfpipe.pipeline.stages.stage import StageFn, StagePlan
from tfpipe.presets.base import Decoder
from tfpipe.validation import as_int

if TYPE_CHECKING:
    from tfpipe.pipeline.order.position import Position  # imports TensorFlow
    from tfpipe.pipeline.order.resumable import OrderSpec
    from tfpipe.pipeline.stages.stage import StagePlan
    from tfpipe.presets import Decoder


class Mixing(Protocol):
    """How a mixture of datasets read with one batching (`Batching.mixing`) is weighed and
    streamed: by records (`RecordMixing`, the default) or in a modality's own units (text:
    tokens or documents, its documents chunked and packed across the sources).

    Attributes:
      by: what the weights may share, the default first (`mix_by`).
      by_words: those, for a refusal.
      unit: what a position of the mixed stream is ("records", "documents").
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

    def weight_unit(self, p: Pipeline, by: str) -> float:
        """`by`s a position of a source's stream holds (a document's mean tokens), else 1."""
        ...

    def source_extra(self, p: Pipeline) -> Any:
        """What the mixed stream needs of a source besides its order (`SourceRead.lengths`)."""
        ...

    def mixed(
        self, decoder: Decoder, parts: Sequence[Pipeline], quotas: Sequence[int]
    ) -> tuple[Decoder, int, dict[str, Any]]:
        """(the mixture's decoder, positions a chunk of its stream or 0, what a resumed run must
        share of it)."""
        ...

    def read(
        self, mix: MixSpec, reads: Sequence[Any], p0: StagePlan, start: Any, size: int, per_step: int
    ) -> StageFn:
        """The mixture's "interleave" stage, from the step `start()` gives."""
        ...

    def position(self, pipe: Any, step: int, per_step: int) -> int:
        """The mixed stream's position where this input pipeline's step `step` begins."""
        ...

    def notes(self, size: int) -> tuple[str, ...]: ...

    def replaces(self, note: str) -> bool:
        """A source's note the mixture's own replace."""
        ...


class RecordMixing:
    """A mixture of records (images, tables): weights in records, one record a position."""

    by: tuple[str, ...] = ("records",)
    by_words = "records (images, tables)"
    unit = "records"

    def size(self, p: Pipeline, by: str) -> float:
        return float(p.source.examples or 0)

    def weight_unit(self, p: Pipeline, by: str) -> float:
        return 1.0

    def source_extra(self, p: Pipeline) -> Any:
        return None

    def mixed(
        self, decoder: Decoder, parts: Sequence[Pipeline], quotas: Sequence[int]
    ) -> tuple[Decoder, int, dict[str, Any]]:
        return decoder, 0, {}

    def read(
        self, mix: MixSpec, reads: Sequence[Any], p0: StagePlan, start: Any, size: int, per_step: int
    ) -> StageFn:
        """The mixed records (batched for batched presets)."""
        return lambda _: mixture_stream.records(
            mix,
            list(reads),
            start,
            positions_per_step=per_step,
            keys=p0.keyed,
            needs_source=p0.decoder.needs_source,
            batch=p0.batch_size if p0.decoder.batched else None,
        )

    def position(self, pipe: Any, step: int, per_step: int) -> int:
        return step * per_step

    def notes(self, size: int) -> tuple[str, ...]:
        return ()

    def replaces(self, note: str) -> bool:
        return False


RECORD_MIXING: Mixing = RecordMixing()


def mixing_of(decoder: Decoder) -> Mixing:
    """How a mixture of the decoder's datasets is weighed and streamed: its batching's, or by
    records."""
    mixing: Mixing | None = batching_of(decoder).mixing
    return mixing if mixing is not None else RECORD_MIXING


@dataclasses.dataclass(frozen=True)
class MixturePipeline(Pipeline):
    """A planned mixture: the `Pipeline` of the mixed stream, with its sources' own pipelines.

    Attributes:
      mixture: the choice function's spec (names, weights, quotas, seed).
      parts: each source's own Pipeline (its order, files, notes), in `mixture.names` order.
      chunk: documents per chunk (text), else 0.
      reads: how each source is streamed (its order, reader, cache, lengths file).
    """

    mixture: MixSpec | None = None
    parts: tuple[Pipeline, ...] = ()
    chunk: int = 0
    reads: tuple[mixture_stream.SourceRead, ...] = ()

    def positions_at(self, step: int) -> int:
        """The mixed stream's position (documents for text, records otherwise) where this
        input pipeline's step `step` begins; for text, the first document of the chunk holding
        the step's first row (found by walking the chunks before it, lengths only)."""
        o = self.parts[0].order
        assert o is not None and self.mixture is not None
        return mixing_of(self.plan.decoder).position(self, step, o.global_batch // o.pipelines)

    def epochs_at(self, step: int) -> dict[str, int]:
        """Each source's epoch (passes over its data begun, from 0) at training step `step`:
        its count of the mixed stream's positions before the step over its records an epoch."""
        g = self.positions_at(step)
        mix = self.mixture
        assert mix is not None
        return {
            name: c * part.order.pipelines // part.order.examples  # type: ignore[union-attr]
            if part.order.by_record  # type: ignore[union-attr]
            else c // part.order.examples  # type: ignore[union-attr]
            for name, c, part in zip(mix.names, mixture_spec.counts(mix, g), self.parts, strict=True)
        }

    def describe(self) -> str:
        mix = self.mixture
        assert mix is not None
        unit = {"tokens": "tokens", "documents": "documents", "records": "records"}[mix.mix_by]
        lines = [
            f"tfpipe mixture of {len(mix.names)} sources, preset {self.preset.name!r}, weights in {unit}, "
            f"batch {self.batch_size} (training), seed {self.config.seed}, starting at "
            + ("the step of its Position" if self.position is not None else f"step {self.start_step}")
            + f" (order version {ORDER_VERSION})"
        ]
        epochs = self.epochs_at(self.start_step) if self.position is None else None
        for s, (name, part) in enumerate(zip(mix.names, self.parts, strict=True)):
            o = part.order
            assert o is not None
            what = mixing_of(self.decoder).unit
            lines.append(
                f"  {name}: weight {mix.weights[s]:.3f} ({mix.quotas[s]} of every {BLOCK} positions, "
                f"expected share {mix.shares()[s]:.3f}), {part.source.where}, {o.examples:,} {what} an "
                "epoch" + (f", epoch {epochs[name]} at the start" if epochs is not None else "")
            )
        lines.append(
            "  each source's epoch at step K: its positions before K (closed form, mixture_spec.counts) "
            "over its records an epoch; a small source repeats while the large ones go on"
        )
        return "\n".join(lines + [f"  note: {n}" for n in self.notes])


def plan_mixture(
    data: Mapping[str, str | Sequence[str]],
    *,
    weights: Mapping[str, float] | None,
    mix_by: str | None,
    plan_one: Callable[..., Pipeline],
    start_step: int | Position,
    **kwargs: Any,
) -> MixturePipeline:
    """Plans a mixture: each source planned by `plan_one` (build.plan for one dataset), checked
    to agree, and the mixed stream put in place of the first source's read.

    Raises:
      ConfigError: fewer than two sources, bad weights or mix_by, sources of different kinds
        (text, images, tables) or that differ (preset, schema, tokenizer, packing), one dataset
        under two names, eval (training=False), an order other than resumable.
    """
    names = _names(data)
    given = mixture_spec.check_weights(names, weights)
    if kwargs.get("training", True) is not True:
        raise ConfigError(
            "A mixture is a training stream (weighted, endless); evaluate each source on its own "
            "with build(path, training=False). Received: training=False"
        )
    position, step = resumable.parse_start(start_step)
    seed = kwargs.pop("seed", None)
    config = kwargs.get("config")
    if seed is None and config is not None:
        seed = getattr(config, "seed", None)
    if kwargs.pop("order", "resumable") != "resumable":
        raise ConfigError(
            "A mixture is in the resumable order (a function of the seed and the step); pass no order=."
        )
    if seed is None and (position is not None or step > 0):
        raise ConfigError("start_step needs seed=: the mixture is a function of the seed and the step.")
    seed = resumable.draw_seed() if seed is None else seed
    if as_int(seed) is None:
        raise ConfigError(f"seed must be an int. Received: {seed!r}")
    service = kwargs.pop("service", None)
    checks.check_mixture_service(service, position, config, kwargs.get("processing_mode"))
    _check_one_kind(
        names, data, kwargs.get("split", getattr(config, "split", None)), kwargs.get("training", True)
    )
    parts = tuple(
        plan_one(
            data[n], start_step=0, seed=mixture_spec.source_seed(int(seed), n), order="resumable", **kwargs
        )
        for n in names
    )
    _check_distinct(names, parts)
    _check_agree(names, parts)
    mixing = mixing_of(parts[0].decoder)
    by = _mix_by(mix_by, mixing)
    sizes = {n: mixing.size(p, by) for n, p in zip(names, parts, strict=True)}
    units = [mixing.weight_unit(p, by) for p in parts]
    mix = mixture_spec.make(names, given or sizes, by, units, int(seed))
    return _assemble(mix, parts, position, step, int(seed), service)


def _names(data: Mapping[str, str | Sequence[str]]) -> list[str]:
    names = list(data)
    if len(names) < 2 or not all(isinstance(n, str) and n for n in names):
        raise ConfigError(
            "A mixture is a mapping of at least two names (non-empty strings) to datasets, e.g. "
            f"{{'web': PATH, 'code': PATH}}. Received: {list(names)!r}"
        )
    return names


def _mix_by(mix_by: Any, mixing: Mixing) -> mixture_spec.MixBy:
    if mix_by is None:
        return mixing.by[0]  # type: ignore[return-value]
    if mix_by not in mixing.by:
        raise ConfigError(
            f"mix_by must be one of {list(mixing.by)} for {mixing.by_words}. Received: mix_by={mix_by!r}"
        )
    return mix_by


def _check_one_kind(
    names: list[str], data: Mapping[str, str | Sequence[str]], split: str | None, training: bool
) -> None:
    """Refuses sources of different modalities (text, images, tables) by name before each is
    planned: planned one by one, the second would refuse the first's options (sequence_length
    for images), naming an option rather than the mixture's sources."""
    kinds = []
    for n in names:
        try:
            src = resolve(data[n], split=split, training=training)
        except (TfpipeError, TypeError, ValueError):
            return  # planning the source names what is wrong with it
        modality = modality_of_records(src.manifest, src.keys, src.tfds)
        kinds.append((n, src.where, modality.name if modality is not None else None))
    known = [k for k in kinds if k[2] is not None]
    for n, where, kind in known[1:]:
        if kind != known[0][2]:
            a = known[0]
            raise ConfigError(
                f"The sources of a mixture must be one kind of data (text, images or tables): "
                f"{a[0]!r} ({a[1]}) is {a[2]}, {n!r} ({where}) is {kind}. Mix datasets of one kind, "
                "or train on them separately."
            )


def _check_distinct(names: list[str], parts: tuple[Pipeline, ...]) -> None:
    """Refuses two sources that read the same files (one dataset under two names or spellings:
    P and P/, relative and absolute): each document would be read twice as often as weighed."""
    owner: dict[str, int] = {}
    for i, p in enumerate(parts):
        for f in map(storage.resolved, p.source.files):
            j = owner.setdefault(f, i)
            if j != i:
                a, b = parts[j].source.where, p.source.where
                raise ConfigError(
                    f"The sources of a mixture must be different data: {names[j]!r} ({a}) and "
                    f"{names[i]!r} ({b}) both read {f}, so each of its records (documents, for text) "
                    "would be read under two names, twice as often as weighed. Name each dataset "
                    "once (and weigh it more to see it more often)."
                )


def _check_agree(names: list[str], parts: tuple[Pipeline, ...]) -> None:
    """Refuses sources that would not mix: another preset, schema, tokenizer or packing."""
    first, a = parts[0], names[0]
    for name, p in zip(names[1:], parts[1:], strict=True):
        for what, mine, theirs in _traits(first, p):
            if mine != theirs:
                raise ConfigError(
                    f"The sources of a mixture must share {what}: {a!r} ({first.source.where}) has "
                    f"{mine!r}, {name!r} ({p.source.where}) has {theirs!r}. Mix datasets converted "
                    "alike (one tokenizer, one schema), or train on them separately."
                )


def _traits(a: Pipeline, b: Pipeline) -> list[tuple[str, object, object]]:
    def tok(p: Pipeline) -> str | None:
        m = p.source.manifest
        return m.tokenizer.fingerprint if m is not None and m.tokenizer is not None else None

    def schema(p: Pipeline) -> object:
        s = p.source.schema
        return (
            None if s is None else ([(f.name, str(f.dtype), tuple(f.shape or ())) for f in s.fields], s.label)
        )

    def packing(p: Pipeline) -> object:
        return batching_of(p.decoder).identity()

    return [
        ("a preset", a.preset.name, b.preset.name),
        ("a tokenizer (its file's fingerprint)", tok(a), tok(b)),
        ("a schema (features, dtypes, shapes, label)", schema(a), schema(b)),
        ("a packing (sequence_length, packing, truncate, eos)", packing(a), packing(b)),
    ]


def _assemble(
    mix: MixSpec,
    parts: tuple[Pipeline, ...],
    position: Position | None,
    step: int,
    seed: int,
    service: str | None,
) -> MixturePipeline:
    """The mixture's Pipeline: the first source's stages with the mixed stream as its read."""
    first = parts[0]
    p0, o0 = first.plan, first.order
    assert o0 is not None
    mixing = mixing_of(p0.decoder)
    per_step = o0.global_batch // o0.pipelines
    if position is not None or step > 0:
        _check_resumable(o0, p0.batch_size)
    reads = tuple(_source_read(p, mixing) for p in parts)
    identity: dict[str, Any] = {
        "order_version": ORDER_VERSION,
        "data": [p.order.identity()["data"] for p in parts],  # type: ignore[union-attr]
        "batch_size": o0.global_batch,
        "seed": seed,
        "input_pipelines": o0.pipelines,
        "mixture": mix.identity(),
        "sources": [p.order.identity() for p in parts],  # type: ignore[union-attr]
    }
    decoder, size, shared = mixing.mixed(p0.decoder, parts, mix.quotas)
    identity |= shared
    start = _start_fn(position, step, identity, per_step)
    config = dataclasses.replace(p0.config, seed=seed)
    batching = batching_of(decoder)
    plan = dataclasses.replace(
        p0, decoder=decoder, batching=batching, start=start, config=config, service=service
    )
    make = mixing.read(mix, reads, plan, start, size, per_step)
    made = tuple(dataclasses.replace(s, fn=make) if s.name == "interleave" else s for s in make_stages(plan))
    notes = _notes(mix, parts, mixing, size, service)
    return MixturePipeline(
        stages=made,
        plan=plan,
        global_batch_size=first.global_batch_size,
        preset=first.preset,
        notes=notes,
        position=position,
        start_step=step,
        mixture=mix,
        parts=parts,
        chunk=size,
        reads=reads,
    )


def _notes(
    mix: MixSpec, parts: tuple[Pipeline, ...], mixing: Mixing, size: int, service: str | None
) -> tuple[str, ...]:
    """Each source's notes by name (but those the mixture's replace: its own chunking), with
    the mixture's own and its service."""
    notes = tuple(
        f"{n}: {note}"
        for n, p in zip(mix.names, parts, strict=True)
        for note in p.notes
        if not mixing.replaces(note)
    )
    notes = (*mixing.notes(size), *notes)
    if service is not None:
        notes += (
            f"service={service}: the whole mixed stream runs on the job's workers (parallel_epochs): "
            "exact, start_step included, with one worker a job; each further worker yields the "
            "whole stream again",
        )
    return notes


def _source_read(p: Pipeline, mixing: Mixing) -> mixture_stream.SourceRead:
    read = shard_reader(p.plan)
    return mixture_stream.SourceRead(
        spec=p.order,
        read=lambda path, size, count: read(path, size, count, grouped=True),
        cached=p.cache == "memory",
        parallelism=read_calls(p.plan),
        lengths=mixing.source_extra(p),
    )


def _check_resumable(o: OrderSpec, per_replica: int) -> None:
    """A start needs each input pipeline to consume the same whole batches a step."""
    if o.pipelines > 1 and (o.global_batch % o.pipelines or (o.global_batch // o.pipelines) % per_replica):
        raise ConfigError(
            f"start_step with {o.pipelines} input pipelines needs each to consume the same whole "
            f"number of batches per step: batch_size={o.global_batch} does not split into "
            f"{o.pipelines} shares of whole per-replica batches of {per_replica}."
        )


def _start_fn(
    position: Position | None, step: int, identity: dict[str, Any], per_step: int
) -> Callable[[], Tensor]:
    """The step the mixture starts at: fixed, or the Position's (read when an iterator starts)."""
    tf_ = tf()
    limit = resumable.MAX_POSITION // per_step
    if position is None:
        if step > limit:
            raise ConfigError(
                f"start_step must be an int in [0, {limit}] or a tfpipe.Position: the mixed stream's "
                f"position stays within 2**62. Received: start_step={step}"
            )
        fixed = lambda: tf_.constant(step, tf_.int64)  # noqa: E731
        fixed.step = step  # type: ignore[attr-defined]
        return fixed
    position.bind(identity)

    def start() -> Tensor:
        value = tf_.cast(position.read(), tf_.int64)
        check = tf_.debugging.assert_less_equal(value, tf_.constant(limit, tf_.int64))
        with tf_.control_dependencies([check]):
            return tf_.identity(value)

    return start

"""`build({"web": PATH, "code": PATH}, weights=...)`: a weighted mixture of datasets, in the
resumable order, sharded per host like one dataset.

Each source is planned as one dataset would be (`plan()` of its path, with a seed of its own
drawn from the pipeline's), and refused unless the sources agree: one preset, one schema, for
text one tokenizer (its fingerprint) and one packing. The mixture replaces the first source's
"interleave" stage by the mixed stream its batching's `Mixing` makes (mixture/mixing.py: by
records, or the modality's own); every later stage (parse, decode or pack, batch, map) is the
first source's, which the agreement makes every source's, but those the mixing replaces (text's
pack and batch).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tfpipe import storage
from tfpipe._tf import Tensor, tf
from tfpipe.errors import ConfigError, TfpipeError
from tfpipe.modalities import modality_of_records
from tfpipe.pipeline import checks
from tfpipe.pipeline.mixture import spec as mixture_spec
from tfpipe.pipeline.mixture import stream as mixture_stream
from tfpipe.pipeline.mixture.mixing import Mixing, mixing_of
from tfpipe.pipeline.mixture.spec import MIXTURE_VERSION, MixSpec
from tfpipe.pipeline.order import resumable
from tfpipe.pipeline.order.resumable import ORDER_VERSION
from tfpipe.pipeline.read.resolve import resolve
from tfpipe.pipeline.stages.batching import batching_of
from tfpipe.pipeline.stages.pipeline import Pipeline, make_stages
from tfpipe.pipeline.stages.read import read_calls, shard_reader
from tfpipe.validation import as_int

if TYPE_CHECKING:
    # Imported where they are made: at module level this import makes mypy 2.4 report tfpipe's
    # own `build` as defined twice (tfpipe/__init__.py), an artefact of its import-cycle order.
    from tfpipe.pipeline.mixture.pipeline import MixtureEval, MixturePipeline
    from tfpipe.pipeline.order.position import Position  # imports TensorFlow
    from tfpipe.pipeline.order.resumable import OrderSpec


def plan_mixture(
    data: Mapping[str, str | Sequence[str]],
    *,
    weights: Mapping[str, float] | None,
    mix_by: str | None,
    plan_one: Callable[..., Pipeline],
    start_step: int | Position,
    **kwargs: Any,
) -> MixturePipeline | MixtureEval:
    """Plans a mixture: each source planned by `plan_one` (build.plan for one dataset), checked
    to agree, and the mixed stream put in place of the first source's read.

    With training=False, the mixture's evaluation: every record of every source once, source
    by source (`MixtureEval`).

    Raises:
      ConfigError: fewer than two sources, bad weights or mix_by, sources of different kinds
        (text, images, tables) or that differ (preset, schema, tokenizer, packing), one dataset
        under two names, an order other than resumable, a start_step for eval.
    """
    names = _names(data)
    given = mixture_spec.check_weights(names, weights)
    position, step = resumable.parse_start(start_step)
    if kwargs.get("training", True) is not True:
        return _evaluation(data, names, plan_one, position, step, kwargs)
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
    mix = mixture_spec.make(names, given or sizes, by, int(seed))
    return _assemble(mix, parts, position, step, int(seed), service)


def _evaluation(
    data: Mapping[str, Any],
    names: list[str],
    plan_one: Callable[..., Pipeline],
    position: Any,
    step: int,
    kwargs: Any,
) -> MixtureEval:
    """A mixture's evaluation: each source planned for eval as one dataset, read whole once,
    source after source (weights and mix_by do not apply: the set is fixed and finite)."""
    if position is not None or step:
        raise ConfigError(
            "A mixture's evaluation reads every record of every source once, from the start; it has "
            f"no start step. Received: start_step={position if position is not None else step!r}"
        )
    if kwargs.get("service") is not None:
        raise ConfigError("A mixture's evaluation runs here, not on the tf.data service: pass no service=.")
    kwargs = {k: v for k, v in kwargs.items() if k != "order"}
    _check_one_kind(names, data, kwargs.get("split", getattr(kwargs.get("config"), "split", None)), False)
    parts = tuple(plan_one(data[n], start_step=0, **kwargs) for n in names)
    _check_distinct(names, parts)
    _check_agree(names, parts)
    first = parts[0]
    from tfpipe.pipeline.mixture.pipeline import MixtureEval  # here, not at the top: see TYPE_CHECKING

    return MixtureEval(
        stages=first.stages,
        plan=first.plan,
        global_batch_size=first.global_batch_size,
        preset=first.preset,
        notes=tuple(f"{n}: {note}" for n, p in zip(names, parts, strict=True) for note in p.notes),
        names=tuple(names),
        parts=parts,
    )


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
    """The mixture's Pipeline: the first source's stages with the mixed stream as its read (and
    the stages its mixing replaces: text's pack and batch)."""
    first = parts[0]
    p0, o0 = first.plan, first.order
    assert o0 is not None
    mixing = mixing_of(p0.decoder)
    per_step = o0.global_batch // o0.pipelines
    if position is not None or step > 0:
        _check_resumable(o0, p0.batch_size)
    identity: dict[str, Any] = {
        "order_version": ORDER_VERSION,
        "mixture_version": MIXTURE_VERSION,
        "data": [p.order.identity()["data"] for p in parts],  # type: ignore[union-attr]
        "batch_size": o0.global_batch,
        "seed": seed,
        "pipelines": o0.pipelines,
        "mixture": mix.identity(),
        "sources": [p.order.identity() for p in parts],  # type: ignore[union-attr]
    }
    mixed = mixing.mixed(mix, p0.decoder, parts)
    identity |= mixed.identity
    reads = tuple(_source_read(p, mixing, b) for p, b in zip(parts, mixed.blocks, strict=True))
    start = _start_fn(position, step, identity, per_step, mixing.limit(mix, parts, mixed, per_step))
    config = dataclasses.replace(p0.config, seed=seed)
    decoder = mixed.decoder
    plan = dataclasses.replace(
        p0, decoder=decoder, batching=batching_of(decoder), start=start, config=config, service=service
    )
    replaced = {
        "interleave": mixing.read(mix, reads, plan, start, mixed, per_step),
        **mixing.replaced(mix, plan),
    }
    made = tuple(dataclasses.replace(s, fn=replaced.get(s.name, s.fn)) for s in make_stages(plan))
    from tfpipe.pipeline.mixture.pipeline import MixturePipeline  # here, not at the top: see TYPE_CHECKING

    return MixturePipeline(
        stages=made,
        plan=plan,
        global_batch_size=first.global_batch_size,
        preset=first.preset,
        notes=_notes(mix, parts, mixing, service),
        position=position,
        start_step=step,
        mixture=mix,
        parts=parts,
        chunk=mixed.chunk,
        reads=reads,
        own=mixed.own,
    )


def _notes(mix: MixSpec, parts: tuple[Pipeline, ...], mixing: Mixing, service: str | None) -> tuple[str, ...]:
    """Each source's notes by name (its own chunking and fill left out: the mixture chunks its
    stream and has its own), with the mixture's service."""
    kept = [[note for note in p.notes if not mixing.replaces(note)] for p in parts]
    every = [note for note in kept[0] if all(note in k for k in kept[1:])]  # said once
    notes = tuple(every) + tuple(
        f"{n}: {note}" for n, k in zip(mix.names, kept, strict=True) for note in k if note not in every
    )
    if service is not None:
        notes += (
            f"service={service}: the whole mixed stream runs on the job's workers (parallel_epochs): "
            "exact, start_step included, with one worker a job; each further worker yields the "
            "whole stream again",
        )
    return notes


def _source_read(p: Pipeline, mixing: Mixing, block: int) -> mixture_stream.SourceRead:
    read = shard_reader(p.plan)
    return mixture_stream.SourceRead(
        spec=p.order,
        read=lambda path, size, count: read(path, size, count, grouped=True),
        cached=p.cache == "memory",
        parallelism=read_calls(p.plan),
        lengths=mixing.source_extra(p),
        block=block,
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
    position: Position | None, step: int, identity: dict[str, Any], per_step: int, limit: int
) -> Callable[[], Tensor]:
    """The step the mixture starts at: fixed, or the Position's (read when an iterator starts).

    Raises:
      ConfigError: a fixed step beyond `limit` (a Position's is checked when it is read).
    """
    tf_ = tf()
    why = (
        "a mixture of text finds its start by walking the chunks before it, and keeps each "
        "source's tokens within int64"
    )
    if position is None:
        if step > limit:
            raise ConfigError(
                f"start_step must be an int in [0, {limit}] or a tfpipe.Position for this mixture: "
                f"{why}. Received: start_step={step}"
            )
        fixed = lambda: tf_.constant(step, tf_.int64)  # noqa: E731
        fixed.step = step  # type: ignore[attr-defined]
        return fixed
    position.bind(identity)

    def start() -> Tensor:
        value = tf_.cast(position.read(), tf_.int64)
        message = f"the step of the Position must be at most {limit} for this mixture: {why}"
        check = tf_.debugging.assert_less_equal(value, tf_.constant(limit, tf_.int64), message=message)
        with tf_.control_dependencies([check]):
            return tf_.identity(value)

    return start

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
from typing import TYPE_CHECKING, Any

from tfpipe import storage
from tfpipe._tf import Dataset, Tensor, tf
from tfpipe.errors import ConfigError, TfpipeError
from tfpipe.packing.spec import added_tokens, chunk_size
from tfpipe.pipeline import checks
from tfpipe.pipeline.config import PipelineConfig
from tfpipe.pipeline.mixture import spec as mixture_spec
from tfpipe.pipeline.mixture import stream as mixture_stream
from tfpipe.pipeline.mixture.spec import BLOCK, MixSpec
from tfpipe.pipeline.order import resumable
from tfpipe.pipeline.order.resumable import ORDER_VERSION
from tfpipe.pipeline.read.resolve import resolve
from tfpipe.pipeline.stages.pipeline import Pipeline, make_stages
from tfpipe.pipeline.stages.read import read_calls, shard_reader
from tfpipe.pipeline.text import lengths as text_lengths
from tfpipe.validation import as_int

if TYPE_CHECKING:
    from tfpipe.format.manifest_text import SplitText
    from tfpipe.pipeline.config import PipelineConfig
    from tfpipe.pipeline.order.position import Position  # imports TensorFlow
    from tfpipe.pipeline.order.resumable import OrderSpec
    from tfpipe.pipeline.stages.stage import StagePlan
    from tfpipe.presets import Decoder


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
        per_step = o.global_batch // o.pipelines
        if self.decoder.packing is None:
            return step * per_step
        if step == 0:
            return 0

        tf_ = tf()
        first, _ = mixture_stream.chunk_of(
            self.mixture,
            self.reads,
            self.decoder.packing,
            self.chunk,
            tf_.constant(step * per_step, tf_.int64),
        )
        return int(first) * self.chunk

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
            what = "documents" if self.decoder.packing is not None else "records"
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
    _check_service(service, position, config, kwargs.get("processing_mode"))
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
    text = parts[0].decoder.packing is not None
    by = _mix_by(mix_by, text)
    mix = mixture_spec.make(names, given or _sizes(names, parts, by), by, _units(parts, by), int(seed))
    return _assemble(mix, parts, position, step, int(seed), service)


def _check_service(
    service: str | None, position: Position | None, config: PipelineConfig | None, mode: str | None
) -> None:
    """Refuses what the tf.data service cannot run of a mixture: a Position (its variable lives
    in this process) and sharding modes that split the stream (its order is the mixture's)."""
    if service is None:
        return

    checks.check_service(service, config or PipelineConfig())
    if position is not None:
        raise ConfigError(
            "A mixture on the tf.data service starts at an int start_step: a Position's variable "
            "lives in this process, and the service's workers cannot read it. Pass "
            "start_step=position.step. Received: start_step=Position"
        )
    mode = mode or getattr(config, "processing_mode", "parallel_epochs")
    if mode != "parallel_epochs":
        raise ConfigError(
            "A mixture on the tf.data service runs whole on each worker (processing_mode="
            f"'parallel_epochs'), so its order holds. Received: processing_mode={mode!r}"
        )


def _names(data: Mapping[str, str | Sequence[str]]) -> list[str]:
    names = list(data)
    if len(names) < 2 or not all(isinstance(n, str) and n for n in names):
        raise ConfigError(
            "A mixture is a mapping of at least two names (non-empty strings) to datasets, e.g. "
            f"{{'web': PATH, 'code': PATH}}. Received: {list(names)!r}"
        )
    return names


def _mix_by(mix_by: str | None, text: bool) -> mixture_spec.MixBy:
    allowed: tuple[mixture_spec.MixBy, ...] = ("tokens", "documents") if text else ("records",)
    if mix_by is None:
        return allowed[0]
    for by in allowed:
        if mix_by == by:
            return by
    kind = "text (weights in tokens, or documents)" if text else "records (images, tables)"
    raise ConfigError(f"mix_by must be one of {list(allowed)} for {kind}. Received: mix_by={mix_by!r}")


def _sizes(names: list[str], parts: tuple[Pipeline, ...], by: str) -> dict[str, float]:
    """The default weights: each source's size (tokens, documents or records of its split)."""
    out = {}
    for name, p in zip(names, parts, strict=True):
        text = _split_text(p)
        size = text.tokens if by == "tokens" and text is not None else p.source.examples
        out[name] = float(size or 0)
    return out


def _units(parts: tuple[Pipeline, ...], by: str) -> list[float]:
    """Mean tokens a document as packed (with the EOS added) for mix_by="tokens", else 1s."""
    if by != "tokens":
        return [1.0] * len(parts)
    out = []
    for p in parts:
        text, pack = _split_text(p), p.decoder.packing
        assert text is not None and pack is not None  # mix_by="tokens" is text's
        out.append(text.tokens / text.documents + added_tokens(pack))
    return out


def _split_text(p: Pipeline) -> SplitText | None:
    src = p.source
    return src.manifest.split(src.split).text if src.manifest is not None and src.split is not None else None


def _check_one_kind(
    names: list[str], data: Mapping[str, str | Sequence[str]], split: str | None, training: bool
) -> None:
    """Refuses sources of different kinds (text, images, tables) by name before each is planned:
    planned one by one, the second would refuse the first's options (sequence_length for
    images), naming an option rather than the mixture's sources."""
    kinds = []
    for n in names:
        try:
            src = resolve(data[n], split=split, training=training)
        except (TfpipeError, TypeError, ValueError):
            return  # planning the source names what is wrong with it
        kinds.append((n, src.where, _kind(src)))
    known = [k for k in kinds if k[2] is not None]
    for n, where, kind in known[1:]:
        if kind != known[0][2]:
            a = known[0]
            raise ConfigError(
                f"The sources of a mixture must be one kind of data (text, images or tables): "
                f"{a[0]!r} ({a[1]}) is {a[2]}, {n!r} ({where}) is {kind}. Mix datasets of one kind, "
                "or train on them separately."
            )


def _kind(src: Any) -> str | None:
    """A resolved source's kind of data, from its manifest's layout or its image feature; None
    when its records do not say (foreign files without images)."""
    if src.manifest is not None:
        return {"table": "tables", "text": "text"}.get(src.manifest.layout, "images")
    if "image/encoded" in src.keys or (src.tfds is not None and src.tfds.image_key):
        return "images"
    return None


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
        return None if p.decoder.packing is None else p.decoder.packing.identity()

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
    pack = p0.decoder.packing
    per_step = o0.global_batch // o0.pipelines
    if position is not None or step > 0:
        _check_resumable(o0, p0.batch_size)
    reads = tuple(_source_read(p, pack is not None) for p in parts)
    identity: dict[str, Any] = {
        "order_version": ORDER_VERSION,
        "data": [p.order.identity()["data"] for p in parts],  # type: ignore[union-attr]
        "batch_size": o0.global_batch,
        "seed": seed,
        "input_pipelines": o0.pipelines,
        "mixture": mix.identity(),
        "sources": [p.order.identity() for p in parts],  # type: ignore[union-attr]
    }
    size, decoder = 0, p0.decoder
    if pack is not None:
        mean = sum(n * _mean_tokens(p) for n, p in zip(mix.quotas, parts, strict=True)) / BLOCK
        mixed_pack = dataclasses.replace(pack, mean_tokens=mean, histogram=None)
        size = chunk_size(mixed_pack)
        decoder = dataclasses.replace(decoder, packing=mixed_pack)
        identity |= mixed_pack.identity() | {"chunk": size}
    start = _start_fn(position, step, identity, per_step)
    make = _mixed_read(mix, reads, p0, decoder, start, size, per_step)
    config = dataclasses.replace(p0.config, seed=seed)
    plan = dataclasses.replace(p0, decoder=decoder, start=start, config=config, service=service)
    made = tuple(dataclasses.replace(s, fn=make) if s.name == "interleave" else s for s in make_stages(plan))
    notes = _notes(mix, parts, size if pack is not None else None, service)
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
    mix: MixSpec, parts: tuple[Pipeline, ...], chunk: int | None, service: str | None
) -> tuple[str, ...]:
    """Each source's notes by name (its own chunking left out: the mixture chunks its stream),
    with the mixture's chunks and service."""
    notes = tuple(
        f"{n}: {note}"
        for n, p in zip(mix.names, parts, strict=True)
        for note in p.notes
        if not note.startswith("text: chunks of")
    )
    if chunk is not None:
        notes = (f"text: chunks of {chunk} documents of the mixed stream, each packed on its own", *notes)
    if service is not None:
        notes += (
            f"service={service}: the whole mixed stream runs on the job's workers (parallel_epochs): "
            "exact, start_step included, with one worker a job; each further worker yields the "
            "whole stream again",
        )
    return notes


def _mixed_read(
    mix: MixSpec,
    reads: tuple[mixture_stream.SourceRead, ...],
    p0: StagePlan,
    decoder: Decoder,
    start: Callable[[], Tensor],
    size: int,
    per_step: int,
) -> Callable[[Dataset | None], Dataset]:
    """The mixture's "interleave" stage: text chunks, or records (batched for batched presets)."""
    if decoder.packing is not None:
        return lambda _: mixture_stream.text_chunks(
            mix,
            list(reads),
            decoder.packing,
            start,
            size=size,
            rows_per_step=per_step,
            needs_source=decoder.needs_source,
        )
    return lambda _: mixture_stream.records(
        mix,
        list(reads),
        start,
        positions_per_step=per_step,
        keys=p0.keyed,
        needs_source=decoder.needs_source,
        batch=p0.batch_size if decoder.batched else None,
    )


def _mean_tokens(p: Pipeline) -> float:
    text = _split_text(p)
    return text.tokens / text.documents if text is not None and text.documents else 0.0


def _source_read(p: Pipeline, text: bool) -> mixture_stream.SourceRead:
    read = shard_reader(p.plan)
    lengths = text_lengths.lengths_file(p.source) if text else None
    if text and lengths is None:
        raise ConfigError(
            f"A text mixture counts each source's rows from its lengths file; {p.source.where} has "
            "none (converted before tfpipe wrote one). Convert the split again."
        )
    return mixture_stream.SourceRead(
        spec=p.order,
        read=lambda path, size, count: read(path, size, count, grouped=True),
        cached=p.cache == "memory",
        parallelism=read_calls(p.plan),
        lengths=lengths,
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

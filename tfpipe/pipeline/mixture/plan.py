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
from collections.abc import Callable, Mapping
from typing import Any

from tfpipe import storage
from tfpipe.errors import ConfigError, TfpipeError
from tfpipe.packing import fill
from tfpipe.packing.fill import packed_lengths
from tfpipe.packing.spec import added_tokens, chunk_size
from tfpipe.pipeline.mixture import numbers
from tfpipe.pipeline.mixture import pack as mixture_pack
from tfpipe.pipeline.mixture import spec as mixture_spec
from tfpipe.pipeline.mixture import stream as mixture_stream
from tfpipe.pipeline.mixture.pipeline import MixtureEval, MixturePipeline
from tfpipe.pipeline.mixture.spec import BLOCK, MIXTURE_VERSION, MixSpec
from tfpipe.pipeline.order import resumable
from tfpipe.pipeline.order.resumable import ORDER_VERSION
from tfpipe.pipeline.read.resolve import resolve
from tfpipe.pipeline.stages.pipeline import Pipeline, make_stages
from tfpipe.pipeline.stages.read import read_calls, shard_reader
from tfpipe.pipeline.text import stages as text_stages
from tfpipe.validation import as_int


def plan_mixture(
    data: Mapping[str, Any],
    *,
    weights: Any,
    mix_by: Any,
    plan_one: Callable[..., Pipeline],
    start_step: Any,
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
    mix = mixture_spec.make(names, given or _sizes(names, parts, by), by, int(seed))
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
    return MixtureEval(
        stages=first.stages,
        plan=first.plan,
        global_batch_size=first.global_batch_size,
        preset=first.preset,
        notes=tuple(f"{n}: {note}" for n, p in zip(names, parts, strict=True) for note in p.notes),
        names=tuple(names),
        parts=parts,
    )


def _check_service(service: str | None, position: Any, config: Any, mode: Any) -> None:
    """Refuses what the tf.data service cannot run of a mixture: a Position (its variable lives
    in this process) and sharding modes that split the stream (its order is the mixture's)."""
    if service is None:
        return
    from tfpipe.pipeline import checks
    from tfpipe.pipeline.config import PipelineConfig

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


def _names(data: Mapping[str, Any]) -> list[str]:
    names = list(data)
    if len(names) < 2 or not all(isinstance(n, str) and n for n in names):
        raise ConfigError(
            "A mixture is a mapping of at least two names (non-empty strings) to datasets, e.g. "
            f"{{'web': PATH, 'code': PATH}}. Received: {list(names)!r}"
        )
    return names


def _mix_by(mix_by: Any, text: bool) -> mixture_spec.MixBy:
    allowed = ("tokens", "documents") if text else ("records",)
    if mix_by is None:
        return allowed[0]  # type: ignore[return-value]
    if mix_by not in allowed:
        kind = "text (weights in tokens, or documents)" if text else "records (images, tables)"
        raise ConfigError(f"mix_by must be one of {list(allowed)} for {kind}. Received: mix_by={mix_by!r}")
    return mix_by


def _sizes(names: list[str], parts: tuple[Pipeline, ...], by: str) -> dict[str, float]:
    """The default weights: each source's size (tokens, documents or records of its split)."""
    out = {}
    for name, p in zip(names, parts, strict=True):
        text = _split_text(p)
        size = text.tokens if by == "tokens" and text is not None else p.source.examples
        out[name] = float(size or 0)
    return out


def _split_text(p: Pipeline) -> Any:
    src = p.source
    return src.manifest.split(src.split).text if src.manifest is not None and src.split is not None else None


def _check_one_kind(names: list[str], data: Mapping[str, Any], split: Any, training: Any) -> None:
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


def _traits(a: Pipeline, b: Pipeline) -> list[tuple[str, Any, Any]]:
    def tok(p: Pipeline) -> Any:
        m = p.source.manifest
        return m.tokenizer.fingerprint if m is not None and m.tokenizer is not None else None

    def schema(p: Pipeline) -> Any:
        s = p.source.schema
        return (
            None if s is None else ([(f.name, str(f.dtype), tuple(f.shape or ())) for f in s.fields], s.label)
        )

    def packing(p: Pipeline) -> Any:
        return None if p.decoder.packing is None else p.decoder.packing.identity()

    return [
        ("a preset", a.preset.name, b.preset.name),
        ("a tokenizer (its file's fingerprint)", tok(a), tok(b)),
        ("a schema (features, dtypes, shapes, label)", schema(a), schema(b)),
        ("a packing (sequence_length, packing, truncate, eos)", packing(a), packing(b)),
    ]


def _assemble(
    mix: MixSpec, parts: tuple[Pipeline, ...], position: Any, step: int, seed: int, service: str | None
) -> MixturePipeline:
    """The mixture's Pipeline: the first source's stages with the mixed stream as its read (and
    for text the mixture's pack and map)."""
    first = parts[0]
    p0, o0 = first.plan, first.order
    assert o0 is not None
    pack = p0.decoder.packing
    per_step = o0.global_batch // o0.pipelines
    if position is not None or step > 0:
        _check_resumable(o0, p0.batch_size)
    identity: dict[str, Any] = {
        "order_version": ORDER_VERSION,
        "mixture_version": MIXTURE_VERSION,
        "data": [p.order.identity()["data"] for p in parts],  # type: ignore[union-attr]
        "batch_size": o0.global_batch,
        "seed": seed,
        "input_pipelines": o0.pipelines,
        "mixture": mix.identity(),
        "sources": [p.order.identity() for p in parts],  # type: ignore[union-attr]
    }
    texts = tuple(_source_text(p) for p in parts) if pack is not None else ()
    decoder, size, cut, blocks = p0.decoder, 0, None, _blocks(mix, texts, BLOCK)
    if pack is not None:
        decoder, size, cut, blocks, more = _text(mix, texts, pack, decoder)
        identity |= more
    reads = tuple(_source_read(p, pack is not None, b) for p, b in zip(parts, blocks, strict=True))
    limit = _limit(mix, parts, texts, decoder.packing, cut, per_step)
    start = _start_fn(position, step, identity, per_step, limit)
    config = dataclasses.replace(p0.config, seed=seed)
    plan = dataclasses.replace(p0, decoder=decoder, start=start, config=config, service=service)
    replaced = {"interleave": _mixed_read(mix, reads, p0, decoder, start, size, cut, per_step)}
    if pack is not None:
        by = mixture_pack.documents_stage if mix.mix_by == "documents" else mixture_pack.tokens_stage
        replaced |= {"pack": by(plan, len(parts)), "batch": mixture_pack.batch_stage(plan)}
    made = tuple(dataclasses.replace(s, fn=replaced.get(s.name, s.fn)) for s in make_stages(plan))
    return MixturePipeline(
        stages=made,
        plan=plan,
        global_batch_size=first.global_batch_size,
        preset=first.preset,
        notes=_notes(mix, parts, pack is not None, service),
        position=position,
        start_step=step,
        mixture=mix,
        parts=parts,
        chunk=size,
        reads=reads,
        cut=cut,
        texts=texts,
    )


def _text(
    mix: MixSpec, texts: Any, pack: Any, decoder: Any
) -> tuple[Any, int, Any, list[int], dict[str, Any]]:
    """A text mixture's decoder (its packing with the mix's histogram and mean), documents a
    chunk (by documents) or cut (by tokens), each source's scan block, and what its Position's
    identity adds."""
    shares = numbers.document_shares(mix, texts)
    mean = sum(w * t.mean for w, t in zip(shares, texts, strict=True))
    mixed = dataclasses.replace(
        pack, mean_tokens=mean - added_tokens(pack), histogram=numbers.histogram(texts, shares)
    )
    decoder = dataclasses.replace(decoder, packing=mixed)
    if mix.mix_by == "documents":
        size = chunk_size(mixed)
        return decoder, size, None, _blocks(mix, texts, size), mixed.identity() | {"chunk": size}
    tokens = numbers.chunk_tokens(pack, mean)
    cut = mixture_stream.TextCut(
        pack.sequence_length,
        pack.eos is not None,
        pack.classify,
        pack.truncate,
        pack.mode,
        mixture_spec.chunk_span(tokens, mix.rates),
    )
    return decoder, 0, cut, _blocks(mix, texts, tokens), mixed.identity() | {"chunk_tokens": tokens}


def _source_text(p: Pipeline) -> numbers.SourceText:
    """A text source as the mixture weighs it: its histogram, and its tokens and documents an
    epoch as packed (`packing.fill.packed_lengths`, from the histogram)."""
    own = p.decoder.packing
    text = _split_text(p)
    return numbers.SourceText(own.histogram or {}, int(packed_lengths(own).sum()), int(text.documents))


def _blocks(mix: MixSpec, texts: tuple[numbers.SourceText, ...], group: int) -> list[int]:
    """Items each source's scan takes a step: about its share of a group (`group` positions, or
    tokens for text by tokens), within [16, 4096]: a step's fixed cost once a group."""
    if mix.mix_by == "tokens" and texts:
        per_group = [group * w / t.mean for w, t in zip(mix.shares(), texts, strict=True)]
    else:
        per_group = [group * w for w in mix.shares()]
    return [int(min(4096, max(16, n))) for n in per_group]


def _notes(mix: MixSpec, parts: tuple[Pipeline, ...], text: bool, service: str | None) -> tuple[str, ...]:
    """Each source's notes by name (its own chunking and fill left out: the mixture chunks its
    stream and has its own), with the mixture's service."""
    own = ("text: chunks of", "text: predicted fill", "text: one epoch packs")
    kept = [[note for note in p.notes if not (text and note.startswith(own))] for p in parts]
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


def _mixed_read(
    mix: MixSpec, reads: Any, p0: Any, decoder: Any, start: Any, size: int, cut: Any, per_step: int
) -> Callable[[Any], Any]:
    """The mixture's "interleave" stage: text chunks (by tokens or documents), or records
    (batched for batched presets)."""
    if decoder.packing is not None and cut is not None:
        return lambda _: mixture_stream.token_chunks(
            mix, list(reads), cut, start, rows_per_step=per_step, needs_source=decoder.needs_source
        )
    if decoder.packing is not None:
        return lambda _: mixture_stream.document_chunks(
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


def _source_read(p: Pipeline, text: bool, block: int) -> mixture_stream.SourceRead:
    read = shard_reader(p.plan)
    lengths = text_stages.lengths_file(p.source) if text else None
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
        block=block,
    )


def _check_resumable(o: Any, per_replica: int) -> None:
    """A start needs each input pipeline to consume the same whole batches a step."""
    if o.pipelines > 1 and (o.global_batch % o.pipelines or (o.global_batch // o.pipelines) % per_replica):
        raise ConfigError(
            f"start_step with {o.pipelines} input pipelines needs each to consume the same whole "
            f"number of batches per step: batch_size={o.global_batch} does not split into "
            f"{o.pipelines} shares of whole per-replica batches of {per_replica}."
        )


def _limit(mix: MixSpec, parts: tuple[Pipeline, ...], texts: Any, pack: Any, cut: Any, per_step: int) -> int:
    """The last step a mixture can start at: its positions within 2**62; for text, the walk to
    the start's chunk covering at most max(MIN_COUNTED_EPOCHS epochs of the mixture,
    MAX_COUNTED_DOCUMENTS documents) (as for one text source, text/stages.py), and each source's
    tokens within spec.MAX_SOURCE_TOKENS (its virtual time in int64)."""
    limit = resumable.MAX_POSITION // per_step
    if pack is None:
        return limit
    shares = numbers.document_shares(mix, texts)
    mean = max(1.0, sum(w * t.mean for w, t in zip(shares, texts, strict=True)))
    if cut is not None:
        filled = numbers.token_fill(pack, mix, parts, texts, pack.sequence_length, pack.mode)
    else:
        filled = fill.predicted_fill(pack)
    tokens_per_step = per_step * pack.sequence_length * max(0.01, filled)
    epoch_documents = numbers.epoch_tokens(mix, texts) / mean
    walked = max(text_stages.MIN_COUNTED_EPOCHS * epoch_documents, text_stages.MAX_COUNTED_DOCUMENTS)
    tokens = min(mixture_spec.MAX_SOURCE_TOKENS * w for w in mix.shares())
    return int(min(limit, walked * mean / tokens_per_step, tokens / tokens_per_step))


def _start_fn(
    position: Any, step: int, identity: dict[str, Any], per_step: int, limit: int
) -> Callable[[], Any]:
    """The step the mixture starts at: fixed, or the Position's (read when an iterator starts).

    Raises:
      ConfigError: a fixed step beyond `limit` (a Position's is checked when it is read).
    """
    from tfpipe._tf import tf

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

    def start() -> Any:
        value = tf_.cast(position.read(), tf_.int64)
        message = f"the step of the Position must be at most {limit} for this mixture: {why}"
        check = tf_.debugging.assert_less_equal(value, tf_.constant(limit, tf_.int64), message=message)
        with tf_.control_dependencies([check]):
            return tf_.identity(value)

    return start

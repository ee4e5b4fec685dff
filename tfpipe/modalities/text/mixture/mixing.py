"""Text's mixing (`pipeline.mixture.mixing.Mixing`): weights in tokens (or documents).

By tokens, each source's documents are cut into pieces of at most L tokens merged in virtual
time, chunk by chunk (mixture/stream.py), and each source's pieces packed on their own, the rows
balanced by source (mixture/pack.py). By documents, the mixed documents are chunked and packed
together, as one source's are. The mixture's own numbers (its histogram, fill, epoch) are drawn
from the mix (mixture/numbers.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from tfpipe.errors import ConfigError
from tfpipe.modalities.text import lengths as text_lengths
from tfpipe.modalities.text import stages as text_stages
from tfpipe.modalities.text.mixture import numbers
from tfpipe.modalities.text.mixture import pack as mixture_pack
from tfpipe.modalities.text.mixture import stream as text_stream
from tfpipe.packing import fill
from tfpipe.packing.fill import packed_lengths
from tfpipe.packing.spec import added_tokens, chunk_size
from tfpipe.pipeline.mixture import spec as mixture_spec
from tfpipe.pipeline.mixture.mixing import Mixed, MixedPipeline, blocks
from tfpipe.pipeline.mixture.spec import MixSpec
from tfpipe.pipeline.order import resumable
from tfpipe.pipeline.stages.stage import StageFn, StagePlan

if TYPE_CHECKING:
    from tfpipe._tf import Tensor
    from tfpipe.format.manifest_text import SplitText
    from tfpipe.modalities.text.lengths import Lengths
    from tfpipe.packing.spec import Mode
    from tfpipe.pipeline.mixture.stream import SourceRead
    from tfpipe.pipeline.stages.pipeline import Pipeline
    from tfpipe.presets.base import Decoder


@dataclasses.dataclass(frozen=True)
class TextMix:
    """A text mixture's own plan (`Mixed.own`).

    Attributes:
      cut: how it cuts its documents (L, the chunk's span) by tokens, else None (by documents).
      texts: each source as the mixture weighs it (its histogram, tokens, documents).
    """

    cut: text_stream.TextCut | None
    texts: tuple[numbers.SourceText, ...]


def _own(own: object) -> TextMix:
    """A text mixture's own plan (`Mixed.own`, `MixturePipeline.own`): a TextMix, as `mixed`
    made it."""
    if not isinstance(own, TextMix):
        raise TypeError(f"Expected a text mixture's own plan (a TextMix). Received: {type(own).__name__}")
    return own


def split_text(p: Pipeline) -> SplitText | None:
    """The split's text entry (documents, tokens, histogram) of a planned source, or None."""
    src = p.source
    return src.manifest.split(src.split).text if src.manifest is not None and src.split is not None else None


def _source_text(p: Pipeline) -> numbers.SourceText:
    """A text source as the mixture weighs it: its histogram, and its tokens and documents an
    epoch as packed (`packing.fill.packed_lengths`, from the histogram)."""
    own = p.decoder.packing
    text = split_text(p)
    if text is None:
        raise ConfigError(
            f"A text mixture weighs each source by its manifest's text figures; {p.source.where} has "
            "none (records without a manifest). Convert the split with tfpipe."
        )
    return numbers.SourceText(own.histogram or {}, int(packed_lengths(own).sum()), int(text.documents))


@dataclasses.dataclass(frozen=True)
class TextMixing:
    """A mixture of text datasets: weights in tokens (or documents).

    Attributes:
      rows: the sources' batching (`TextRows`), the mixture's made from it.
    """

    rows: Any

    by: ClassVar[tuple[str, ...]] = ("tokens", "documents")
    by_words = "text (weights in tokens, or documents)"
    unit = "documents"

    def size(self, p: Pipeline, by: str) -> float:
        """A source's tokens (by="tokens") or documents: its default weight."""
        text = split_text(p)
        return float((text.tokens if by == "tokens" and text is not None else p.source.examples) or 0)

    def source_extra(self, p: Pipeline) -> Lengths:
        """The source's lengths file, which the mixed stream counts its rows from.

        Raises:
          ConfigError: the split has none (converted before tfpipe wrote one).
        """
        lengths = text_lengths.lengths_file(p.source)
        if lengths is None:
            raise ConfigError(
                f"A text mixture counts each source's rows from its lengths file; {p.source.where} has "
                "none (converted before tfpipe wrote one). Convert the split again."
            )
        return lengths

    def mixed(self, mix: MixSpec, decoder: Decoder, parts: Sequence[Pipeline]) -> Mixed:
        """The mixture's decoder (its packing with the mix's histogram and mean), documents a
        chunk (by documents) or cut (by tokens), each source's scan block, and what its Position's
        identity adds."""
        texts = tuple(_source_text(p) for p in parts)
        pack = decoder.packing
        shares = numbers.document_shares(mix, texts)
        mean = sum(w * t.mean for w, t in zip(shares, texts, strict=True))
        mixed_pack = dataclasses.replace(
            pack, mean_tokens=mean - added_tokens(pack), histogram=numbers.histogram(texts, shares)
        )
        mixed = dataclasses.replace(
            decoder, packing=mixed_pack, batching=dataclasses.replace(self.rows, pack=mixed_pack)
        )
        if mix.mix_by == "documents":
            size = chunk_size(mixed_pack)
            return Mixed(
                mixed,
                mixed_pack.identity() | {"chunk": size},
                blocks([size * w for w in mix.shares()]),
                size,
                TextMix(None, texts),
            )
        tokens = numbers.chunk_tokens(pack, mean)
        cut = text_stream.TextCut(
            pack.sequence_length,
            pack.eos is not None,
            pack.classify,
            pack.truncate,
            pack.mode,
            mixture_spec.chunk_span(tokens, mix.rates),
        )
        per_group = [tokens * w / t.mean for w, t in zip(mix.shares(), texts, strict=True)]
        return Mixed(
            mixed, mixed_pack.identity() | {"chunk_tokens": tokens}, blocks(per_group), 0, TextMix(cut, texts)
        )

    def read(
        self,
        mix: MixSpec,
        reads: Sequence[SourceRead],
        plan: StagePlan,
        start: Callable[[], Tensor],
        mixed: Mixed,
        per_step: int,
    ) -> StageFn:
        """The mixture's "interleave": chunks of virtual time (by tokens) or of the mixed
        documents, from the step `start()` gives."""
        cut, needs_source = _own(mixed.own).cut, plan.decoder.needs_source
        if cut is not None:
            return lambda _: text_stream.token_chunks(
                mix, list(reads), cut, start, rows_per_step=per_step, needs_source=needs_source
            )
        return lambda _: text_stream.document_chunks(
            mix,
            list(reads),
            plan.decoder.packing,
            start,
            size=mixed.chunk,
            rows_per_step=per_step,
            needs_source=needs_source,
        )

    def replaced(self, mix: MixSpec, plan: StagePlan) -> dict[str, StageFn]:
        """The mixture's pack (a source a row by tokens) and its batch (the count by source
        dropped)."""
        by = mixture_pack.documents_stage if mix.mix_by == "documents" else mixture_pack.tokens_stage
        return {"pack": by(plan, len(mix.names)), "batch": mixture_pack.batch_stage(plan)}

    def limit(self, mix: MixSpec, parts: Sequence[Pipeline], mixed: Mixed, per_step: int) -> int:
        """The last step a run can start at: the walk to the start's chunk covering at most
        max(MIN_COUNTED_EPOCHS epochs of the mixture, MAX_COUNTED_DOCUMENTS documents) (as for
        one text source, text/stages.py), each source's tokens within spec.MAX_SOURCE_TOKENS (its
        virtual time in int64), and the positions within 2**62."""
        own = _own(mixed.own)
        pack, texts, cut = mixed.decoder.packing, own.texts, own.cut
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
        limit = resumable.MAX_POSITION // per_step
        return int(min(limit, walked * mean / tokens_per_step, tokens / tokens_per_step))

    def starts_at(self, pipe: MixedPipeline, step: int, per_step: int) -> list[int]:
        """Each source's documents before the chunk holding the step's first row (found by
        walking the chunks before it, lengths only)."""
        if step == 0:
            return [0] * len(pipe.parts)
        from tfpipe._tf import tf  # the walk runs in TensorFlow

        tf_ = tf()
        cut = _own(pipe.own).cut
        chunk, _, at = text_stream.find_start(
            pipe.mix,
            list(pipe.reads),
            pipe.decoder.packing,
            cut,
            pipe.chunk,
            tf_.constant(step * per_step, tf_.int64),
        )
        if cut is None:  # by documents: the chunk's first position, counted in closed form
            return mixture_spec.counts(pipe.mix.rates, int(chunk) * pipe.chunk)
        return [int(x) for x in at.numpy()[:, 0]]

    def predicted_fill(self, pipe: MixedPipeline, L: int | None, mode: Mode | None) -> float:
        """The mixture's fill (real tokens / slots) predicted from the mix, at another L or mode
        when given."""
        pack = pipe.decoder.packing
        L = pack.sequence_length if L is None else L
        mode = pack.mode if mode is None else mode
        if pipe.mix.mix_by == "documents":
            return fill.predicted_fill(pack, L, mode)
        return numbers.token_fill(pack, pipe.mix, pipe.parts, _own(pipe.own).texts, L, mode)

    def epoch_units(self, pipe: MixedPipeline) -> int:
        """Rows of one epoch of the mixture, globally: until the source that takes longest at its
        weight has been read whole (mixture/numbers.py)."""
        L = pipe.decoder.packing.sequence_length
        return round(
            numbers.epoch_tokens(pipe.mix, _own(pipe.own).texts) / (L * self.predicted_fill(pipe, None, None))
        )

    def how(self, pipe: MixedPipeline) -> list[str]:
        pack, mix, texts = pipe.decoder.packing, pipe.mix, _own(pipe.own).texts
        out = []
        if mix.mix_by == "tokens":
            tokens = numbers.chunk_tokens(pack, sum(t.mean for t in texts) / len(texts))
            out.append(
                f"text: chunks of ~{tokens:,} tokens of virtual time; each source's pieces packed on "
                "their own (a row holds one source), the rows balanced by source in each chunk"
            )
        out.append(
            f"text: predicted fill {self.predicted_fill(pipe, None, None):.1%} (from the mix: each source "
            f"weighted by its share); one epoch of the mixture (until every source was read whole) "
            f"~{self.epoch_units(pipe):,} rows of {pack.sequence_length} tokens"
        )
        return out

    def replaces(self, note: str) -> bool:
        """A source's own chunking and fill: the mixture chunks its stream and has its own."""
        return note.startswith(("text: chunks of", "text: predicted fill", "text: one epoch packs"))

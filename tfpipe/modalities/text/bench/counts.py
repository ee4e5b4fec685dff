"""What bench measures of a text pipeline before it times the prefixes (measure): the fill and
the rows a chunk of documents packs into (`measure.measure`), and for a mixture each source's
share of real tokens, counted in the same pass (`mixshare`); and what follows from them for the
timing: sequences an element of the prefixes before the batch, the storage's records as the
sequences they pack into."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from tfpipe.bench.results import TextMeasure
from tfpipe.modalities.text.bench import measure as bench_measure
from tfpipe.modalities.text.bench import mixshare

if TYPE_CHECKING:
    from tfpipe.pipeline.stages.pipeline import Pipeline


class Timed(Protocol):
    """What the count reads of bench's config (`BenchConfig`): the seconds it may take."""

    @property
    def seconds(self) -> float: ...


def count(pipe: Any, cfg: Timed, say: Callable[[str], None]) -> TextMeasure:
    """A text pipeline's counts (the fill, the rows a chunk packs into; see `measure`), before
    anything is timed; a mixture's shares by source too."""
    say("Counting the text pipeline's rows: the fill and the rows a chunk of documents packs into")
    # A batch larger than an epoch's rows was refused when the pipeline was planned (build()'s
    # rule, on `fill.epoch_rows`, the count reported here).
    text = bench_measure.measure(pipe, seconds=cfg.seconds)  # a mixture's shares in the same pass
    if getattr(pipe, "mixture", None) is None:
        return text
    documents, tokens = mixshare.totals(pipe)
    return dataclasses.replace(text, documents=documents, tokens=tokens)


def units(text: TextMeasure) -> dict[str, float]:
    """Sequences per element of the text prefixes that yield chunks of documents."""
    return {"read": text.rows_per_chunk, "parse": text.rows_per_chunk}


def storage_examples(records: int, text: TextMeasure) -> int:
    """The storage read's records (documents) counted as the sequences they pack into."""
    return round(records / text.chunk_documents * text.rows_per_chunk)


def reference_shape(pipe: Pipeline) -> dict[str, Any]:
    """The packing a reference row's slot tokens are read at."""
    return {"packing": pipe.decoder.packing.mode}

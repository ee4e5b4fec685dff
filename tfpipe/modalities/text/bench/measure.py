"""A text pipeline's counts: its fill, measured on its own batches and predicted from the
manifest; the rows a chunk of documents packs into; the lengths; the tokenizer's cost.

bench counts text in sequences. The prefixes before the pack stage yield chunks of documents,
which `rows_per_chunk` turns into the sequences they pack into, so every prefix, the batch and
the consumer share one unit. A chunk's documents carry a known number of tokens as packed (the
manifest's lengths, with the EOS or [CLS]/[SEP] the pipeline adds, cut to L where it truncates),
and a row carries L x the measured fill of them: rows = tokens / (L x fill).

One counting pass runs before anything is timed: the batch prefix (the rows as they train,
before the output form), real tokens (segment id not 0) over slots, until the window has
passed and the fill is known within FILL_PRECISION (a 95% half-interval from the batches'
spread), at most MAX_COUNT_SECONDS. Counting an epoch would not make it exact: a chunk may hold
more than an epoch's documents, and its rows come out shuffled.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from tfpipe import storage
from tfpipe._tf import tf
from tfpipe.bench.measure.producer import prefix_points
from tfpipe.bench.results import SourceText, TextMeasure
from tfpipe.errors import DataError, MissingExtraError
from tfpipe.modalities.text.bench import mixshare
from tfpipe.modalities.text.convert.tokenizers import load_checked
from tfpipe.modalities.text.mixture import pack as mixture_pack
from tfpipe.modalities.text.stages import TextPacking
from tfpipe.packing.fill import epoch_rows, packed_lengths, predicted_fill
from tfpipe.packing.spec import MODES, Mode, added_tokens, chunk_size

if TYPE_CHECKING:
    from tfpipe.format.manifest_text import SplitText
    from tfpipe.pipeline.stages.pipeline import Pipeline

# Length percentiles reported; the suggested length holds p99's documents whole.
PERCENTILES = {"p50": 0.50, "p90": 0.90, "p99": 0.99}
# A TPU lays a row over 128 lanes: lengths are suggested in multiples of it.
LANES = 128
# The counting pass: at least this many batches, whatever the window; past the window, on
# until the measured fill's 95% half-interval is within 0.4 point (well inside the one point
# it must agree with the prediction within; one padded document a row, whose rows' fills
# spread most, takes ~30,000 rows to get there), but no longer than this.
MIN_BATCHES = 4
FILL_PRECISION = 0.004
MAX_COUNT_SECONDS = 60.0
# Tokens the tokenizer's cost is timed on (decoded from the first batches' documents), and
# the rounds it is timed in after one untimed: the median, with the lowest and highest.
TOKENIZE_SAMPLE = 50_000
TOKENIZE_ROUNDS = 5


def measure(pipe: Pipeline, *, seconds: float) -> TextMeasure:
    """Counts `pipe` (a text pipeline) and reads its manifest's text figures.

    Args:
      pipe: the planned text pipeline, as bench times it.
      seconds: the most the counting pass runs after its first batch.

    Raises:
      DataError: `pipe` packs no text, or its split's manifest has no length histogram.
    """
    text = _split_text(pipe)
    pack = packing_of(pipe)
    mixture = getattr(pipe, "mixture", None) is not None
    # A mixture's histogram is its own, from the mix (text's mixture/numbers.py), and so is its fill.
    hist = dict(pack.histogram or {}) if mixture else dict(text.length_histogram)
    L = pack.sequence_length
    per_document = float(packed_lengths(pack).mean())
    predicted: dict[str, float] = {m: predict(pipe, L, m) for m in _modes(pack)}
    rows, real, fill_sd, batches, sample, by_source = _count_batches(pipe, seconds)
    if not real:
        raise DataError(
            f"{pipe.source.where}: expected tokens in the text pipeline's batches. Received "
            f"{rows:,} rows of {L} slots, every one padding (segment id 0)"
        )
    fill = real / (rows * L)
    lengths = _percentiles(hist, L - (2 if pack.classify else 0))
    suggested = _suggested_length(lengths["p99"] + added_tokens(pack))
    tokenize, note = _tokenize_cost(pipe, sample)
    return TextMeasure(
        sequence_length=L,
        packing=pack.mode,
        classify=pack.classify,
        truncate=pack.truncate,
        chunk_documents=pack_chunk(pipe),
        rows_per_chunk=pack_chunk(pipe) * per_document / (L * fill),
        rows=rows,
        real_tokens=real,
        fill_sd=fill_sd,
        batches=batches,
        predicted_fill=predicted,
        documents=text.documents,
        tokens=text.tokens,
        lengths=lengths,
        suggested_length=suggested,
        suggested_fill=predict(pipe, suggested, pack.mode),
        tokenizer=_tokenizer_words(pipe),
        tokenize_ms_per_1k=None if tokenize is None else float(np.median(tokenize)),
        tokenize_note=note,
        epoch_rows=pipe.epoch_rows() if mixture else epoch_rows(pack),  # type: ignore[attr-defined]
        tokenize_ms_range=None if tokenize is None else (min(tokenize), max(tokenize)),
        tokenize_rounds=0 if tokenize is None else len(tokenize),
        sources=_sources(pipe),
        mixture=mixshare.shares(pipe, by_source) if mixture else (),  # type: ignore[arg-type]
    )


def _sources(pipe: Pipeline) -> tuple[SourceText, ...]:
    """A mixture's sources, each as its own manifest predicts it alone (empty for one dataset):
    each part was planned as one dataset, so its packing holds its own histogram."""
    parts, mix = getattr(pipe, "parts", ()), getattr(pipe, "mixture", None)
    if not parts or mix is None:
        return ()
    out = []
    for name, part in zip(mix.names, parts, strict=True):
        text, pack = _split_text(part), packing_of(part)
        lengths = _percentiles(text.length_histogram, pack.sequence_length - (2 if pack.classify else 0))
        suggested = _suggested_length(lengths["p99"] + added_tokens(pack))
        out.append(
            SourceText(
                name=name,
                documents=text.documents,
                tokens=text.tokens,
                lengths=lengths,
                predicted_fill={m: predicted_fill(pack, pack.sequence_length, m) for m in _modes(pack)},
                epoch_rows=epoch_rows(pack),
                suggested_length=suggested,
                suggested_fill=predict(part, suggested, pack.mode),  # alone, as its own fill above
            )
        )
    return tuple(out)


def packing_of(pipe: Pipeline) -> TextPacking:
    """How the text pipeline `pipe` packs.

    Raises:
      DataError: `pipe` packs no text.
    """
    if pipe.decoder.packing is None:
        raise DataError(f"Expected a text pipeline (preset 'text'). Received: preset {pipe.preset.name!r}")
    return pipe.decoder.packing


def _split_text(pipe: Pipeline) -> SplitText:
    """The split's SplitText (documents, tokens, length histogram) from the manifest."""
    packing_of(pipe)
    src = pipe.source
    split = src.manifest.splits.get(src.split) if src.manifest is not None and src.split else None
    text = split.text if split is not None else None
    if text is None or not text.length_histogram.get("lengths"):
        raise DataError(
            f"{src.where}: bench predicts a text pipeline's fill from the length histogram its "
            "manifest holds per split (tfpipe convert writes it). Received: a split without one; "
            "convert the corpus with `tfpipe convert CORPUS DEST --tokenizer PATH`."
        )
    return text


def pack_chunk(pipe: Pipeline) -> int:
    """Documents the pipeline packs together."""
    return chunk_size(packing_of(pipe))


def _modes(pack: TextPacking) -> tuple[Mode, ...]:
    """The packing modes this pipeline could use: a classifier's row holds one document."""
    return ("none",) if pack.classify else MODES


def predict(pipe: Pipeline, L: int, mode: Mode) -> float:
    """The fill of `mode` at `L`, predicted from the manifest's histogram as this pipeline packs
    (`packing.fill.predicted_fill`, what `describe()` says): its chunk, its EOS or [CLS]/[SEP]
    added to each document, its truncation. A mixture's is its own, from the mix."""
    if getattr(pipe, "mixture", None) is not None:
        return float(pipe.predicted_fill(L, mode))  # type: ignore[attr-defined]
    return predicted_fill(packing_of(pipe), L, mode)


def _percentiles(histogram: Mapping[str, Any], L: int) -> dict[str, int]:
    """p50, p90, p99 and max of the document lengths, and "longer": documents longer than L
    (at the histogram's resolution: exact up to its width-1 bins)."""
    lows = np.asarray(histogram["lengths"], np.int64)
    counts = np.asarray(histogram["counts"], np.int64)
    tokens = np.asarray(histogram["tokens"], np.int64)
    cum = np.cumsum(counts)
    out = {name: int(lows[np.searchsorted(cum, q * cum[-1], side="left")]) for name, q in PERCENTILES.items()}
    out["max"] = int(tokens[-1]) if counts[-1] == 1 else int(lows[-1])
    out["longer"] = int(counts[lows > L].sum())
    return out


def _suggested_length(longest: int) -> int:
    """The smallest multiple of LANES that holds `longest` tokens."""
    return max(LANES, -(-longest // LANES) * LANES)


def _prefix(pipe: Pipeline, name: str) -> int:
    for group, upto, _ in prefix_points(pipe.stages):
        if group == name:
            return upto
    raise DataError(f"Expected a text pipeline with a {name!r} stage. Received stages: {pipe.stages}")


def _count_batches(pipe: Pipeline, seconds: float) -> tuple[int, int, float, int, list[Any], list[Any]]:
    """Batches through the batch prefix (see the module doc for how many): (rows, real tokens,
    the standard deviation of a batch's fill, batches, the first batches' documents as token
    lists, for the tokenizer's timing, and a mixture's real tokens by source of each batch)."""
    tf_ = tf()
    mixture = getattr(pipe, "mixture", None) is not None
    batches = mixture_pack.counting(pipe) if mixture else pipe.dataset(_prefix(pipe, "batch"))
    ds = batches.map(lambda rows: (tf_.math.count_nonzero(rows["segment_ids"], dtype=tf_.int64), rows))
    slots = pipe.batch_size * packing_of(pipe).sequence_length
    n, real, squares, sampled = 0, 0, 0.0, 0
    sample: list[list[int]] = []
    by_source: list[Any] = []
    start = time.monotonic()
    for count, rows in ds:
        if mixture:
            by_source.append(mixshare.by_source(rows))
        if n == 0:
            start = time.monotonic()  # from the first batch: an iterator takes seconds to start
        n, real, squares = n + 1, real + int(count), squares + (int(count) / slots) ** 2
        if sampled < TOKENIZE_SAMPLE:
            sample += _segments(rows)
            sampled = sum(len(d) for d in sample)
        sd = _sd(n, real / slots, squares)
        if _counted_enough(n, sd, time.monotonic() - start, seconds):
            break
    return n * pipe.batch_size, real, sd, n, sample, by_source


def _sd(n: int, total: float, squares: float) -> float:
    """The standard deviation of one batch's fill, from the sum of n fills and of their squares."""
    if n < 2:
        return 0.0
    return math.sqrt(max(0.0, (squares - total * total / n) / (n - 1)))


def _counted_enough(n: int, sd: float, elapsed: float, seconds: float) -> bool:
    """Whether the counting pass may stop: the window passed with the fill known within
    FILL_PRECISION, or MAX_COUNT_SECONDS passed."""
    if n < MIN_BATCHES:
        return False
    return elapsed >= MAX_COUNT_SECONDS or (elapsed >= seconds and 1.96 * sd / math.sqrt(n) <= FILL_PRECISION)


def _segments(rows: Any) -> list[list[int]]:
    """The documents (or their pieces) of a batch of packed rows, as token id lists."""
    tokens = rows.get("tokens", rows.get("token_ids")).numpy()
    segments = rows["segment_ids"].numpy()
    out = []
    for toks, seg in zip(tokens, segments, strict=True):
        for s in np.unique(seg[seg != 0]):
            out.append(toks[seg == s].tolist())
    return out


def _tokenizer_words(pipe: Pipeline) -> str:
    tok = pipe.source.manifest.tokenizer if pipe.source.manifest is not None else None
    return "" if tok is None else f"{tok.kind} {tok.file}, {tok.vocab_size:,} ids"


def _tokenize_cost(pipe: Pipeline, sample: list[list[int]]) -> tuple[list[float] | None, str]:
    """CPU ms the dataset's own tokenizer takes to encode 1,000 tokens, in each of
    TOKENIZE_ROUNDS rounds after an untimed one: documents of the first batches decoded, then
    encoded again, timed in this thread's CPU time (the process's would count the pipeline's
    threads still busy beside it). (None, why) when it cannot run here."""
    manifest = pipe.source.manifest
    info = manifest.tokenizer if manifest is not None else None
    if info is None or not sample:
        return None, "the dataset names no tokenizer"
    try:
        tok = load_checked(storage.join(manifest.root, info.file), info.fingerprint)
    except (MissingExtraError, DataError) as e:  # bench goes on: the report says why
        return None, str(e)
    texts = [tok.decode(ids) for ids in sample]
    count = sum(len(e) for e in tok.encode(texts))  # untimed: the first call warms its caches
    if not count:
        return None, "the sample held no tokens"
    costs = []
    for _ in range(TOKENIZE_ROUNDS):
        cpu = time.thread_time()
        tok.encode(texts)
        costs.append(1e6 * (time.thread_time() - cpu) / count)
    return costs, ""

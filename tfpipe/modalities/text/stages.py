"""The text preset's stages: chunk, pack and batch (parse is the common one), and the resumable
order's stream of chunks.

    read (list_files ... repeat) -> chunk -> parse -> pack -> batch -> map (output form)

- chunk: `packing.spec.chunk_size` consecutive records `(records, sources, skip)`. `skip`
  is the rows of the chunk a resumed run has already trained on (0 but for its first chunk).
- parse: `tf.io.parse_example` of a whole chunk (tokens as a RaggedTensor).
- pack: the chunk's rows (packer.py), their order shuffled in training by a key drawn from
  the seed and the chunk's lengths, the first `skip` dropped; then one row an element.
- batch: `[B, L]` rows. Training drops nothing (the stream is endless); eval pads its last
  batch with empty rows (segment ids 0), so every shape is static and every document is read
  once.

Each chunk is packed on its own, so the packed stream is a function of the document order. The
resumable order gives that order from (seed, position); a run that starts at step K finds the
chunk holding its first row by counting the rows of every chunk before it, from lengths only
(no tokens moved), then starts the order at that chunk. The lengths come from the split's
lengths file (`manifest.LengthsFile`, one small read when the iterator starts), ordered as
the records are (the order's file and window permutations applied to the lengths), so no
shard is opened for the count. A dataset converted without one counts the old way: every
record before the start read and parsed (`describe()` says so).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Protocol

from tfpipe._tf import Dataset, Feature, Tensor, plain, tf
from tfpipe.errors import ConfigError
from tfpipe.modalities.text import packer
from tfpipe.modalities.text.lengths import lengths_file, ordered_lengths
from tfpipe.packing.fill import epoch_rows, predicted_fill
from tfpipe.packing.spec import Mode, added_tokens, chunk_size
from tfpipe.pipeline.config import PipelineConfig
from tfpipe.pipeline.order import stream as order_stream
from tfpipe.pipeline.order.resumable import KEY_ROWS, MAX_POSITION, OrderSpec, domain_key
from tfpipe.pipeline.read import raw
from tfpipe.pipeline.read.resolve import ResolvedData
from tfpipe.presets import Decoder

if TYPE_CHECKING:
    from tfpipe.pipeline.order.position import Position  # imports TensorFlow

TOKENS = "tokens"
StageFn = Callable[[Dataset], Dataset]


@dataclasses.dataclass(frozen=True, slots=True)
class TextPacking:
    """What the pipeline's chunk, pack and batch stages do for this preset.

    Attributes:
      sequence_length: L.
      mode: "first_fit", "none" or "concat".
      truncate: keep only each document's first L tokens.
      eos: the id appended to every document, or None.
      classify: one document a row as [CLS] tokens [SEP] (`cls`, `sep`), with its label.
      label: the label feature (classify).
      vocab_size: token ids must be below it (None: below 2**31, the int32 outputs).
      mean_tokens: the split's mean document length from the manifest (chunk size), or None.
      histogram: the split's length histogram from the manifest, or None.
      chunk: documents per chunk, or None: chosen from the mean length.
    """

    sequence_length: int
    mode: Mode
    truncate: bool = False
    eos: int | None = None
    classify: bool = False
    cls: int | None = None
    sep: int | None = None
    label: str | None = None
    vocab_size: int | None = None
    mean_tokens: float | None = None
    histogram: Mapping[str, list[int]] | None = None
    chunk: int | None = None

    def identity(self) -> dict[str, int | str | bool | None]:
        """What a resumed run must share with the run it resumes (see pipeline/order/position.py)."""
        return {
            "sequence_length": self.sequence_length,
            "packing": self.mode,
            "truncate": self.truncate,
            "eos": self.eos,
        }


class TextPlan(Protocol):
    """What the text stages read of the pipeline's plan (stages/stage.py's `StagePlan`, a floor
    above this one)."""

    @property
    def decoder(self) -> Decoder: ...
    @property
    def config(self) -> PipelineConfig: ...
    @property
    def source(self) -> ResolvedData: ...
    @property
    def order(self) -> OrderSpec | None: ...
    @property
    def start(self) -> Callable[[], Tensor] | None: ...
    @property
    def training(self) -> bool: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def deterministic(self) -> bool: ...
    @property
    def cache(self) -> str: ...


def packing_of(p: TextPlan) -> TextPacking:
    """How the text pipeline `p` packs (a text plan's decoder always says)."""
    assert p.decoder.packing is not None, "a text stage on a pipeline that packs no text"
    return p.decoder.packing


def documents(pack: TextPacking, features: Mapping[str, Tensor], where: str = "") -> Tensor:
    """The chunk's documents as packed: the EOS appended, the [CLS] and [SEP] around a
    classifier's (its first L - 2 tokens), ids checked against the vocabulary."""
    tf_ = tf()
    tokens = features[TOKENS]
    high = pack.vocab_size if pack.vocab_size is not None else 1 << 31
    values = tokens.values
    ok = tf_.logical_and(tf_.reduce_all(values >= 0), tf_.reduce_all(values < high))
    check = tf_.debugging.Assert(
        ok,
        [
            f"Expected token ids in [0, {high}) (the tokenizer's vocabulary) in the documents of "
            f"{where or 'the records'}. Received min/max:",
            tf_.reduce_min(tf_.concat([values, [0]], 0)),
            tf_.reduce_max(tf_.concat([values, [0]], 0)),
        ],
    )
    with tf_.control_dependencies([check]):
        tokens = tf_.identity(tokens)
    n = tokens.nrows()
    if pack.classify:
        body = tokens[:, : pack.sequence_length - 2]
        return tf_.concat([column(tf_, n, pack.cls), body, column(tf_, n, pack.sep)], axis=1)
    if pack.eos is not None:
        return tf_.concat([tokens, column(tf_, n, pack.eos)], axis=1)
    return tokens


def column(tf_: ModuleType, n: Tensor, value: int | None) -> Tensor:
    """`[n, 1]` of `value`, as a RaggedTensor to concatenate with documents."""
    return tf_.RaggedTensor.from_tensor(tf_.fill(tf_.stack([n, 1]), tf_.constant(value, tf_.int64)))


def rows_of(pack: TextPacking, lengths: Tensor) -> Tensor:
    """The rows a chunk packs into (int64 scalar), from its records' token counts alone (int64
    `[docs]`): each document as `documents` makes it, placed as `pack_stage` places it."""
    tf_ = tf()
    L = pack.sequence_length
    return packer.place(tf_, lengths + added_tokens(pack), L, pack.mode, pack.truncate)[-1]


def chunk_stage(p: TextPlan) -> StageFn:
    """`(record, source)` -> chunks `(records, sources, skip)`; the resumable order's stream
    yields chunks already."""
    size = chunk_size(packing_of(p))

    def chunk(ds: Dataset) -> Dataset:
        if p.order is not None:
            return ds
        tf_ = tf()
        zero = tf_.constant(0, tf_.int64)
        return ds.batch(size).map(plain(lambda records, sources: (records, sources, zero)))

    return chunk


def pack_stage(p: TextPlan) -> StageFn:
    """Parsed chunks -> rows `{"tokens", "segment_ids", "positions"}` ([L] int64 each, plus
    "label" when classifying; int32 again per batch, `batch_stage`), one an element."""
    pack = packing_of(p)
    shuffle = p.training
    key = domain_key(int(p.config.seed or 0), KEY_ROWS)

    def rows(features: Mapping[str, Tensor], source: Tensor, skip: Tensor) -> dict[str, Tensor]:
        tf_ = tf()
        docs = documents(pack, features, p.source.where)
        out = packer.pack(docs, pack.sequence_length, pack.mode, pack.truncate)
        if pack.classify and pack.label is not None:
            out["label"] = tf_.cast(features[pack.label], tf_.int32)
        if shuffle:
            rows = tf_.shape(out["tokens"], out_type=tf_.int64)[0]
            order = order_stream.permutation(tf_, rows, chunk_seed(tf_, key, docs))
            out = {k: tf_.gather(v, order) for k, v in out.items()}
        # int64 here, int32 again per batch (batch_stage): a function with int32 outputs among
        # several is instantiated on several devices (tfpipe._tf.plain), ~3x the CPU per iterator
        # for the packer's ~360 nodes.
        return {k: tf_.cast(v[skip:], tf_.int64) for k, v in out.items()}

    def pack_rows(ds: Dataset) -> Dataset:
        return raw.unbatch(
            ds.map(plain(rows), num_parallel_calls=p.config.map_parallelism, deterministic=p.deterministic)
        )

    return pack_rows


def chunk_seed(tf_: ModuleType, key: int, docs: Tensor) -> Tensor:
    """The seed of a chunk's row order: (the rows key ^ the chunk's tokens, its length-weighted
    index sum), so the order is a function of the seed and the chunk's documents alone (a chunk
    knows no position outside the resumable order). `order_stream.permutation` keys by it."""
    return lengths_seed(tf_, key, tf_.cast(docs.row_lengths(), tf_.int64))


def lengths_seed(tf_: ModuleType, key: int, lengths: Tensor) -> Tensor:
    """`chunk_seed` of a chunk whose documents (or a mixture's segments) have these lengths."""
    weighted = tf_.reduce_sum(lengths * tf_.range(1, tf_.size(lengths, out_type=tf_.int64) + 1))
    return tf_.stack(
        [tf_.bitwise.bitwise_xor(tf_.constant(key, tf_.int64), tf_.reduce_sum(lengths)), weighted]
    )


def batch_stage(p: TextPlan) -> StageFn:
    """Rows -> `[B, L]` int32 batches: whole in training; in eval the last one partial, padded
    with empty rows (segment ids 0) by the "pad" stage (`pad_remainder`, True for text by
    default)."""
    size = p.batch_size

    def batch(ds: Dataset) -> Dataset:
        tf_ = tf()
        batches = ds.batch(size, drop_remainder=bool(p.training or p.config.drop_remainder))
        return batches.map(plain(lambda rows: {k: tf_.cast(v, tf_.int32) for k, v in rows.items()}))

    return batch


# What counting the rows before a start may walk (the order applied to the lengths file and
# every chunk's placement, ~3.4 us a document; benchmarks/RESULTS.md, "Text: resuming"): at
# least this many epochs, or this many documents when that is more. A start further on is
# refused (an epoch's rows depend on its order, so they cannot be known without placing it).
MIN_COUNTED_EPOCHS = 4
MAX_COUNTED_DOCUMENTS = 1 << 24


def start_limit(spec: OrderSpec, pack: TextPacking) -> int:
    """The last step a resumable text pipeline can start at: the count of the rows before it
    walks at most max(MIN_COUNTED_EPOCHS epochs, MAX_COUNTED_DOCUMENTS documents), at the rows
    a split packs into by the manifest's histogram (its pieces for "none"; its tokens over L,
    at most the rows, for the packing modes: no simulation at build()); and the row position
    stays within `order.MAX_POSITION`, so its int64 arithmetic never wraps."""
    rows_per_step = spec.global_batch // spec.pipelines
    histogram = pack.histogram or {}
    documents = sum(histogram.get("counts", []))
    rows = 0
    if documents and (pack.mode == "none" or pack.classify):
        rows = epoch_rows(pack)
    elif documents:
        rows = sum(histogram["tokens"]) // pack.sequence_length
    walked = max(MIN_COUNTED_EPOCHS * spec.examples, MAX_COUNTED_DOCUMENTS)
    if rows and documents:
        share = spec.pipelines if spec.by_record else 1  # this pipeline keeps 1/n of the stream
        return min(walked * rows // (documents * share * rows_per_step), MAX_POSITION // rows_per_step)
    return MAX_POSITION // rows_per_step


def start_fn(
    spec: OrderSpec, pack: TextPacking, position: Position | None, step: int
) -> Callable[[], Tensor]:
    """The step a resumable text pipeline starts at: fixed, or the Position's (read when an
    iterator starts). A Position is bound to what a step means, packing included.

    Raises:
      ConfigError: a fixed step beyond `start_limit` (a Position's step is checked when the
        iterator reads it).
    """
    tf_ = tf()
    limit = start_limit(spec, pack)
    why = (
        "counting the packed rows before a step places every earlier chunk of documents (an "
        "epoch's rows depend on its order), so a start may lie at most "
        f"max({MIN_COUNTED_EPOCHS} epochs, {MAX_COUNTED_DOCUMENTS:,} documents) into the stream"
    )
    if position is None:
        if step > limit:
            raise ConfigError(
                f"start_step must be an int in [0, {limit}] or a tfpipe.Position for this text "
                f"dataset: {why}. Received: start_step={step}"
            )
        fixed = lambda: tf_.constant(step, tf_.int64)  # noqa: E731
        fixed.step = step  # type: ignore[attr-defined]  # known now: no search traced at step 0
        return fixed
    position.bind(spec.identity() | pack.identity() | {"chunk": chunk_size(pack)})

    def start() -> Tensor:
        step = tf_.cast(position.read(), tf_.int64)
        message = f"the step of the Position must be at most {limit} for this text dataset: {why}"
        bound = tf_.constant(limit, tf_.int64)
        with tf_.control_dependencies([tf_.debugging.assert_less_equal(step, bound, message=message)]):
            return tf_.identity(step)

    return start


def resumable_chunks(p: TextPlan, read: Callable[..., Dataset], parallelism: int) -> Dataset:
    """The resumable order's stream in chunks `(records, sources, skip)`, from the step that
    `p.start()` gives: the chunk holding the step's first row, and its rows before it as skip."""
    tf_ = tf()
    spec, pack, start = p.order, packing_of(p), p.start
    assert spec is not None and start is not None, "the resumable order's plan has its spec and start"
    size = chunk_size(pack)
    stride = spec.pipelines if spec.by_record else 1
    rows_per_step = spec.global_batch // spec.pipelines
    lengths = lengths_file(p.source)
    records = order_stream.cached_records(spec, read) if p.cache == "memory" else None  # one load

    def chunks(first: Tensor) -> Dataset:
        return order_stream.stream(
            spec,
            read,
            lambda: first * size * stride,
            cached=records is not None,
            sources=p.decoder.needs_source,
            keys=False,
            batch=size,
            parallelism=parallelism,
            load=None if records is None else lambda: records.get_single_element()[0],  # shared
        )

    def find(target: Tensor) -> tuple[Tensor, Tensor]:
        """(chunk, rows before it) of the chunk holding row `target` of the stream."""
        if lengths is None:  # no lengths file: every record before the start read and parsed
            parse_spec = {TOKENS: p.decoder.spec[TOKENS]}
            counts = chunks(tf_.constant(0, tf_.int64)).map(
                plain(lambda records, _: rows_of(pack, record_lengths(tf_, records, parse_spec)))
            )
        else:
            counts = ordered_lengths(spec, lengths, size).map(
                plain(lambda chunk, _: rows_of(pack, chunk)),
                num_parallel_calls=tf_.data.AUTOTUNE,
                deterministic=True,
            )
        spans = counts.scan(
            tf_.constant(0, tf_.int64), plain(lambda before, n: (before + n, tf_.stack([before, before + n])))
        )
        found = spans.enumerate().filter(plain(lambda i, span: span[1] > target)).take(1)
        return found.map(plain(lambda i, span: (i, span[0]))).get_single_element()

    def from_step(_: Tensor) -> Dataset:
        first, skips = first_chunk(tf_, start, rows_per_step, find)
        return tf_.data.Dataset.zip((chunks(first), skips)).map(plain(lambda rs, skip: (rs[0], rs[1], skip)))

    return tf_.data.Dataset.from_tensors(0).flat_map(plain(from_step))


def record_lengths(tf_: ModuleType, records: Tensor, parse_spec: Mapping[str, Feature]) -> Tensor:
    """The token counts (int64 `[n]`) of serialized text records, parsed."""
    return tf_.cast(tf_.io.parse_example(records, parse_spec)[TOKENS].row_lengths(), tf_.int64)


def _documents_of(src: ResolvedData | None) -> int:
    """The documents of the split `src` reads, from its manifest (0 when unknown)."""
    manifest, split = getattr(src, "manifest", None), getattr(src, "split", None)
    text = manifest.splits[split].text if manifest is not None and split in manifest.splits else None
    return text.documents if text is not None else 0


# TPU tiling: a core works on tiles of 8 rows by 128 lanes; shapes off that grid are padded.
TPU_LANES, TPU_SUBLANES = 128, 8


def plan_notes(
    pack: TextPacking, batch: int, src: ResolvedData | None = None, resumable: bool = False
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(notes for `describe()`, warnings about TPU tiling) of a text pipeline with `batch` rows
    a batch (per replica), reading `src` in the resumable order or not."""
    L = pack.sequence_length
    size, documents = chunk_size(pack), _documents_of(src)
    notes = [f"text: chunks of {size} documents, each packed on its own"]
    if documents and documents < size:
        notes[0] += f" (the split has {documents}: in training a chunk spans {size / documents:.1f} epochs)"
    if pack.histogram:
        notes.append(f"text: one epoch packs into ~{epoch_rows(pack):,} rows of {L} tokens (predicted)")
    if resumable and src is not None and lengths_file(src) is None:
        notes.append(
            f"text: {src.where} has no lengths file (converted before tfpipe wrote one), so start_step "
            "counts the rows before it by reading and parsing every record before the step; convert "
            "the split again to count them from one small file"
        )
    if pack.histogram:
        fill = predicted_fill(pack)
        notes.append(
            f"text: predicted fill {fill:.1%} (real tokens / slots, from the manifest's length histogram)"
        )
    tiling = []
    if L % TPU_LANES:
        tiling.append(
            f"sequence_length={L} is not a multiple of {TPU_LANES}: a TPU pads each row to "
            f"{-(-L // TPU_LANES) * TPU_LANES} lanes and computes on the padding."
        )
    if batch % TPU_SUBLANES:
        tiling.append(
            f"The batch per replica, {batch}, is not a multiple of {TPU_SUBLANES}: a TPU pads it to "
            f"{-(-batch // TPU_SUBLANES) * TPU_SUBLANES} rows and computes on the padding."
        )
    return tuple(notes), tuple(tiling)


def first_chunk(
    tf_: ModuleType,
    start: Callable[[], Tensor],
    rows_per_step: int,
    find: Callable[[Tensor], tuple[Tensor, Tensor]],
) -> tuple[Tensor, Dataset]:
    """(the chunk holding the start step's first row, each chunk's rows to skip from it on: the
    step's rows before it in that chunk, then 0s). `find(row)` gives (chunk, rows before it);
    a fixed start at 0 finds nothing, a Position's step is read when the iterator starts."""
    fixed = getattr(start, "step", None)
    target = tf_.cast(start(), tf_.int64) * rows_per_step
    zero = tf_.constant(0, tf_.int64)
    if fixed == 0:
        first, before = zero, zero
    elif fixed is not None:
        first, before = find(target)
    else:
        first, before = tf_.cond(target > 0, lambda: find(target), lambda: (zero, zero))
    skips = tf_.data.Dataset.from_tensors(target - before).concatenate(
        tf_.data.Dataset.from_tensors(zero).repeat()
    )
    return first, skips

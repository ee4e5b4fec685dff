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
from collections.abc import Callable
from typing import Any

from tfpipe._tf import plain, tf
from tfpipe.errors import ConfigError
from tfpipe.modalities.text import packer
from tfpipe.packing import reference
from tfpipe.packing.fill import epoch_rows, predicted_fill
from tfpipe.packing.spec import added_tokens, chunk_size
from tfpipe.pipeline.order import stream as order_stream
from tfpipe.pipeline.order.resumable import KEY_ROWS, MAX_POSITION, domain_key
from tfpipe.pipeline.read import raw
from tfpipe.pipeline.read.sharding import share_files

TOKENS = "tokens"


def documents(pack: Any, features: Any, where: str = "") -> Any:
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


def column(tf_: Any, n: Any, value: int) -> Any:
    """`[n, 1]` of `value`, as a RaggedTensor to concatenate with documents."""
    return tf_.RaggedTensor.from_tensor(tf_.fill(tf_.stack([n, 1]), tf_.constant(value, tf_.int64)))


def rows_of(pack: Any, lengths: Any) -> Any:
    """The rows a chunk packs into (int64 scalar), from its records' token counts alone (int64
    `[docs]`): each document as `documents` makes it, placed as `pack_stage` places it."""
    tf_ = tf()
    L = pack.sequence_length
    return packer.place(tf_, lengths + added_tokens(pack), L, pack.mode, pack.truncate)[-1]


def chunk_stage(p: Any) -> Callable[[Any], Any]:
    """`(record, source)` -> chunks `(records, sources, skip)`; the resumable order's stream
    yields chunks already."""
    size = chunk_size(p.decoder.packing)

    def chunk(ds: Any) -> Any:
        if p.order is not None:
            return ds
        tf_ = tf()
        zero = tf_.constant(0, tf_.int64)
        return ds.batch(size).map(plain(lambda records, sources: (records, sources, zero)))

    return chunk


def pack_stage(p: Any) -> Callable[[Any], Any]:
    """Parsed chunks -> rows `{"tokens", "segment_ids", "positions"}` ([L] int64 each, plus
    "label" when classifying; int32 again per batch, `batch_stage`), one an element."""
    pack = p.decoder.packing
    shuffle = p.training
    key = domain_key(int(p.config.seed or 0), KEY_ROWS)

    def rows(features: Any, source: Any, skip: Any) -> Any:
        tf_ = tf()
        docs = documents(pack, features, p.source.where)
        out = packer.pack(docs, pack.sequence_length, pack.mode, pack.truncate)
        if pack.classify:
            out["label"] = tf_.cast(features[pack.label], tf_.int32)
        if shuffle:
            rows = tf_.shape(out["tokens"], out_type=tf_.int64)[0]
            order = order_stream.permutation(tf_, rows, chunk_seed(tf_, key, docs))
            out = {k: tf_.gather(v, order) for k, v in out.items()}
        # int64 here, int32 again per batch (batch_stage): a function with int32 outputs among
        # several is instantiated on several devices (tfpipe._tf.plain), ~3x the CPU per iterator
        # for the packer's ~360 nodes.
        return {k: tf_.cast(v[skip:], tf_.int64) for k, v in out.items()}

    def pack_rows(ds: Any) -> Any:
        return raw.unbatch(
            ds.map(plain(rows), num_parallel_calls=p.config.map_parallelism, deterministic=p.deterministic)
        )

    return pack_rows


def chunk_seed(tf_: Any, key: int, docs: Any) -> Any:
    """The seed of a chunk's row order: (the rows key ^ the chunk's tokens, its length-weighted
    index sum), so the order is a function of the seed and the chunk's documents alone (a chunk
    knows no position outside the resumable order). `order_stream.permutation` keys by it."""
    return lengths_seed(tf_, key, tf_.cast(docs.row_lengths(), tf_.int64))


def lengths_seed(tf_: Any, key: int, lengths: Any) -> Any:
    """`chunk_seed` of a chunk whose documents (or a mixture's segments) have these lengths."""
    weighted = tf_.reduce_sum(lengths * tf_.range(1, tf_.size(lengths, out_type=tf_.int64) + 1))
    return tf_.stack(
        [tf_.bitwise.bitwise_xor(tf_.constant(key, tf_.int64), tf_.reduce_sum(lengths)), weighted]
    )


def batch_stage(p: Any) -> Callable[[Any], Any]:
    """Rows -> `[B, L]` int32 batches: whole in training; in eval the last one partial, padded
    with empty rows (segment ids 0) by the "pad" stage (`pad_remainder`, True for text by
    default)."""
    size = p.batch_size

    def batch(ds: Any) -> Any:
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


def start_limit(spec: Any, pack: Any) -> int:
    """The last step a resumable text pipeline can start at: the count of the rows before it
    walks at most max(MIN_COUNTED_EPOCHS epochs, MAX_COUNTED_DOCUMENTS documents), at the rows
    a split packs into by the manifest's histogram (its pieces for "none"; its tokens over L,
    at most the rows, for the packing modes: no simulation at build()); and the row position
    stays within `order.MAX_POSITION`, so its int64 arithmetic never wraps."""
    rows_per_step = spec.global_batch // spec.pipelines
    documents = sum(pack.histogram["counts"]) if pack.histogram else 0
    rows = 0
    if documents and (pack.mode == "none" or pack.classify):
        rows = epoch_rows(pack)
    elif documents:
        rows = sum(pack.histogram["tokens"]) // pack.sequence_length
    walked = max(MIN_COUNTED_EPOCHS * spec.examples, MAX_COUNTED_DOCUMENTS)
    if rows and documents:
        share = spec.pipelines if spec.by_record else 1  # this pipeline keeps 1/n of the stream
        return min(walked * rows // (documents * share * rows_per_step), MAX_POSITION // rows_per_step)
    return MAX_POSITION // rows_per_step


def start_fn(spec: Any, pack: Any, position: Any, step: int) -> Callable[[], Any]:
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

    def start() -> Any:
        step = tf_.cast(position.read(), tf_.int64)
        message = f"the step of the Position must be at most {limit} for this text dataset: {why}"
        bound = tf_.constant(limit, tf_.int64)
        with tf_.control_dependencies([tf_.debugging.assert_less_equal(step, bound, message=message)]):
            return tf_.identity(step)

    return start


def resumable_chunks(p: Any, read: Callable[..., Any], parallelism: int) -> Any:
    """The resumable order's stream in chunks `(records, sources, skip)`, from the step that
    `p.start()` gives: the chunk holding the step's first row, and its rows before it as skip."""
    tf_ = tf()
    spec, pack = p.order, p.decoder.packing
    size = chunk_size(pack)
    stride = spec.pipelines if spec.by_record else 1
    rows_per_step = spec.global_batch // spec.pipelines
    lengths = lengths_file(p.source)
    records = order_stream.cached_records(spec, read) if p.cache == "memory" else None  # one load

    def chunks(first: Any) -> Any:
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

    def find(target: Any) -> Any:
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

    def from_step(_: Any) -> Any:
        first, skips = first_chunk(tf_, p.start, rows_per_step, find)
        return tf_.data.Dataset.zip((chunks(first), skips)).map(plain(lambda rs, skip: (rs[0], rs[1], skip)))

    return tf_.data.Dataset.from_tensors(0).flat_map(plain(from_step))


def record_lengths(tf_: Any, records: Any, parse_spec: Any) -> Any:
    """The token counts (int64 `[n]`) of serialized text records, parsed."""
    return tf_.cast(tf_.io.parse_example(records, parse_spec)[TOKENS].row_lengths(), tf_.int64)


@dataclasses.dataclass(frozen=True, slots=True)
class Lengths:
    """A split's lengths file and what the manifest says it holds (checked as it is read)."""

    path: str
    documents: int
    tokens: int


def lengths_file(src: Any) -> Lengths | None:
    """The lengths file of the split `src` reads, or None (converted without one)."""
    manifest, split = src.manifest, src.split
    path = manifest.lengths_path(split) if manifest is not None and split is not None else None
    if path is None:
        return None
    text = manifest.split(split).text
    return Lengths(path, text.documents, text.tokens)


def read_lengths(lengths: Lengths) -> Any:
    """Every record's token count (int64 `[documents]`, in record order across the split's
    shards): one read of the lengths file, checked against the manifest's documents and tokens."""
    tf_ = tf()
    data = tf_.io.read_file(lengths.path)
    size = tf_.cast(tf_.strings.length(data), tf_.int64)
    expected = (
        f"Expected the lengths file {lengths.path} to hold {lengths.documents} uint32 lengths summing "
        f"to {lengths.tokens} tokens, as the manifest says; it was changed or is not this conversion's "
        "(convert the split again). Received:"
    )
    check = tf_.debugging.Assert(tf_.equal(size, 4 * lengths.documents), [expected, size, "bytes"])
    with tf_.control_dependencies([check]):
        # decode_raw has no uint32: int32 bits, made unsigned in int64.
        signed = tf_.cast(tf_.io.decode_raw(data, tf_.int32, little_endian=True), tf_.int64)
    values = tf_.bitwise.bitwise_and(signed, tf_.constant(0xFFFFFFFF, tf_.int64))
    total = tf_.reduce_sum(values)
    check = tf_.debugging.Assert(tf_.equal(total, lengths.tokens), [expected, total, "tokens"])
    with tf_.control_dependencies([check]):
        return tf_.identity(values)


def pipeline_rows(pack: Any, src: Any, pipelines: int) -> list[int] | None:
    """The rows each of `pipelines` eval input pipelines packs (its records in source order, in
    chunks, each packed on its own: the eval stages' rows, counted by the NumPy packer they
    equal), from the split's lengths file; None without one."""
    import numpy as np

    lengths = lengths_file(src)
    if lengths is None:
        return None
    values = load_lengths(lengths)
    starts = np.concatenate([[0], np.cumsum(src.counts)])
    out = []
    for j in range(pipelines):
        share = share_files(src.sizes, src.counts, pipelines, j, compressed=bool(src.compression))
        if share.shard_by == "record":
            mine = values[j::pipelines]
        else:
            mine = np.concatenate([values[starts[f] : starts[f + 1]] for f in share.files] or [values[:0]])
        out.append(count_rows(pack, mine))
    return out


def count_rows(pack: Any, lengths: Any) -> int:
    """The rows documents of these token counts pack into, chunk by chunk, as `rows_of` counts
    each chunk (in NumPy: `reference.place`, which the graph packer equals)."""
    size = chunk_size(pack)
    L = pack.sequence_length
    total = 0
    for begin in range(0, len(lengths), size):
        chunk = lengths[begin : begin + size] + added_tokens(pack)
        total += reference.place(chunk, L, pack.mode, pack.truncate).rows
    return int(total)


def load_lengths(lengths: Lengths) -> Any:
    """The lengths file as int64 NumPy (`read_lengths` outside the graph), checked against the
    manifest's documents and tokens."""
    import numpy as np

    from tfpipe import storage
    from tfpipe.errors import DataError

    data = storage.read_bytes(lengths.path)
    values = np.frombuffer(data, "<u4").astype(np.int64) if len(data) % 4 == 0 else None
    if values is None or len(values) != lengths.documents or int(values.sum()) != lengths.tokens:
        got = f"{len(data)} bytes" + (f", {int(values.sum())} tokens" if values is not None else "")
        raise DataError(
            f"Expected the lengths file {lengths.path} to hold {lengths.documents} uint32 lengths "
            f"summing to {lengths.tokens} tokens, as the manifest says; it was changed or is not this "
            f"conversion's (convert the split again). Received: {got}"
        )
    return values


def ordered_lengths(spec: Any, lengths: Lengths, size: int, read: Callable[[], Any] | None = None) -> Any:
    """The lengths of the records of the order's stream from position 0, in chunks of `size`
    (`(lengths, "")` pairs, as `order_stream.stream` batches records): the order applied to the
    lengths file read once (`read()`, else `read_lengths`), not to the records."""
    tf_ = tf()

    def table() -> Any:
        first = tf_.constant(spec.first_ids, tf_.int64)
        rows = tf_.ragged.range(first, first + tf_.constant(spec.counts, tf_.int64)).flat_values
        values = read() if read is not None else read_lengths(lengths)
        return tf_.gather(values, rows)  # this pipeline's files, in their order

    return order_stream.stream(
        spec,
        None,
        lambda: tf_.constant(0, tf_.int64),
        cached=True,
        sources=False,
        keys=False,
        batch=size,
        parallelism=1,
        load=table,
    )


def _documents_of(src: Any) -> int:
    """The documents of the split `src` reads, from its manifest (0 when unknown)."""
    manifest, split = getattr(src, "manifest", None), getattr(src, "split", None)
    text = manifest.splits[split].text if manifest is not None and split in manifest.splits else None
    return text.documents if text is not None else 0


# TPU tiling: a core works on tiles of 8 rows by 128 lanes; shapes off that grid are padded.
TPU_LANES, TPU_SUBLANES = 128, 8


def plan_notes(
    pack: Any, batch: int, src: Any = None, resumable: bool = False
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
    tf_: Any, start: Callable[[], Any], rows_per_step: int, find: Callable[[Any], tuple[Any, Any]]
) -> tuple[Any, Any]:
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

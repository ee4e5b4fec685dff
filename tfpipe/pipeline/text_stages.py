"""The text preset's stages: chunk, pack and batch (parse is the common one), and the resumable
order's stream of chunks.

    read (list_files ... repeat) -> chunk -> parse -> pack -> batch -> map (output form)

- chunk: `packing_numpy.chunk_documents` consecutive records `(records, sources, skip)`. `skip`
  is the rows of the chunk a resumed run has already trained on (0 but for its first chunk).
- parse: `tf.io.parse_example` of a whole chunk (tokens as a RaggedTensor).
- pack: the chunk's rows (packing.py), their order shuffled in training by a key drawn from
  the seed and the chunk's lengths, the first `skip` dropped; then one row an element.
- batch: `[B, L]` rows. Training drops nothing (the stream is endless); eval pads its last
  batch with empty rows (segment ids 0), so every shape is static and every document is read
  once.

Each chunk is packed on its own, so the packed stream is a function of the document order. The
resumable order gives that order from (seed, position); a run that starts at step K finds the
chunk holding its first row by counting the rows of every chunk before it, from lengths only
(parse, place; no tokens moved), then starts the order at that chunk.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tfpipe._tf import plain, tf
from tfpipe.pipeline import order_stream, packing
from tfpipe.pipeline.order import seed_key
from tfpipe.pipeline.packing_numpy import chunk_documents

TOKENS = "tokens"
# Key domain of the row shuffle (order_stream uses 0..2).
_ROWS = 3


def chunk_size(pack: Any) -> int:
    """Documents per chunk for a preset's `TextPacking`."""
    if pack.chunk is not None:
        return pack.chunk
    mean = pack.mean_tokens
    if mean and pack.eos is not None:
        mean += 1
    if pack.classify:  # one document a row: a chunk of CHUNK_ROWS rows
        mean = pack.sequence_length
    return chunk_documents(pack.sequence_length, mean)


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


def rows_of(pack: Any, features: Any, where: str = "") -> Any:
    """The rows a parsed chunk packs into (int64 scalar), from its lengths alone."""
    return packing.rows_of(documents(pack, features, where), pack.sequence_length, pack.mode, pack.truncate)


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
    """Parsed chunks -> rows `{"tokens", "segment_ids", "positions"}` ([L] int32 each, plus
    "label" when classifying), one an element."""
    pack = p.decoder.packing
    shuffle = p.training
    seed = seed_key(int(p.config.seed or 0))

    def rows(features: Any, source: Any, skip: Any) -> Any:
        tf_ = tf()
        docs = documents(pack, features, p.source.where)
        out = packing.pack(docs, pack.sequence_length, pack.mode, pack.truncate)
        if pack.classify:
            out["label"] = tf_.cast(features[pack.label], tf_.int32)
        if shuffle:
            order = row_order(
                tf_, tf_.shape(out["tokens"], out_type=tf_.int64)[0], chunk_key(tf_, seed, docs)
            )
            out = {k: tf_.gather(v, order) for k, v in out.items()}
        return {k: v[skip:] for k, v in out.items()}

    def pack_rows(ds: Any) -> Any:
        return ds.map(
            plain(rows), num_parallel_calls=p.config.map_parallelism, deterministic=p.deterministic
        ).unbatch()

    return pack_rows


def chunk_key(tf_: Any, seed: int, docs: Any) -> Any:
    """A key of the chunk from the seed and its documents' lengths (as `packing_numpy.chunk_key`)."""
    lengths = tf_.cast(docs.row_lengths(), tf_.int64)
    weighted = tf_.reduce_sum(lengths * tf_.range(1, tf_.size(lengths, out_type=tf_.int64) + 1))
    base = tf_.constant(seed, tf_.int64)
    return order_stream.fold(tf_, base, _ROWS, tf_.size(lengths), tf_.reduce_sum(lengths), weighted)


def row_order(tf_: Any, rows: Any, key: Any) -> Any:
    """A permutation of `rows` keyed by `key` (as `packing_numpy.row_order`)."""
    return tf_.argsort(
        order_stream.mix(tf_, tf_.bitwise.bitwise_xor(key, order_stream.mix(tf_, tf_.range(rows)))),
        stable=True,
    )


def batch_stage(p: Any) -> Callable[[Any], Any]:
    """Rows -> `[B, L]` batches: whole in training; eval's last one padded with empty rows."""
    size = p.batch_size

    def batch(ds: Any) -> Any:
        tf_ = tf()
        if p.training or p.config.drop_remainder:
            return ds.batch(size, drop_remainder=True)

        def pad(rows: Any) -> Any:
            def fill(v: Any) -> Any:
                short = size - tf_.shape(v)[0]
                v = tf_.pad(v, [[0, short]] + [[0, 0]] * (len(v.shape) - 1))
                return tf_.ensure_shape(v, [size, *v.shape[1:]])

            return {k: fill(v) for k, v in rows.items()}

        return ds.batch(size).map(plain(pad))

    return batch


def start_fn(spec: Any, pack: Any, position: Any, step: int) -> Callable[[], Any]:
    """The step a resumable text pipeline starts at: fixed, or the Position's (read when an
    iterator starts). A Position is bound to what a step means, packing included."""
    tf_ = tf()
    if position is None:
        fixed = lambda: tf_.constant(step, tf_.int64)  # noqa: E731
        fixed.step = step  # type: ignore[attr-defined]  # known now: no search traced at step 0
        return fixed
    position.bind(spec.identity() | pack.identity() | {"chunk": chunk_size(pack)})
    return lambda: tf_.cast(position.read(), tf_.int64)


def resumable_chunks(p: Any, read: Callable[..., Any], parallelism: int) -> Any:
    """The resumable order's stream in chunks `(records, sources, skip)`, from the step that
    `p.start()` gives: the chunk holding the step's first row, and its rows before it as skip."""
    tf_ = tf()
    spec, pack = p.order, p.decoder.packing
    size = chunk_size(pack)
    stride = spec.pipelines if spec.by_record else 1
    rows_per_step = spec.global_batch // spec.pipelines
    parse_spec = {TOKENS: p.decoder.spec[TOKENS]}

    def chunks(first: Any) -> Any:
        return order_stream.stream(
            spec,
            read,
            lambda: first * size * stride,
            cached=p.cache == "memory",
            sources=p.decoder.needs_source,
            keys=False,
            batch=size,
            parallelism=parallelism,
        )

    def find(target: Any) -> Any:
        """(chunk, rows before it) of the chunk holding row `target` of the stream."""
        counts = chunks(tf_.constant(0, tf_.int64)).map(
            plain(lambda records, _: rows_of(pack, tf_.io.parse_example(records, parse_spec), p.source.where))
        )
        spans = counts.scan(
            tf_.constant(0, tf_.int64), plain(lambda before, n: (before + n, tf_.stack([before, before + n])))
        )
        found = spans.enumerate().filter(plain(lambda i, span: span[1] > target)).take(1)
        return found.map(plain(lambda i, span: (i, span[0]))).get_single_element()

    fixed = getattr(p.start, "step", None)

    def from_step(_: Any) -> Any:
        target = p.start() * rows_per_step
        zero = tf_.constant(0, tf_.int64)
        if fixed == 0:
            first, before = zero, zero
        elif fixed is not None:
            first, before = find(target)
        else:  # a Position: its step is read when the iterator starts
            first, before = tf_.cond(target > 0, lambda: find(target), lambda: (zero, zero))
        skips = tf_.data.Dataset.from_tensors(target - before).concatenate(
            tf_.data.Dataset.from_tensors(zero).repeat()
        )
        return tf_.data.Dataset.zip((chunks(first), skips)).map(plain(lambda rs, skip: (rs[0], rs[1], skip)))

    return tf_.data.Dataset.from_tensors(0).flat_map(plain(from_step))


# TPU tiling: a core works on tiles of 8 rows by 128 lanes; shapes off that grid are padded.
TPU_LANES, TPU_SUBLANES = 128, 8


def plan_notes(pack: Any, batch: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(notes for `describe()`, warnings about TPU tiling) of a text pipeline with `batch` rows
    a batch (per replica)."""
    from tfpipe.pipeline.fill import predict_fill

    L = pack.sequence_length
    notes = [f"text: chunks of {chunk_size(pack)} documents, each packed on its own"]
    if pack.histogram:
        fill = predict_fill(pack.histogram, L, pack.mode, truncate=pack.truncate, eos=pack.eos is not None)
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

"""A text mixture's pack and map stages (in place of one source's, modalities/text/stages.py).

- By tokens (`tokens_stage`): a chunk is the sources' segments (mixture/stream.py); each
  source's are packed on their own (`packer.pack_ranges`: a segment is a document's tokens
  `[lo, hi)`, cut every L from `lo`), so every row holds one source, and the rows are put in
  `balanced_order`: a random order keyed by the chunk, then each source's rows spread over the
  chunk by the midpoint of their tokens in that source's (pieces.balanced_order in NumPy).
- By documents (`documents_stage`): the chunk's documents packed together, rows in a random
  order, as one source's are.

Each row also carries its real tokens by source, `MIXTURE_TOKENS` (`[sources]`): bench counts
the shares from the batches it counts (`counting`, modalities/text/bench/mixshare.py). The mixture's
batch stage drops it, so a model never sees it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING

from tfpipe._tf import Dataset, Tensor, plain, tf
from tfpipe.modalities.text import packer
from tfpipe.modalities.text import stages as text_stages
from tfpipe.pipeline.mixture.pieces import KEY_BITS
from tfpipe.pipeline.order import stream as order_stream
from tfpipe.pipeline.order.resumable import KEY_ROWS, domain_key
from tfpipe.pipeline.read import raw
from tfpipe.pipeline.stages.stage import StageFn, StagePlan

if TYPE_CHECKING:
    from tfpipe.pipeline.stages.pipeline import Pipeline

# The rows' real tokens by source, `[sources]` a row (`[B, sources]` a batch): bench's count.
MIXTURE_TOKENS = "mixture_tokens"


def balanced_order(
    tf_: ModuleType, source: Tensor, tokens: Tensor, permutation: Tensor, sources: int
) -> Tensor:
    """`pieces.balanced_order` in TensorFlow: each row (of source `source`, `tokens` real tokens)
    at the midpoint of its tokens in its source's, in `permutation`'s order; ties to the earlier
    source, then to the earlier row."""
    src, t = tf_.gather(source, permutation), tf_.gather(tokens, permutation)
    by = tf_.argsort(src, stable=True)  # source by source, each in the permutation's order
    src, t = tf_.gather(src, by), tf_.gather(t, by)
    total = tf_.math.unsorted_segment_sum(t, src, sources)
    mine = tf_.cumsum(t) - tf_.gather(tf_.cumsum(total, exclusive=True), src)
    key = (2 * mine - t) * (1 << KEY_BITS) // (2 * tf_.gather(total, src))
    return tf_.gather(permutation, tf_.gather(by, tf_.argsort(key, stable=True)))


def tokens_stage(p: StagePlan, sources: int) -> StageFn:
    """Chunks `(features, sources, skip, source index, lo, hi, tokens)` -> rows (one an element):
    `{"tokens", "segment_ids", "positions"}` (and "label" when classifying) int64 `[L]`, plus
    MIXTURE_TOKENS."""
    pack = p.decoder.packing
    key = domain_key(int(p.config.seed or 0), KEY_ROWS)
    L = pack.sequence_length

    def rows(
        features: Mapping[str, Tensor],
        _: Tensor,
        skip: Tensor,
        source: Tensor,
        lo: Tensor,
        hi: Tensor,
        kept: Tensor,
    ) -> dict[str, Tensor]:
        tf_ = tf()
        docs = text_stages.documents(pack, features, "the mixture's sources")
        lengths = tf_.cast(docs.row_lengths(), tf_.int64)
        check = tf_.debugging.Assert(
            tf_.reduce_all(tf_.equal(tf_.minimum(lengths, L) if pack.truncate else lengths, kept)),
            [
                "Expected each document's tokens to be as its source's lengths file says (the mixture "
                "cuts documents by it); a shard was changed after its conversion. Received:",
                lengths,
                kept,
            ],
        )
        with tf_.control_dependencies([check]):
            starts = tf_.cast(docs.row_starts(), tf_.int64) + lo
        size = hi - lo
        out, (doc, row, length) = packer.pack_ranges(
            docs.values, starts, size, L, pack.mode, source=source, sources=sources
        )
        if pack.classify:  # one segment (a whole document) a row, source by source as they come
            out["label"] = tf_.cast(features[pack.label], tf_.int32)
        rows_ = tf_.shape(out["tokens"], out_type=tf_.int64)[0]
        real = tf_.math.unsorted_segment_sum(length, row, rows_)
        source_of = tf_.math.unsorted_segment_max(tf_.gather(source, doc), row, rows_)
        count = tf_.size(real, out_type=tf_.int64)
        shuffled = order_stream.permutation(tf_, count, text_stages.lengths_seed(tf_, key, size))
        order = balanced_order(tf_, source_of, real, shuffled, sources)
        out[MIXTURE_TOKENS] = tf_.one_hot(source_of, sources, dtype=tf_.int64) * real[:, None]
        return {k: tf_.cast(tf_.gather(v, order)[skip:], tf_.int64) for k, v in out.items()}

    return _rows_stage(p, rows)


def documents_stage(p: StagePlan, sources: int) -> StageFn:
    """Chunks `(features, sources, skip, source index)` of mixed documents -> rows (one an
    element) as one source's pack stage makes them, plus MIXTURE_TOKENS."""
    pack = p.decoder.packing
    key = domain_key(int(p.config.seed or 0), KEY_ROWS)

    def rows(features: Mapping[str, Tensor], _: Tensor, skip: Tensor, source: Tensor) -> dict[str, Tensor]:
        tf_ = tf()
        docs = text_stages.documents(pack, features, "the mixture's sources")
        out, (doc, row, length) = packer.pack_ranges(
            docs.values,
            tf_.cast(docs.row_starts(), tf_.int64),
            tf_.cast(docs.row_lengths(), tf_.int64),
            pack.sequence_length,
            pack.mode,
            pack.truncate,
        )
        if pack.classify:
            out["label"] = tf_.cast(features[pack.label], tf_.int32)
        n = tf_.shape(out["tokens"], out_type=tf_.int64)[0]
        cell = row * sources + tf_.gather(source, doc)
        out[MIXTURE_TOKENS] = tf_.reshape(
            tf_.math.unsorted_segment_sum(length, cell, n * sources), [-1, sources]
        )
        order = order_stream.permutation(tf_, n, text_stages.chunk_seed(tf_, key, docs))
        return {k: tf_.cast(tf_.gather(v, order)[skip:], tf_.int64) for k, v in out.items()}

    return _rows_stage(p, rows)


def _rows_stage(p: StagePlan, rows: Callable[..., dict[str, Tensor]]) -> StageFn:
    def pack_rows(ds: Dataset) -> Dataset:
        return raw.unbatch(
            ds.map(plain(rows), num_parallel_calls=p.config.map_parallelism, deterministic=p.deterministic)
        )

    return pack_rows


def batch_stage(p: StagePlan) -> StageFn:
    """Rows -> `[B, L]` int32 batches as one source's (text/stages.py), MIXTURE_TOKENS dropped
    in the same map: the model never sees it, and no map is added for it. bench counts it on the
    pack stage's rows batched alike (`counting`)."""
    size = p.batch_size

    def batch(ds: Dataset) -> Dataset:
        tf_ = tf()
        batches = ds.batch(size, drop_remainder=True)
        return batches.map(
            plain(lambda rows: {k: tf_.cast(v, tf_.int32) for k, v in rows.items() if k != MIXTURE_TOKENS})
        )

    return batch


def counting(pipe: Pipeline) -> Dataset:
    """The mixture's batches as its batch stage makes them, MIXTURE_TOKENS kept: the pack stage's
    rows batched (bench's count by source)."""
    tf_ = tf()
    names = [s.name for s in pipe.stages]
    rows = pipe.dataset(names.index("pack") + 1)
    return rows.batch(pipe.batch_size, drop_remainder=True).map(
        plain(lambda r: {k: tf_.cast(v, tf_.int32) for k, v in r.items()})
    )

"""A text mixture's realised share of real tokens by source, counted over bench's batches.

The packed rows do not say which source a token came from, but the mixed stream does, in closed
form: position `g` of the stream (a document) is source `block(g // BLOCK)[g % BLOCK]`
(mixture_spec.py). So the same choices, run over a stream of source ids (`mixture_stream.mixed`,
the function the documents are mixed by), cut into the pipeline's chunks and zipped with the
pipeline's own parsed chunks, give each document its source; each chunk's pieces are placed as
the pack stage places them (`packing.place`) and shuffled by the same key, so each row gets its
real tokens by source. Every row is checked against the pipeline's own packed row (its real
tokens, segment id not 0): a row that disagrees means the count lost track, and is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tfpipe._tf import plain, tf
from tfpipe.bench.results import MixShare
from tfpipe.errors import DataError
from tfpipe.modalities.text import packer
from tfpipe.modalities.text import stages as text_stages
from tfpipe.pipeline.mixture import stream as mixture_stream
from tfpipe.pipeline.order import stream as order_stream
from tfpipe.pipeline.order.resumable import KEY_ROWS, domain_key

if TYPE_CHECKING:
    from tfpipe.pipeline.mixture.plan import MixturePipeline

# Rows compared and counted a step of the Python loop (one row a step cost ~2 ms under load).
ROWS_AT_ONCE = 1024


def measure(pipe: MixturePipeline, *, batches: int) -> tuple[MixShare, ...]:
    """Each source's real tokens over the pipeline's first `batches` batches (from step 0).

    Args:
      pipe: a planned text mixture (start_step 0, as bench plans it).
      batches: the batches to count, bench's counting pass's.

    Raises:
      DataError: a row's real tokens by source do not sum to the pipeline's own row's.
    """
    mix = pipe.mixture
    assert mix is not None
    counts = by_row(pipe, rows=batches * pipe.batch_size).sum(0)
    epochs = pipe.epochs_at(batches)
    return tuple(
        MixShare(name=n, weight=w, real_tokens=int(c), epoch=epochs[n])
        for n, w, c in zip(mix.names, mix.weights, counts, strict=True)
    )


def by_row(pipe: MixturePipeline, *, rows: int) -> Any:
    """The real tokens of each source in each of the pipeline's first `rows` rows (from step 0):
    an int64 NumPy array `[rows, sources]`, each row checked against the pipeline's own.

    Raises:
      DataError: a row's real tokens by source do not sum to the pipeline's own row's.
    """
    import numpy as np

    assert pipe.mixture is not None and pipe.decoder.packing is not None
    tf_ = tf()
    real = pipe.dataset(_upto(pipe, "pack")).map(
        lambda row: tf_.math.count_nonzero(row["segment_ids"], dtype=tf_.int64)
    )
    out = []
    done = 0
    for n, by_source in tf_.data.Dataset.zip((real, _tagged_rows(pipe))).take(rows).batch(ROWS_AT_ONCE):
        n, by_source = n.numpy(), by_source.numpy()
        wrong = np.flatnonzero(n != by_source.sum(1))
        if wrong.size:
            i = int(wrong[0])
            raise DataError(
                f"bench lost track of the mixture's rows: row {done + i} holds {n[i]} real tokens, "
                f"its documents by source {by_source[i].tolist()}. This is a bug in tfpipe's "
                "bench (bench/mixshare.py), not in the data; please report it."
            )
        out.append(by_source)
        done += len(n)
    return np.concatenate(out) if out else np.zeros((0, len(pipe.mixture.quotas)), np.int64)


def window_shares(pipe: MixturePipeline, *, batches: int, window: int) -> Any:
    """Each source's share of the real tokens in every window of `window` consecutive batches
    among the first `batches` (from step 0): a float NumPy array `[batches - window + 1, sources]`.

    What a training run sees of the weights over a stretch of `window` steps; exact for the
    seed (the order is a function of it), not a measure of speed.
    """
    import numpy as np

    per_batch = by_row(pipe, rows=batches * pipe.batch_size).reshape(batches, pipe.batch_size, -1).sum(1)
    totals = np.cumsum(np.vstack([np.zeros_like(per_batch[:1]), per_batch]), 0)
    tokens = totals[window:] - totals[:-window]
    return tokens / tokens.sum(1, keepdims=True)


def totals(pipe: MixturePipeline) -> tuple[int, int]:
    """(documents, tokens) of all the mixture's sources' splits, from their manifests."""
    texts: list[Any] = [p.source.manifest.split(p.source.split).text for p in pipe.parts]  # type: ignore[union-attr, arg-type]
    return sum(int(t.documents) for t in texts), sum(int(t.tokens) for t in texts)


def _upto(pipe: MixturePipeline, name: str) -> int:
    """The stages up to and including the one named `name`."""
    names: list[str] = [s.name for s in pipe.stages]
    return names.index(name) + 1


def _source_ids(tf_: Any, pipe: MixturePipeline) -> Any:
    """Each chunk's documents' source index (int64 `[chunk]`), in the mixed stream's order."""
    mix = pipe.mixture
    assert mix is not None

    def streams(_: Any, __: bool) -> list[Any]:
        return [
            tf_.data.Dataset.from_tensors((tf_.fill([q], tf_.constant(k, tf_.int64)),)).repeat()
            for k, q in enumerate(mix.quotas)
        ]

    ids = mixture_stream.mixed(tf_, mix, tf_.constant(0, tf_.int64), streams)
    return ids.rebatch(pipe.chunk, drop_remainder=True).map(lambda s: s)


def _tagged_rows(pipe: MixturePipeline) -> Any:
    """The pipeline's packed rows as `[sources]` real tokens by source, one row an element."""
    tf_ = tf()
    pack = pipe.decoder.packing
    assert pack is not None  # a text mixture: measure() checked it
    sources = len(pipe.mixture.quotas)  # type: ignore[union-attr]
    key = domain_key(int(pipe.config.seed or 0), KEY_ROWS)
    L = pack.sequence_length

    def rows(chunk: Any, ids: Any) -> Any:
        features, _, skip = chunk
        docs = text_stages.documents(pack, features)
        lengths = tf_.cast(docs.row_lengths(), tf_.int64)
        doc, _, length, row, _, count = packer.place(tf_, lengths, L, pack.mode, pack.truncate)
        cell = row * sources + tf_.gather(ids, doc)
        by_source = tf_.reshape(tf_.math.unsorted_segment_sum(length, cell, count * sources), [-1, sources])
        order = order_stream.permutation(tf_, count, text_stages.chunk_seed(tf_, key, docs))
        return tf_.gather(by_source, order)[skip:]

    chunks = pipe.dataset(_upto(pipe, "parse"))
    return tf_.data.Dataset.zip((chunks, _source_ids(tf_, pipe))).map(plain(rows)).unbatch()

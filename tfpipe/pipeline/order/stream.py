"""The resumable order as a tf.data stream (the order itself is described in order/resumable.py).

The graph is small and flat on purpose: every dataset function is instantiated again, through
TensorFlow's graph optimizer, for each new iterator (each `iter()`, each Keras validation), so
start-up costs what the functions and their nodes cost. The stream is three functions deep
(tests/pipeline/order/test_stream_graph.py pins the count):

- `from_start` (once per iterator): the start position read, the first global group found;
- `group` (once per group of `cycle` files): the epoch's file permutation, the group's files
  and its windows;
- `arrange` (once per window): the window permuted, this pipeline's records picked from it,
  and each record's augmentation seed.

Permutations are one stateless Philox shuffle op each, and every seed is a structured pair
`(domain key, value)`: TensorFlow's stateless ops scramble their seed themselves (a Philox
round), so no hash is written here.

A group's windows come from one of two sources that yield the same records in the same order
(tests/pipeline/order/test_training_order.py checks it):

- streamed: the group's files read together by a deterministic interleave, in runs of
  `spec.run` records, cut into windows; the windows before the start are skipped as
  serialized records (no parse, no decode), and the groups before it are not opened;
- cached: every record of the pipeline's files loaded once into memory (cache="memory"), and
  each group's stream order computed from the counts: the interleave's round-robin of runs is
  a sort by (run, file slot, record).

The cached form orders any table with one row a record, in file order: the text pipeline
orders its documents' lengths with it (`load=`), to count the packed rows before a start
without reading a record (the text modality's stages.py).

A weighted mixture of several datasets (issue 35) sits on top of this: each source's stream is
`stream(spec_s, ..., start=start_s)`, and a choice stream (a function of the global position)
says which source each global position takes, so each source's start is its count of earlier
positions: `tf.data.Dataset.choose_from_datasets(streams, choices)`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tfpipe._tf import plain, tf
from tfpipe.pipeline.order.resumable import KEY_AUGMENT, KEY_FILES, KEY_WINDOWS, OrderSpec
from tfpipe.pipeline.read import raw

# Endless ranges end here: a global group index e * groups + g may pass 2**62 near the
# position bound (order.MAX_POSITION), never 2**63 - 1.
_FOREVER = (1 << 63) - 1


def permutation(tf_: Any, n: Any, seed: Any) -> Any:
    """A permutation of `range(n)` (int64 `[n]`) keyed by the `[2]` int64 `seed` (one Philox
    shuffle op, which scrambles every bit of its seed); `order.Shuffle` in plain Python.

    Not `tf.random.experimental.index_shuffle`: TensorFlow 2.21's kernel keys it by the low 8
    bits of each seed word alone (seeds 0 and 256 give one permutation), so structured seeds
    (a position) would repeat every 256."""
    # What stateless_shuffle(..., alg="philox") computes, in 2 ops, not its Python's 40 (the
    # seed scrambled into a Philox key and counter, then shuffled; tf.data runs on the CPU).
    key, counter = tf_.raw_ops.StatelessRandomGetKeyCounter(seed=seed)
    return tf_.raw_ops.StatelessShuffle(value=tf_.range(n, dtype=tf_.int64), key=key, counter=counter, alg=1)


def cached_records(spec: OrderSpec, read: Callable[..., Any]) -> Any:
    """A dataset of one element: every record of the pipeline's files, in file order (one string
    tensor), cached in memory (cache="memory").

    Made once with the pipeline, outside its functions, so the cache belongs to the dataset: the
    first iterator loads it, every later one (each `iter()`, each Keras epoch) takes the loaded
    tensor as it is, as tf.data's own `cache()` does. Made inside a dataset function, it would
    load again for each iterator (order version 2 did: 84 MB read again per `iter()`).
    """
    tf_ = tf()
    files = tf_.data.Dataset.from_tensor_slices(
        (tf_.constant(spec.files), tf_.constant(spec.sizes, tf_.int64), tf_.constant(spec.counts, tf_.int64))
    )
    # One file after another, the next two opened ahead (as eval reads).
    records = files.interleave(
        plain(lambda p, s, c: read(p, s, c)),
        cycle_length=1,
        num_parallel_calls=tf_.data.AUTOTUNE,
        deterministic=True,
    )
    return raw.rebatch(records, spec.examples).cache()


def stream(
    spec: OrderSpec,
    read: Callable[..., Any],
    start: Callable[[], Any],
    *,
    cached: bool,
    sources: bool,
    keys: bool,
    batch: int | None,
    parallelism: int,
    load: Callable[[], Any] | None = None,
) -> Any:
    """The pipeline's endless ordered stream, starting at stream position `start()` (read when
    the iterator starts, so a Position restored after `build()` is honoured).

    Args:
      spec: the order.
      read: `(path, size, count) -> Dataset` of `(records, sources)` groups: one file's
        records, serialized, in file order, in groups of any size.
      start: returns the start position in the stream (global with record sharding), a
        scalar int64 tensor: `spec.start_of(step)`.
      cached: load every record into memory once (by the first iterator, shared by every later
        one: `cached_records`), then order from there; else read each group's files as the
        order reaches them.
      sources: `read` pairs records with their shard path (else with "").
      keys: add each record's augmentation seed (`[2]` int64, from the seed, the epoch and the
        example id) as a third element.
      batch: yield batches of `batch` records (batched presets), or None: single records.
      parallelism: files read in parallel (AUTOTUNE or a count).
      load: with `cached`, returns the table to order instead of the records `read` gives: a
        tensor whose rows are the pipeline's records in file order (its files in `spec.files`
        order), called when the iterator starts. `read` is then never called. None: the
        records `cached_records` loads, made here (so outside any function when `stream` is).

    Returns:
      A `tf.data.Dataset` of `(record, source[, key])`, or of such batches (of the table's
      rows with `load`).
    """
    if cached and load is None:
        records = cached_records(spec, read)
        load = lambda: records.get_single_element()[0]  # noqa: E731
    order = _Order(tf(), spec, read, start, sources, parallelism, load, cached=cached, keys=keys)
    # The next window is read and arranged while the current one goes out.
    ds = order.tf.data.Dataset.from_tensors(0).flat_map(plain(order.from_start)).prefetch(1)
    return raw.unbatch(ds) if batch is None else raw.rebatch(ds, batch, drop_remainder=True)


class _Order:
    """The order's constants and its three graph functions (see the module doc)."""

    def __init__(
        self,
        tf_: Any,
        spec: OrderSpec,
        read: Any,
        start: Callable[[], Any],
        sources: bool,
        parallelism: int,
        table: Any,
        *,
        cached: bool,
        keys: bool,
    ) -> None:
        self.tf, self.spec, self.read, self.start, self.table = tf_, spec, read, start, table
        self.parallelism, self.cached, self.keys = parallelism, cached, keys
        i64 = tf_.int64
        self.paths = tf_.constant(spec.files)
        self.sizes = tf_.constant(spec.sizes, i64)
        self.counts = tf_.constant(spec.counts, i64)
        self.first_ids = tf_.constant(spec.first_ids, i64)
        # The source string of each file's records: its path, or "" when nothing names it.
        self.sources = self.paths if sources else tf_.fill([len(spec.files)], "")
        self.files, self.total, self.cycle, self.window = (
            len(spec.files),
            spec.examples,
            spec.cycle,
            spec.window,
        )
        self.groups = -(-self.files // self.cycle)
        self.key = {d: tf_.constant(spec.key(d), i64) for d in (KEY_FILES, KEY_WINDOWS, KEY_AUGMENT)}

    def layout(self, e: Any) -> tuple[Any, Any, Any]:
        """Epoch `e`'s file permutation, and each group's first epoch position and records."""
        tf_ = self.tf
        perm = permutation(tf_, self.files, tf_.stack([self.key[KEY_FILES], e]))
        padded = tf_.concat(
            [tf_.gather(self.counts, perm), tf_.zeros([self.groups * self.cycle - self.files], tf_.int64)], 0
        )
        totals = tf_.reduce_sum(tf_.reshape(padded, [self.groups, self.cycle]), axis=1)
        return perm, tf_.cumsum(totals, exclusive=True), totals

    def from_start(self, _: Any) -> Any:
        """Every group from the start position's on, endless: global group G is group
        `G % groups` of epoch `G // groups`."""
        tf_ = self.tf
        begin = tf_.cast(self.start(), tf_.int64)
        e0, at = begin // self.total, begin % self.total
        _, lo, totals = self.layout(e0)
        g0 = tf_.searchsorted(lo + totals, tf_.reshape(at, [1]), side="right", out_type=tf_.int64)[0]
        first, offset = e0 * self.groups + g0, at - tf_.gather(lo, g0)
        everything = self.table() if self.cached else None

        def group(G: Any) -> Any:
            return self.group(G, tf_.where(tf_.equal(G, first), offset, 0), everything)

        return tf_.data.Dataset.range(first, _FOREVER).flat_map(plain(group))

    def group(self, G: Any, offset: Any, everything: Any) -> Any:
        """Global group `G` from its record `offset` on, in permuted windows."""
        tf_ = self.tf
        e, gi = G // self.groups, G % self.groups
        perm, lo, _ = self.layout(e)
        members = perm[gi * self.cycle : tf_.minimum((gi + 1) * self.cycle, self.files)]
        j0 = offset // self.window
        # The stream position of the group's first record; the first window's records before
        # the start are dropped after the permutation.
        where = tf_.stack([e, e * self.total + tf_.gather(lo, gi), j0, offset - j0 * self.window])
        if self.cached:
            windows = self.cached_windows(members, j0)
            fetch = lambda index, pick: tf_.gather(everything, tf_.gather(index, pick))  # noqa: E731
            names = lambda files, pick: tf_.gather(self.sources, tf_.gather(files, pick))  # noqa: E731
        else:
            windows, fetch, names = self.streamed_windows(members, j0), tf_.gather, tf_.gather
        numbered = tf_.data.Dataset.zip((windows, tf_.data.Dataset.range(j0, _FOREVER)))
        return numbered.map(plain(lambda win, j: self.arrange(win, j, where, fetch, names)))

    def arrange(self, win: Any, j: Any, where: Any, fetch: Any, names: Any) -> Any:
        """Window `j` permuted: this pipeline's records of it, from the start on."""
        tf_, spec = self.tf, self.spec
        (items, srcs), ids = win if self.keys else (win, None)
        e, position, j0, skip = tf_.unstack(where)
        position += j * self.window  # the window's first stream position
        n = tf_.shape(items, out_type=tf_.int64)[0]
        perm = permutation(tf_, n, tf_.stack([self.key[KEY_WINDOWS], position]))
        t = tf_.range(tf_.where(tf_.equal(j, j0), skip, 0), n)
        if spec.by_record:  # keep this pipeline's positions of the global stream
            t = tf_.boolean_mask(t, tf_.equal((position + t) % spec.pipelines, spec.index))
        pick = tf_.gather(perm, t)
        out = (fetch(items, pick), names(srcs, pick))
        if self.keys:  # each record's augmentation seed: (the epoch's key, the example id)
            ids = tf_.gather(ids, pick)
            key = tf_.bitwise.bitwise_xor(self.key[KEY_AUGMENT], e)
            out += (tf_.stack([tf_.fill(tf_.shape(ids), key), ids], axis=-1),)
        return out

    def _runs(self, path: Any, size: Any, count: Any, first: Any) -> Any:
        # Runs of exactly `run` records, whatever grouping `read` chose (a re-read after a
        # network error may regroup), so the round-robin is a function of the counts alone.
        runs = raw.rebatch(self.read(path, size, count), self.spec.run)
        if not self.keys:
            return runs
        ids = self.tf.data.Dataset.range(first, first + count).batch(self.spec.run)
        return self.tf.data.Dataset.zip((runs, ids))

    def streamed_windows(self, members: Any, j0: Any) -> Any:
        """Windows `((records, sources)[, ids])` of the group's files read together."""
        tf_ = self.tf
        files = tf_.data.Dataset.from_tensor_slices(
            tuple(tf_.gather(c, members) for c in (self.paths, self.sizes, self.counts, self.first_ids))
        )
        runs = files.interleave(
            plain(self._runs),
            cycle_length=self.cycle,
            block_length=1,
            num_parallel_calls=self.parallelism,
            deterministic=True,  # the order must not depend on which file answers first
        )
        # Whole windows before the start are skipped here, as serialized records.
        return raw.rebatch(runs, self.window).skip(j0)

    def cached_windows(self, members: Any, j0: Any) -> Any:
        """Windows `((indices into the loaded records, file indices)[, ids])` from window `j0`
        of the group on (see `stream`'s `load`)."""
        tf_, run = self.tf, self.spec.run
        offsets = tf_.cumsum(self.counts, exclusive=True)
        counts = tf_.gather(self.counts, members)
        k = tf_.size(members, out_type=tf_.int64)
        slot = tf_.repeat(tf_.range(k), counts)
        t = tf_.range(tf_.reduce_sum(counts)) - tf_.repeat(tf_.cumsum(counts, exclusive=True), counts)
        # The interleave's order: runs round-robin over the files, records in file order.
        order = tf_.argsort(((t // run) * k + slot) * run + t % run, stable=True)
        file = tf_.gather(members, tf_.gather(slot, order))
        t = tf_.gather(t, order)
        rest = slice(j0 * self.window, None)
        part = (tf_.gather(offsets, file) + t)[rest], file[rest]
        if self.keys:
            part = (part, (tf_.gather(self.first_ids, file) + t)[rest])
        return tf_.data.Dataset.from_tensor_slices(part).batch(self.window)

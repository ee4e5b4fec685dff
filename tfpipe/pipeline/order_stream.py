"""The resumable order as a tf.data stream (the order itself is described in order.py).

Epochs, groups and windows are computed in the graph from the start position, which is read
when the iterator starts. A group's windows come from one of two sources that yield the same
records in the same order (tests/pipeline/test_pipeline_order.py checks it):

- streamed: the group's files read together by a deterministic interleave, in runs of
  `spec.run` records, cut into windows; the windows before the start are skipped as
  serialized records (no parse, no decode), and the groups before it are not opened;
- cached: every record of the pipeline's files loaded once into memory (cache="memory"),
  and each group's stream order computed from the counts: the interleave's round-robin of
  runs is a sort by (run, file slot, record).

The cached form orders any table with one row a record, in file order: the text pipeline
orders its documents' lengths with it (`load=`), to count the packed rows before a start
without reading a record (text_stages.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tfpipe._tf import plain, tf
from tfpipe.pipeline.order import KEY_AUGMENT, KEY_FILES, KEY_WINDOWS, OrderSpec, seed_key

_FOREVER = 1 << 62


def mix(tf_: Any, x: Any) -> Any:
    """SplitMix64's finaliser on int64 tensors (as wrapping uint64 arithmetic; `order.mix64` in
    plain Python): a bijection whose outputs look independent for neighbouring inputs.
    Elementwise, so one call keys a whole window; stateless_fold_in costs ~10 ms per iterator
    start in each dataset function."""
    u64 = tf_.uint64
    z = tf_.bitcast(x, u64) + tf_.constant(0x9E3779B97F4A7C15, u64)
    for shift, factor in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):
        z = tf_.bitwise.bitwise_xor(z, tf_.bitwise.right_shift(z, tf_.constant(shift, u64)))
        z = z * tf_.constant(factor, u64)
    return tf_.bitcast(
        tf_.bitwise.bitwise_xor(z, tf_.bitwise.right_shift(z, tf_.constant(31, u64))), tf_.int64
    )


def fold(tf_: Any, key: Any, *data: Any) -> Any:
    """The int64 `key` (any shape) with each of `data` folded in."""
    for d in data:
        key = mix(tf_, tf_.bitwise.bitwise_xor(key, mix(tf_, tf_.cast(d, tf_.int64))))
    return key


def seed_of(tf_: Any, key: Any) -> Any:
    """The `[..., 2]` seed of TensorFlow's stateless ops from int64 keys."""
    return tf_.stack([key, mix(tf_, key)], axis=-1)


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
      cached: load every record into memory once (when the iterator starts), then order
        from there; else read each group's files as the order reaches them.
      sources: `read` pairs records with their shard path (else with "").
      keys: add each record's augmentation seed (`[2]` int64, from the seed, the epoch and the
        example id) as a third element.
      batch: yield batches of `batch` records (batched presets), or None: single records.
      parallelism: files read in parallel (AUTOTUNE or a count).
      load: with `cached`, returns the table to order instead of the records `read` gives: a
        tensor whose rows are the pipeline's records in file order (its files in `spec.files`
        order), called when the iterator starts. `read` is then never called.

    Returns:
      A `tf.data.Dataset` of `(record, source[, key])`, or of such batches (of the table's
      rows with `load`).
    """
    g = _Graph(tf(), spec, read, sources, parallelism, load)
    order = _Order(g, start, cached=cached, keys=keys)
    # The next window is read and arranged while the current one goes out.
    ds = g.tf.data.Dataset.from_tensors(0).flat_map(plain(order.from_start)).prefetch(1)
    return ds.unbatch() if batch is None else ds.rebatch(batch, drop_remainder=True)


class _Order:
    """The graph functions of the order, from the start position to permuted windows: epochs
    (`from_start`), their file permutation and groups (`epoch`), a group's windows (`group`),
    one window permuted (`arrange`)."""

    def __init__(self, g: _Graph, start: Callable[[], Any], *, cached: bool, keys: bool) -> None:
        self.g, self.tf, self.spec, self.start = g, g.tf, g.spec, start
        self.cached, self.keys = cached, keys
        self.base = self.tf.constant(seed_key(self.spec.seed), self.tf.int64)

    def from_start(self, _: Any) -> Any:
        """Every epoch from the start position's on, endless."""
        tf_, g = self.tf, self.g
        begin = tf_.cast(self.start(), tf_.int64)
        e0, r0 = begin // g.total, begin % g.total
        if self.cached:
            everything = g.load()
            windows, fetch = (
                g.cached_windows,
                lambda index, pick: tf_.gather(everything, tf_.gather(index, pick)),
            )
        else:
            windows, fetch = g.streamed_windows, tf_.gather

        def epoch(e: Any) -> Any:
            return self.epoch(e, tf_.where(tf_.equal(e, e0), r0, 0), windows, fetch)

        return tf_.data.Dataset.range(e0, _FOREVER).flat_map(plain(epoch))

    def epoch(self, e: Any, at: Any, windows: Any, fetch: Any) -> Any:
        """Epoch `e` from its position `at` on: its groups, from the one holding `at`."""
        tf_, g, base = self.tf, self.g, self.base
        perm = tf_.random.experimental.stateless_shuffle(
            tf_.range(g.files, dtype=tf_.int64), seed_of(tf_, fold(tf_, base, e, KEY_FILES)), alg="philox"
        )
        padded = tf_.concat(
            [tf_.gather(g.counts, perm), tf_.zeros([g.groups * g.cycle - g.files], tf_.int64)], 0
        )
        totals = tf_.reduce_sum(tf_.reshape(padded, [g.groups, g.cycle]), axis=1)
        ends = tf_.cumsum(totals)
        g0 = tf_.searchsorted(ends, tf_.reshape(at, [1]), side="right", out_type=tf_.int64)[0]

        def group(gi: Any) -> Any:
            lo = ends[gi] - totals[gi]
            offset = tf_.where(tf_.equal(gi, g0), at - lo, 0)
            members = perm[gi * g.cycle : tf_.minimum((gi + 1) * g.cycle, g.files)]
            return self.group(e, gi, lo, offset, members, windows, fetch)

        return tf_.data.Dataset.range(g0, g.groups).flat_map(plain(group))

    def group(self, e: Any, gi: Any, lo: Any, offset: Any, members: Any, windows: Any, fetch: Any) -> Any:
        """Group `gi` of epoch `e` (its first record at epoch position `lo`), from `offset` on."""
        tf_, g = self.tf, self.g
        j0 = offset // g.window
        index = tf_.data.Dataset.range(j0, _FOREVER)

        def place(win: Any, j: Any) -> Any:
            skip = tf_.where(tf_.equal(j, j0), offset - j0 * g.window, 0)
            return self.arrange(fetch, win, tf_.stack([e, gi, j, e * g.total + lo + j * g.window, skip]))

        return tf_.data.Dataset.zip((windows(members, j0), index)).map(plain(place))

    def arrange(self, fetch: Any, win: Any, where: Any) -> Any:
        """A window permuted: `fetch(items, picks)` gathers the records from its first part."""
        tf_, spec, base = self.tf, self.spec, self.base
        items, srcs, ids = win
        e, gi, j, position, skip = tf_.unstack(where)
        n = tf_.size(ids, out_type=tf_.int64)
        perm = tf_.random.experimental.stateless_shuffle(
            tf_.range(n), seed_of(tf_, fold(tf_, base, e, KEY_WINDOWS, gi, j)), alg="philox"
        )
        t = tf_.range(skip, n)
        if spec.by_record:  # keep this pipeline's positions of the global stream
            t = tf_.boolean_mask(t, tf_.equal((position + t) % spec.pipelines, spec.index))
        pick = tf_.gather(perm, t)
        out = (fetch(items, pick), tf_.gather(srcs, pick))
        if self.keys:  # each record's augmentation seed, from (seed, epoch, example id)
            out += (seed_of(tf_, fold(tf_, fold(tf_, base, e, KEY_AUGMENT), tf_.gather(ids, pick))),)
        return out


class _Graph:
    """The constants of one pipeline's order and the two sources of a group's windows, each
    `(members, j0) -> Dataset` of unpermuted windows `(records, sources, ids)` from window
    `j0` of the group on."""

    def __init__(
        self, tf_: Any, spec: OrderSpec, read: Any, sources: bool, parallelism: int, table: Any = None
    ) -> None:
        self.tf, self.spec, self.read, self.parallelism = tf_, spec, read, parallelism
        self.table = table
        self.paths = tf_.constant(spec.files)
        self.sizes = tf_.constant(spec.sizes, tf_.int64)
        self.counts = tf_.constant(spec.counts, tf_.int64)
        self.first_ids = tf_.constant(spec.first_ids, tf_.int64)
        # The source string of each file's records: its path, or "" when nothing names it.
        self.sources = self.paths if sources else tf_.fill([len(spec.files)], "")
        self.files, self.total, self.cycle, self.window = (
            len(spec.files),
            spec.examples,
            spec.cycle,
            spec.window,
        )
        self.groups = -(-self.files // self.cycle)

    def _runs(self, path: Any, size: Any, count: Any, first: Any) -> Any:
        # Runs of exactly `run` records, whatever grouping `read` chose (a re-read after a
        # network error may regroup), so the round-robin is a function of the counts alone.
        tf_ = self.tf
        ids = tf_.data.Dataset.range(first, first + count).batch(self.spec.run)
        runs = self.read(path, size, count).rebatch(self.spec.run)
        return tf_.data.Dataset.zip((runs, ids)).map(plain(lambda rs, i: (rs[0], rs[1], i)))

    def streamed_windows(self, members: Any, j0: Any) -> Any:
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
        return runs.rebatch(self.window).skip(j0)

    def load(self) -> Any:
        """Every record of the pipeline's files, in file order: one string tensor (or the
        table `stream` was given)."""
        tf_ = self.tf
        if self.table is not None:
            return self.table()
        files = tf_.data.Dataset.from_tensor_slices((self.paths, self.sizes, self.counts))
        # One file after another, the next two opened ahead (as eval reads).
        records = files.interleave(
            plain(lambda p, s, c: self.read(p, s, c).map(plain(lambda r, _: r))),
            cycle_length=1,
            num_parallel_calls=tf_.data.AUTOTUNE,
            deterministic=True,
        )
        return records.rebatch(self.total).get_single_element()

    def cached_windows(self, members: Any, j0: Any) -> Any:
        """Windows of indices into the loaded records (see `load`), not of records."""
        tf_, run = self.tf, self.spec.run
        offsets = tf_.cumsum(self.counts, exclusive=True)
        counts = tf_.gather(self.counts, members)
        k = tf_.size(members, out_type=tf_.int64)
        slot = tf_.repeat(tf_.range(k), counts)
        t = tf_.range(tf_.reduce_sum(counts)) - tf_.repeat(tf_.cumsum(counts, exclusive=True), counts)
        # The interleave's order: runs round-robin over the files, records in file order.
        order = tf_.argsort(((t // run) * k + slot) * run + t % run, stable=True)
        slot, t = tf_.gather(slot, order), tf_.gather(t, order)
        file = tf_.gather(members, slot)
        index = tf_.gather(offsets, file) + t
        ids = tf_.gather(self.first_ids, file) + t
        n = tf_.size(index, out_type=tf_.int64)

        def window(j: Any) -> Any:
            sl = slice(j * self.window, tf_.minimum((j + 1) * self.window, n))
            return index[sl], tf_.gather(self.sources, file[sl]), ids[sl]

        return tf_.data.Dataset.range(j0, -(-n // self.window)).map(plain(window))

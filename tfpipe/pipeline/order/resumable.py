"""The resumable training order: a pure function of (seed, position), whatever the parallelism.

One input pipeline reads its files (all of them with record sharding) as an endless stream of
epochs. Epoch `e`:

1. The files are permuted (a stateless shuffle keyed by the seed and `e`) and taken `cycle`
   at a time: a *group*.
2. A group's files are read together, round-robin, `run` records from each in turn (a
   deterministic interleave): the group's *stream*.
3. The stream is cut into *windows* of `window` records; each window is permuted (keyed by
   the seed and the window's first position in the stream) and its records follow in that
   order.

Each permutation is one stateless Philox shuffle, its seed a structured pair (a key of the
seed and a domain, a value: the epoch, a window's position); TensorFlow scrambles a seed
itself, so there is no hash of our own (ORDER_VERSION 2).

Every record comes once per epoch, and the record at any position follows from the seed, the
position and the manifest's record counts alone. So a pipeline can start anywhere: the
groups before the start are not read at all, and within the start's group the records before
the start are skipped as serialized bytes, before any parse or decode. Augmentation is keyed
by (seed, epoch, example id), where the id is the record's index in the split (shard offsets
from the manifest), so a resumed run augments each record as the uninterrupted one did.

With record sharding (fewer files than input pipelines) every pipeline makes the same global
stream and keeps the positions `i mod n`; with file sharding each pipeline orders its own
files. Either way step `K` of synchronous training starts pipeline `i` at a known position.

A window is held whole while its records go out, and the next one is read meanwhile: about
three windows of serialized records in memory at the peak (see WINDOW_COPIES), where a
shuffle buffer of the same size holds one. With cache="memory" every record is loaded once,
when the iterator starts, and each epoch's windows are gathered from memory.

This module decides and describes the order, and computes it in plain Python (`records`),
the form its tests check on integers; order/stream.py makes the same order a tf.data stream.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import secrets
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from tfpipe._tf import Tensor, tf
from tfpipe.errors import ConfigError
from tfpipe.validation import as_int

if TYPE_CHECKING:
    from tfpipe.pipeline.config import OrderKind, PipelineConfig
    from tfpipe.pipeline.order.position import Position
    from tfpipe.pipeline.read.resolve import ResolvedData
    from tfpipe.pipeline.read.sharding import FileShare

# The version of the order's definition, kept in every position checkpoint: a change to how
# positions map to records must bump it, so an old checkpoint is refused, not misread.
# 2: every seed a structured (domain key, value) pair that the stateless Philox ops scramble
# themselves, no hash in the graph; windows keyed by their first position, text rows by a
# Philox shuffle too (version 1 keyed them all by SplitMix64 folds).
ORDER_VERSION = 2
# Key domains, so the file order, the window orders, augmentation and the text rows draw
# unrelated numbers.
KEY_FILES, KEY_WINDOWS, KEY_AUGMENT, KEY_ROWS = 0, 1, 2, 3
_DOMAINS = 4
# Windows of serialized records alive at the peak: the one going out, the next (prefetched)
# and the one being assembled, which `rebatch` copies once.
WINDOW_COPIES = 3


@dataclasses.dataclass(frozen=True, slots=True)
class OrderSpec:
    """Everything the resumable order of one input pipeline is a function of.

    Attributes:
      seed: the order's seed.
      files, sizes, counts: the files this pipeline orders (all of them with record
        sharding), with their bytes and records.
      first_ids: the split-wide index of each file's first record (example ids).
      cycle: files read together (a group).
      window: records permuted together.
      run: records taken from one file before the next in a group.
      pipelines, index: input pipelines and this one's index.
      by_record: record sharding: the stream is global and this pipeline keeps every
        `pipelines`-th record.
      step_records: stream records consumed per training step: the global batch with record
        sharding (each pipeline keeps its share), else the global batch over `pipelines`.
      data: a fingerprint of the split (shard names, counts, sizes, checksums).
      global_batch: the global batch size.
    """

    seed: int
    files: tuple[str, ...]
    sizes: tuple[int, ...]
    counts: tuple[int, ...]
    first_ids: tuple[int, ...]
    cycle: int
    window: int
    run: int
    pipelines: int
    index: int
    by_record: bool
    step_records: int
    data: str
    global_batch: int

    @property
    def examples(self) -> int:
        """Records in one epoch of the stream."""
        return sum(self.counts)

    def identity(self) -> dict[str, Any]:
        """What a saved position means: a resumed run must match it field by field."""
        return {
            "order_version": ORDER_VERSION,
            "data": self.data,
            "batch_size": self.global_batch,
            "seed": self.seed,
            "input_pipelines": self.pipelines,
            "window": self.window,
            "cycle": self.cycle,
            "run": self.run,
        }

    def key(self, domain: int) -> int:
        """The key of one domain of this order's seeds (`domain_key`): with file sharding the
        input pipeline's index is part of it, so each pipeline permutes its own files its
        own way; with record sharding every pipeline makes the one global stream (that of a
        single pipeline)."""
        return domain_key(self.seed, domain, 0 if self.by_record else self.index)

    def start_of(self, step: int) -> int:
        """The stream position pipeline `index` starts at for training step `step`."""
        return step * self.step_records


def decide(
    cfg: PipelineConfig,
    src: ResolvedData,
    *,
    default: OrderKind,
    training: bool,
    service: str | None,
    resuming: bool,
) -> tuple[OrderKind | None, tuple[str, ...]]:
    """The training order for this data (None in eval) and the notes saying why.

    Args:
      default: the order when `cfg.order` is None (config.DEFAULT_TRAINING_ORDER).
      resuming: the pipeline starts at a step (start_step > 0 or a Position).

    Raises:
      ConfigError: a setting the resumable order cannot keep, named with the way out.
    """
    if not training:
        if resuming:
            raise ConfigError(
                "start_step resumes training; eval (training=False) reads every record once in "
                "source order. Pass start_step only with training=True."
            )
        return None, ()
    why_not = _why_not(cfg, src, service)
    chosen: OrderKind = default if cfg.order is None else cfg.order
    notes: tuple[str, ...] = ()
    if chosen == "resumable" and why_not:
        if cfg.order is not None or resuming:
            need = "start_step needs order='resumable', which" if resuming else "order='resumable'"
            raise ConfigError(f"{need} is not possible here: {why_not}.")
        chosen = "shuffle_buffer"
        notes = (f"order='shuffle_buffer', not the default 'resumable': {why_not}",)
    if chosen != "resumable":
        if resuming:
            raise ConfigError(
                "start_step needs order='resumable' (the shuffle buffer's order cannot be "
                f"started in the middle). Received: order={chosen!r}"
            )
        return chosen, notes
    if resuming and cfg.skip_corrupt:
        raise ConfigError(
            "start_step cannot be used with skip_corrupt=True: dropped records would shift every "
            "later batch, so a step no longer says where the data stands."
        )
    if resuming and cfg.seed is None:
        raise ConfigError("start_step needs seed=: the order is a function of the seed and the step.")
    return chosen, notes


def _why_not(cfg: PipelineConfig, src: ResolvedData, service: str | None) -> str:
    """Why the resumable order cannot serve this pipeline ("" when it can)."""
    if src.examples is None:
        return "files without a tfpipe manifest have no record counts to place a position in"
    if service is not None:
        return "tf.data service workers read the files in the order they are given work"
    if cfg.deterministic is False:
        return "deterministic=False lets records come in any order; the resumable order needs its own"
    if cfg.cache.startswith("disk:"):
        return f"cache={cfg.cache!r}: the resumable order caches in memory only (cache='memory' or 'auto')"
    if cfg.cache == "memory" and cfg.skip_corrupt:
        return "the resumable order's cache='memory' needs every record the manifest lists, skip_corrupt may drop some"
    return ""


def parse_start(start_step: Any) -> tuple[Position | None, int]:
    """(the Position, None) or (None, the fixed step) of a start_step argument."""
    step = as_int(start_step)
    if step is not None:
        if step < 0:
            raise ConfigError(
                f"start_step must be an int >= 0 or a tfpipe.Position. Received: start_step={start_step}"
            )
        return None, step
    from tfpipe.pipeline.order.position import Position  # imports TensorFlow: only for a Position

    if isinstance(start_step, Position):
        return start_step, 0
    raise ConfigError(
        f"start_step must be an int >= 0 or a tfpipe.Position. Received: {type(start_step).__name__} {start_step!r}"
    )


# The order's stream position (a step x the records of a step) stays at most this, so the int64
# arithmetic on it (the epoch, group and windows from there) never overflows.
MAX_POSITION = 2**62


def start_fn(spec: OrderSpec, position: Position | None, step: int) -> Callable[[], Tensor]:
    """The order's start position: fixed, or read from the Position when an iterator starts.

    Raises:
      ConfigError: a fixed step beyond MAX_POSITION // records a step (a Position's step is
        checked when the iterator reads it).
    """
    limit = MAX_POSITION // spec.step_records
    why = (
        f"the stream position of the order, the step x {spec.step_records} records a step, stays "
        "within 2**62 so its int64 arithmetic never overflows"
    )
    if position is None:
        if step > limit:
            raise ConfigError(
                f"start_step must be an int in [0, {limit}] or a tfpipe.Position: {why}. "
                f"Received: start_step={step}"
            )
        return lambda: tf().constant(spec.start_of(step), tf().int64)
    position.bind(spec.identity())

    def start() -> Tensor:
        tf_ = tf()
        step = position.read()
        message = f"the step of the Position must be at most {limit}: {why}"
        with tf_.control_dependencies([tf_.debugging.assert_less_equal(step, limit, message=message)]):
            return step * spec.step_records

    return start


def run_length(read_group: int, window: int, cycle: int, files: int) -> int:
    """Records taken from one file before the next in a group: the reader's group size, but
    at most half a window's share of one file, so every window holds records of every file
    in its group (tables' small records come in groups of 256, which would fill a window of
    10,000 from 39 files at most)."""
    return max(1, min(read_group, window // (2 * max(1, min(cycle, files)))))


def draw_seed() -> int:
    """A seed for seed=None: fresh, and named in the pipeline's notes."""
    return secrets.randbits(63)


def make_spec(
    cfg: PipelineConfig,
    src: ResolvedData,
    share: FileShare,
    *,
    pipelines: int,
    index: int,
    global_batch: int,
    per_replica: int,
    window: int,
    run: int,
    resuming: bool,
) -> OrderSpec:
    """The resumable order of input pipeline `index` of `pipelines` for this data.

    Raises:
      ConfigError: resuming when the global batch does not split into whole batches per
        input pipeline (a step would not say where each pipeline stands).
    """
    by_record = share.shard_by == "record"
    chosen = range(len(src.files)) if by_record else share.files
    starts, total = [], 0
    for count in src.counts:
        starts.append(total)
        total += count
    step_records = global_batch if by_record else global_batch // pipelines
    if resuming and pipelines > 1 and (global_batch % pipelines or step_records % per_replica):
        raise ConfigError(
            f"start_step with {pipelines} input pipelines needs each to consume the same whole "
            f"number of batches per step: batch_size={global_batch} does not split into "
            f"{pipelines} shares of whole per-replica batches of {per_replica}."
        )
    files = tuple(src.files[j] for j in chosen)
    return OrderSpec(
        seed=int(cfg.seed) if cfg.seed is not None else 0,
        files=files,
        sizes=tuple(src.sizes[j] for j in chosen),
        counts=tuple(src.counts[j] for j in chosen),
        first_ids=tuple(starts[j] for j in chosen),
        cycle=max(1, min(cfg.cycle_length, len(files))),
        window=window,
        run=run,
        pipelines=pipelines,
        index=index,
        by_record=by_record,
        step_records=step_records,
        data=data_fingerprint(src),
        global_batch=global_batch,
    )


def data_fingerprint(src: ResolvedData) -> str:
    """The split's shards (names, counts, sizes, checksums), not where they are: the same data
    copied elsewhere (local disk, another bucket) resumes."""
    if src.manifest is not None and src.split is not None:
        shards = src.manifest.split(src.split).shards
        return fingerprint(
            [s.name for s in shards],
            [s.examples for s in shards],
            [s.bytes for s in shards],
            [s.checksum for s in shards],
        )
    names = [f.rsplit("/", 1)[-1] for f in src.files]
    return fingerprint(names, list(src.counts), list(src.sizes), [])


def fingerprint(
    names: Sequence[str], counts: Sequence[int], sizes: Sequence[int], crcs: Sequence[str]
) -> str:
    """A short hash of a split's shards, so a position is never applied to other data."""
    blob = json.dumps([list(names), list(counts), list(sizes), list(crcs)]).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def seed_key(seed: int) -> int:
    """A Python int seed of any size as one int64 key (its bits folded 63 at a time)."""
    key, u = 0, seed % (1 << 252)
    while True:
        key = (key * 0x100000001B3 ^ (u & ((1 << 63) - 1))) % (1 << 63)
        u >>= 63
        if not u:
            return key


def domain_key(seed: int, domain: int, part: int = 0) -> int:
    """The first half of every stateless seed of one key domain: the seed, the domain and a
    part (an input pipeline's) folded into an int64. TensorFlow's stateless ops scramble their
    seed themselves (a Philox round), so the halves of a seed may be plain structured values."""
    return seed_key((seed * (1 << 20) + part) * _DOMAINS + domain)


# ---- the order in plain Python: what order/stream.py computes in the graph ----

Shuffle = Callable[[int, tuple[int, int]], Sequence[int]]
"""`(n, seed) -> a permutation of range(n)`: in the graph, TensorFlow's
`stateless_shuffle(range(n), seed, alg="philox")` (`order_stream.permutation`); any permutation
in tests on integers. `seed` is `(domain key, value)`."""


@dataclasses.dataclass(frozen=True, slots=True)
class Placed:
    """One record of the stream: `file` (an index into `OrderSpec.files`), its `record` in that
    file, the `epoch`, its stream `position` and its augmentation `seed`: (the augmentation
    key ^ the epoch, the example id)."""

    file: int
    record: int
    epoch: int
    position: int
    seed: tuple[int, int]


def records(spec: OrderSpec, start: int, shuffle: Shuffle) -> Iterator[Placed]:
    """The records input pipeline `spec.index` yields from stream position `start` on, endless:
    the order of the module doc, as `order_stream.stream` makes it, in plain Python."""
    augment, total = spec.key(KEY_AUGMENT), spec.examples
    epoch = start // total
    while True:
        for k, (f, r) in enumerate(epoch_stream(spec, epoch, shuffle)):
            position = epoch * total + k
            if position < start or (spec.by_record and position % spec.pipelines != spec.index):
                continue
            example = spec.first_ids[f] + r
            yield Placed(f, r, epoch, position, (augment ^ epoch, example))
        epoch += 1


def epoch_stream(spec: OrderSpec, epoch: int, shuffle: Shuffle) -> list[tuple[int, int]]:
    """Epoch `epoch` of the whole stream as (file, record) pairs: the files permuted, taken
    `cycle` at a time, each group read in runs round-robin and cut into windows, each window
    permuted."""
    files = list(shuffle(len(spec.files), (spec.key(KEY_FILES), epoch)))
    windows = spec.key(KEY_WINDOWS)
    out: list[tuple[int, int]] = []
    for g in range(-(-len(files) // spec.cycle)):
        group = _round_robin(files[g * spec.cycle : (g + 1) * spec.cycle], spec.counts, spec.run)
        for j in range(-(-len(group) // spec.window)):
            window = group[j * spec.window : (j + 1) * spec.window]
            # Keyed by the window's first position in the stream: unique, and known anywhere.
            perm = shuffle(len(window), (windows, epoch * spec.examples + len(out)))
            out += [window[i] for i in perm]
    return out


def _round_robin(members: Sequence[int], counts: Sequence[int], run: int) -> list[tuple[int, int]]:
    """A group's stream: `run` records of each member file in turn, until every file is read."""
    rounds = max(-(-counts[f] // run) for f in members)
    return [
        (f, t) for r in range(rounds) for f in members for t in range(r * run, min((r + 1) * run, counts[f]))
    ]

"""A source's stream regrouped by tag: one scan a source takes its items (tagged with the group of
the mixed stream each falls in, tags non-decreasing) and yields exactly one element per group,
empty groups included, so the sources' streams zip group by group (mixture/stream.py).

A group not yet complete is carried to the next step; a complete one is given as padded parts
with its length (one `[n, width]` int64 matrix and the string parts), so nothing ragged crosses
the dataset (tf.data's unbatch of a ragged tensor adds a function of its own).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TypeAlias

from tfpipe._tf import Dataset, Nest, Tensor, plain
from tfpipe.pipeline.read import raw

# What a scan carries of its items: their tags, their string parts, their int64 matrix.
Carried: TypeAlias = tuple[Tensor, tuple[Tensor, ...], Tensor]


def _unknown(tf_: ModuleType, value: Tensor) -> Tensor:
    """`value` with an unknown first dimension, so a scan's state may grow without a retrace."""
    return tf_.raw_ops.PlaceholderWithDefault(input=value, shape=[None, *value.shape[1:]])


@dataclasses.dataclass(frozen=True)
class Items:
    """What a source's scan carries of each item: `strings` string parts (records, their
    sources) and `width` int64 parts (one `[n, width]` matrix)."""

    strings: int
    width: int


def _step(
    tf_: ModuleType,
    nxt: Tensor,
    carried: Carried,
    tags: Tensor,
    strings: Sequence[Tensor],
    ints: Tensor,
    heads: Sequence[int],
) -> tuple[Tensor, Carried, tuple[Tensor, ...]]:
    """One step of a regrouping scan: the carried items and the new ones (tags non-decreasing)
    joined, those before group `nxt` dropped, and every group now complete (each tag before the
    last item's) given as one padded row of each part with its length, empty groups included;
    the last group's items carried on. `heads` (columns of `ints`): each complete group also
    gets them of its first item at or after it (the next item when the group is empty).

    Returns:
      (the next group, what is carried, the groups: padded parts `[groups, n, ...]`, lengths
      `[groups]` and heads `[groups, len(heads)]`).
    """
    tags = tf_.concat([carried[0], tags], 0)
    strings = tuple(tf_.concat([c, x], 0) for c, x in zip(carried[1], strings, strict=True))
    ints = tf_.concat([carried[2], ints], 0)
    lo = tf_.searchsorted(tags, nxt[None], side="left", out_type=tf_.int64)[0]  # tags are sorted
    tags, strings, ints = tags[lo:], tuple(x[lo:] for x in strings), ints[lo:]
    last = tf_.maximum(nxt, tf_.reduce_max(tf_.concat([nxt[None], tags], 0)))
    bounds = tf_.searchsorted(tags, tf_.range(nxt, last + 1), side="left", out_type=tf_.int64)
    done = bounds[-1]

    def padded(x: Tensor) -> Tensor:
        return tf_.RaggedTensor.from_row_splits(x[:done], bounds, validate=False).to_tensor()

    groups = (*(padded(x) for x in strings), padded(ints), bounds[1:] - bounds[:-1])
    carry = (tags[done:], tuple(x[done:] for x in strings), ints[done:])
    if not heads:  # (a [groups, 0] component would crash UnbatchDataset)
        return last, carry, groups
    head = tf_.gather(tf_.gather(ints, bounds[:-1]), tf_.constant(list(heads), tf_.int64), axis=1)
    return last, carry, (*groups, head)


def scan_groups(
    tf_: ModuleType,
    ds: Dataset,
    init: tuple[Tensor, ...],
    tag: Callable[..., tuple[Nest, Tensor, tuple[Tensor, ...], Tensor]],
    first: Tensor,
    items: Items,
    heads: Sequence[int] = (),
) -> Dataset:
    """`ds` regrouped: `tag(state, *element) -> (state, tags, strings, ints)` tags each element's
    items (its state carried from element to element, starting at `init`); the result yields
    one element per group from `first` on: its padded parts, its length and its heads (see
    `_step`; `unpad` takes the parts back)."""
    i64 = tf_.int64
    carry = (
        _unknown(tf_, tf_.zeros([0], i64)),
        tuple(_unknown(tf_, tf_.zeros([0], tf_.string)) for _ in range(items.strings)),
        _unknown(tf_, tf_.zeros([0, items.width], i64)),
    )

    def step(
        state: tuple[Nest, Tensor, Carried], element: Nest
    ) -> tuple[tuple[Nest, Tensor, Carried], tuple[Tensor, ...]]:
        mine, nxt, carried = state
        mine, tags, strings, ints = tag(mine, *tf_.nest.flatten(element))
        last, carried, out = _step(tf_, nxt, carried, tags, strings, ints, heads)
        return (mine, last, carried), out

    return raw.unbatch(ds.scan((init, first, carry), plain(step)))


def unpad(group: Sequence[Tensor], items: Items) -> tuple[Tensor, ...]:
    """A group's parts without their padding: (strings..., ints `[n, width]`)."""
    n = group[items.strings + 1]
    return tuple(x[:n] for x in group[: items.strings + 1])


def length(group: Sequence[Tensor], items: Items) -> Tensor:
    return group[items.strings + 1]

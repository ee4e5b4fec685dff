"""Static-shape evaluation: every eval batch full, the padding weighted 0.

TPUs and XLA compile one program per input shape, and a JAX job across hosts steps every host
together, so evaluation (as the TF Model Garden and T5X run it) pads the last batch to the full
batch with examples of weight 0, and gives every host the same number of batches. Every example
then counts exactly once in weighted metrics, and every batch has one shape.

`(features, labels)` batches become `(features, labels, weights)`: float32 `[B]`, 1 for an
example, 0 for padding (Keras takes the third element as `sample_weight`). Batches that carry
weights already (`(x, y, w)`, text's causal outputs) keep them, their padding weighted 0. Batches
that mark padding themselves (`Batching.marks_padding`: text's packed rows, a dict alone, by
`segment_ids` 0) get no weights. Padding is zeros (empty strings, False) of each tensor's dtype.

The arithmetic (how many batches each input pipeline yields) is plain Python on counts:
`batches`, `pipeline_batches`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tfpipe._tf import Dataset, Tensor, plain, tf
from tfpipe.errors import ConfigError

if TYPE_CHECKING:
    from tfpipe.pipeline.config import PipelineConfig
    from tfpipe.pipeline.read.resolve import ResolvedData
    from tfpipe.pipeline.stages.stage import Batching


def batches(examples: int, batch: int, drop: bool) -> int:
    """Batches of `batch` that `examples` make: the last partial one kept, unless `drop`."""
    return examples // batch if drop else math.ceil(examples / batch)


def pipeline_batches(examples: Sequence[int], batch: int) -> tuple[int, list[int]]:
    """(the batches every pipeline yields when padded, each pipeline's own) for input pipelines
    holding `examples` each: all pad to the most any of them needs."""
    own = [batches(n, batch, drop=False) for n in examples]
    return max(own), own


def pad(ds: Dataset, batch: int, extra: int, *, marked: bool) -> Dataset:
    """`ds`'s batches padded to `batch` rows, with `extra` whole batches of padding after them.

    Args:
      marked: single-tensor elements mark padding themselves (text's `segment_ids`); without it
        a batch must be `(features, labels)` or `(features, labels, weights)` to carry weights.

    Raises:
      ConfigError: elements that cannot carry a weight, or tensors without a static shape.
    """
    tf_ = tf()
    spec = ds.element_spec
    is_tuple = isinstance(spec, tuple)
    if not (is_tuple and len(spec) in (2, 3)) and not marked:
        raise ConfigError(
            "pad_remainder=True weights the padding 0, so a batch must be (features, labels) or "
            f"(features, labels, weights). Received batches of {spec}"
        )
    for s in tf_.nest.flatten(spec):
        if not isinstance(s, tf_.TensorSpec) or None in s.shape.as_list()[1:]:
            raise ConfigError(
                "pad_remainder=True pads every tensor of a batch to its full shape: each needs a "
                f"dense, static shape past the batch dimension. Received: {s}"
            )

    def fill(v: Tensor) -> Tensor:
        short = batch - tf_.shape(v)[0]
        v = tf_.concat([v, tf_.zeros(tf_.concat([[short], tf_.shape(v)[1:]], 0), v.dtype)], 0)
        return tf_.ensure_shape(v, [batch, *v.shape[1:]])

    def pad_batch(*element: Tensor) -> Tensor:
        padded = tf_.nest.map_structure(fill, element)
        if is_tuple and len(spec) == 2:
            real = tf_.shape(tf_.nest.flatten(element[0])[0])[0]
            weights = tf_.cast(tf_.range(batch) < real, tf_.float32)
            return (*padded, weights)
        return padded if is_tuple else padded[0]

    ds = ds.map(plain(pad_batch))
    if extra:
        zeros = tf_.nest.map_structure(lambda s: tf_.zeros(s.shape, s.dtype), ds.element_spec)
        ds = ds.concatenate(tf_.data.Dataset.from_tensors(zeros).repeat(extra))
    return ds


def resolve_pad(pad_remainder: bool | None, *, training: bool, pads: bool, hosts: int) -> bool:
    """pad_remainder with None resolved (see PipelineConfig.pad_remainder; training has only
    whole batches, and refuses True in `PipelineConfig.for_mode`): True when the batching pads
    eval by default (`pads`: text's) or for several hosts."""
    if training:
        return False
    return bool(pad_remainder if pad_remainder is not None else pads or hosts > 1)


def eval_batches(
    examples: Sequence[int] | None,
    pipelines: int,
    index: int,
    batch: int,
    *,
    pad: bool,
    drop: bool,
    why_unknown: str,
) -> tuple[int | None, int]:
    """(the batches eval pipeline `index` of `pipelines` yields, None when unknown; the whole
    batches of padding it appends) for pipelines holding `examples` each (None: unknown, for
    the reason `why_unknown`).

    Raises:
      ConfigError: padding across several pipelines whose counts are unknown: they could not
        agree on the number of batches.
    """
    if examples is None:
        if pad and pipelines > 1:
            raise ConfigError(
                f"pad_remainder gives each of the {pipelines} input pipelines (hosts) the same number of "
                f"eval batches, which needs their example counts, and here they are unknown: {why_unknown}."
            )
        return None, 0
    if not pad:
        return batches(examples[index], batch, drop), 0
    common, own = pipeline_batches(examples, batch)
    return common, common - own[index]


def eval_shape(
    cfg: PipelineConfig,
    src: ResolvedData,
    batching: Batching,
    *,
    training: bool,
    pipelines: int,
    index: int,
    batch: int,
    hosts: int,
    why_unknown: str,
) -> tuple[bool, int | None, int, tuple[str, ...]]:
    """(pad_remainder resolved, the eval batches input pipeline `index` of `pipelines` yields or
    None, the whole batches of padding it appends, notes for `describe()`) for a pipeline of
    `batch` reading `src` (its batching says what a batch counts) among `hosts` hosts (num_hosts;
    1 for an input_context). `why_unknown`: why its records are not known for sure ("" if they
    are)."""
    pad = resolve_pad(cfg.pad_remainder, training=training, pads=batching.pads_eval, hosts=hosts)
    if training:
        return False, None, 0, ()
    examples = None
    if not why_unknown:
        examples, why_unknown = batching.eval_counts(src, pipelines)
    count, extra = eval_batches(
        examples, pipelines, index, batch, pad=pad, drop=bool(cfg.drop_remainder), why_unknown=why_unknown
    )
    notes = [f"the eval dataset's length is unknown (cardinality -2): {why_unknown}"] if why_unknown else []
    if pad:
        known = f"{count} batches of {batch}, " if count is not None else ""
        notes.append(
            f"eval: pad_remainder: {known}the last padded to the full batch with examples of weight 0 "
            "((x, y) batches come as (x, y, weights))"
        )
    if extra:
        notes.append(
            f"eval: {extra} batch(es) of padding (weight 0) after this input pipeline's own, so every "
            f"one of the {pipelines} yields {count}"
        )
    return pad, count, extra, tuple(notes)

"""`steps_per_epoch()`: the batches in one pass over a split, from the manifest's counts (a text
split's rows predicted from its length histogram), without reading data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from tfpipe.errors import ConfigError, DataError, ManifestError
from tfpipe.packing.fill import epoch_rows
from tfpipe.pipeline.read.resolve import ResolvedData, resolve
from tfpipe.presets import PresetContext, options_of
from tfpipe.presets.text import TextOptions, plan_packing
from tfpipe.validation import check_batch_size, check_bool


def steps_per_epoch(
    data: str | Sequence[str] | Mapping[str, Any],
    batch_size: int,
    *,
    split: str | None = None,
    drop_remainder: bool = True,
    sequence_length: int | None = None,
    packing: str | None = None,
    weights: Mapping[str, float] | None = None,
    mix_by: str | None = None,
    **text_options: Any,
) -> int:
    """Batches in one pass over a split, from the manifest's record counts.

    `data` is a dataset directory (tfpipe's, or a TFDS version folder), or a glob or list of all
    the shards of one of its splits. A text split's batches are rows (packed sequences of
    `sequence_length` tokens), not its records (documents): their count is predicted from the
    manifest's length histogram as `build()` packs them (`packing.fill.epoch_rows`), without reading
    data. `packing` and `text_options` (output, eos, truncate, chunk, label) are those `build()`
    gets: they change the rows.

    A mixture (`data` a mapping of names to datasets, with its `weights` and `mix_by` as
    `build()` takes them): one epoch of a mixture lasts until every source has been read whole
    at least once, i.e. one epoch of the source that takes longest at its weight (its size over
    its weight); its rows are predicted from the mix (pipeline/mixture/numbers.py).

    Raises:
      ManifestError: `data` has no manifest (foreign files have no known count).
      ConfigError: a text split without `sequence_length`, or text options for other data.
      DataError: fewer records (text: rows) than one batch with drop_remainder.
    """
    batch_size = check_batch_size("batch_size", batch_size)
    check_bool("drop_remainder", drop_remainder)
    if isinstance(data, Mapping) or weights is not None or mix_by is not None:
        options = {"sequence_length": sequence_length, "packing": packing, **text_options}
        return _mixture_steps(data, batch_size, split, drop_remainder, weights, mix_by, options)
    src = resolve(data, split=split, training=True)
    if src.examples is None:
        raise ManifestError(
            "steps_per_epoch needs the record counts of a tfpipe dataset (a directory with "
            "tfpipe.json, or its shards) or of a TFDS dataset (its version folder, with "
            f"dataset_info.json). Received: {data!r}, files without either."
        )
    examples, what = _units(src, batch_size, sequence_length, packing, text_options)
    steps = examples // batch_size if drop_remainder else math.ceil(examples / batch_size)
    if steps == 0:
        raise DataError(
            f"Split {src.split!r} of {src.where} has {what}, fewer than one batch of {batch_size}."
        )
    return steps


def _mixture_steps(
    data: Any,
    batch_size: int,
    split: str | None,
    drop_remainder: bool,
    weights: Any,
    mix_by: Any,
    options: dict[str, Any],
) -> int:
    """Batches in one epoch of a mixture (every source read whole at least once)."""
    from tfpipe.pipeline.build import plan

    options = {k: v for k, v in options.items() if v is not None}
    pipe = plan(data, batch_size=batch_size, split=split, weights=weights, mix_by=mix_by, seed=0, **options)
    units = pipe.epoch_rows()  # type: ignore[attr-defined]
    steps = units // batch_size if drop_remainder else math.ceil(units / batch_size)
    if steps == 0:
        raise DataError(
            f"One epoch of the mixture holds {units:,} rows or records, fewer than one batch of {batch_size}."
        )
    return steps


def _units(
    src: ResolvedData,
    batch_size: int,
    sequence_length: int | None,
    packing: str | None,
    text_options: dict[str, Any],
) -> tuple[int, str]:
    """(what one pass over the split `src` holds in units of a batch, and how to name it): its
    records, or a text split's rows as build() packs them."""
    manifest = src.manifest
    text = manifest.split(src.split).text if manifest is not None and src.split is not None else None
    if manifest is not None and manifest.layout == "text" and text is not None:
        if sequence_length is None:
            raise ConfigError(
                f"{src.where} is text: a batch is {batch_size} rows of sequence_length tokens, so "
                "steps_per_epoch needs the sequence_length (and packing) build() gets. Received: "
                "sequence_length=None"
            )
        rows = _text_rows(src, sequence_length, packing, text_options)
        return rows, (
            f"{text.documents:,} records (documents) that pack into {rows:,} rows of {sequence_length} tokens"
        )
    if sequence_length is not None or packing is not None or text_options:
        given = {"sequence_length": sequence_length, "packing": packing, **text_options}
        raise ConfigError(
            f"sequence_length, packing and the text options count the rows of a text split; "
            f"{src.where} is {manifest.layout if manifest is not None else 'TFDS'!r} data. Received: "
            + ", ".join(f"{k}={v!r}" for k, v in given.items() if v is not None)
        )
    return src.examples, f"{src.examples} records"


def _text_rows(src: ResolvedData, sequence_length: int, packing: str | None, options: dict[str, Any]) -> int:
    """The rows one epoch of the text split `src` packs into, as build() would pack it."""
    opts = options_of(
        TextOptions, {"sequence_length": sequence_length, "packing": packing, **options}, "text"
    )
    ctx = PresetContext(src.manifest, src.manifest.schema, {}, True, src.where, src.split)
    return epoch_rows(plan_packing(ctx, opts)[0])

"""`steps_per_epoch()`: the batches in one pass over a split, from the manifest's counts, in
what a batch of the split's modality counts (`Modality.epoch`: records; a text split's rows,
predicted from its length histogram), without reading data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from tfpipe.errors import DataError, ManifestError
from tfpipe.modalities import modality_of_records
from tfpipe.modalities.modality import records_in_epoch
from tfpipe.pipeline.read.resolve import resolve
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
    its weight); its rows are predicted from the mix (its modality's mixing: for text,
    modalities/text/mixture/numbers.py).

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
    modality = modality_of_records(src.manifest, {}, src.tfds)
    epoch = modality.epoch if modality is not None else records_in_epoch
    options = {"sequence_length": sequence_length, "packing": packing, **text_options}
    examples, what = epoch(src, batch_size, options)
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
    from tfpipe.pipeline.build import plan  # the build stands above its steps

    options = {k: v for k, v in options.items() if v is not None}
    pipe = plan(data, batch_size=batch_size, split=split, weights=weights, mix_by=mix_by, seed=0, **options)
    units = pipe.epoch_rows()  # type: ignore[attr-defined]
    steps = units // batch_size if drop_remainder else math.ceil(units / batch_size)
    if steps == 0:
        raise DataError(
            f"One epoch of the mixture holds {units:,} rows or records, fewer than one batch of {batch_size}."
        )
    return steps

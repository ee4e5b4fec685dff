"""`steps_per_epoch()`: the batches in one pass over a split, from the manifest's counts, in
what a batch of the split's modality counts (`Modality.epoch`: records; a text split's rows,
predicted from its length histogram), without reading data.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from tfpipe.errors import ConfigError, DataError, ManifestError
from tfpipe.modalities import modality_of_records
from tfpipe.modalities.modality import records_in_epoch
from tfpipe.pipeline.mixture.sources import Mixture, SourceData
from tfpipe.pipeline.read.resolve import resolve
from tfpipe.presets import PresetLike, get_preset
from tfpipe.validation import check_batch_size, check_bool


def steps_per_epoch(
    data: SourceData | Mixture | Mapping[str, SourceData],
    batch_size: int,
    *,
    preset: str | PresetLike | None = None,
    split: str | None = None,
    drop_remainder: bool = True,
    **preset_options: Any,
) -> int:
    """Batches in one pass over a split, from the manifest's record counts.

    `data` is a dataset directory (tfpipe's, or a TFDS version folder), or a glob or list of all
    the shards of one of its splits. A text split's batches are rows (packed sequences of
    `sequence_length` tokens), not its records (documents): their count is predicted from the
    manifest's length histogram as `build()` packs them (`packing.fill.epoch_rows`), without reading
    data. The text preset's options change the rows: pass those `build()` gets, as a
    `preset=tfpipe.presets.Text(...)` or as keywords (sequence_length, packing, output, eos,
    truncate, chunk, label).

    A mixture (`data` a `tfpipe.Mixture`, or a mapping of names to datasets with `weights=` and
    `mix_by=` as `build()` takes them): one epoch of a mixture lasts until every source has been read whole
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
    if isinstance(data, (Mixture, Mapping)):
        return _mixture_steps(data, batch_size, preset, split, drop_remainder, preset_options)
    options = _preset_options(preset, preset_options)
    src = resolve(data, split=split, training=True)
    if src.examples is None:
        raise ManifestError(
            "steps_per_epoch needs the record counts of a tfpipe dataset (a directory with "
            "tfpipe.json, or its shards) or of a TFDS dataset (its version folder, with "
            f"dataset_info.json). Received: {data!r}, files without either."
        )
    modality = modality_of_records(src.manifest, {}, src.tfds)
    epoch = modality.epoch if modality is not None else records_in_epoch
    examples, what = epoch(src, batch_size, options)
    steps = examples // batch_size if drop_remainder else math.ceil(examples / batch_size)
    if steps == 0:
        raise DataError(
            f"Split {src.split!r} of {src.where} has {what}, fewer than one batch of {batch_size}."
        )
    return steps


def _mixture_steps(
    data: Mixture | Mapping[str, SourceData],
    batch_size: int,
    preset: str | PresetLike | None,
    split: str | None,
    drop_remainder: bool,
    options: dict[str, Any],
) -> int:
    """Batches in one epoch of a mixture (every source read whole at least once), planned as
    build() plans it (`weights=` and `mix_by=` among `options` for a mapping)."""
    from tfpipe.pipeline.build import plan  # the build stands above its steps

    pipe = plan(data, batch_size=batch_size, preset=preset, split=split, seed=0, **options)
    units = pipe.epoch_rows()  # type: ignore[attr-defined]
    steps = units // batch_size if drop_remainder else math.ceil(units / batch_size)
    if steps == 0:
        raise DataError(
            f"One epoch of the mixture holds {units:,} rows or records, fewer than one batch of {batch_size}."
        )
    return steps


def _preset_options(preset: str | PresetLike | None, options: Mapping[str, Any]) -> dict[str, Any]:
    """The preset options `steps_per_epoch` was given: keywords over a named preset's, or a
    preset object's own (those not at their defaults; a keyword beside it is refused, as build()
    does)."""
    if preset is None or isinstance(preset, str):
        if preset is not None:
            get_preset(preset)  # a name no preset has is refused
        return dict(options)
    chosen = get_preset(preset)
    if options:
        raise ConfigError(
            f"{', '.join(f'{k}=' for k in sorted(options))} set options of the preset object given "
            f"as preset=, which carries its own: set them there. Received: preset={preset!r}"
        )
    if not dataclasses.is_dataclass(chosen):
        return {}
    return {
        f.name: getattr(chosen, f.name)
        for f in dataclasses.fields(chosen)
        if getattr(chosen, f.name) != f.default
    }

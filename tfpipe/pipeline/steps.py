"""`steps_per_epoch()`: the batches in one pass over a split, from the manifest's counts (a text
split's rows predicted from its length histogram), without reading data.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from tfpipe.errors import ConfigError, DataError, ManifestError
from tfpipe.packing.fill import epoch_rows
from tfpipe.pipeline.mixture.sources import Mixture, SourceData
from tfpipe.pipeline.read.resolve import ResolvedData, resolve
from tfpipe.presets import PresetContext, PresetLike, Text, get_preset, with_options
from tfpipe.presets.text import TEXT, plan_packing
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

    Raises:
      ManifestError: `data` has no manifest (foreign files have no known count).
      ConfigError: a mixture (it has no epoch), a text split without `sequence_length`, or text
        options for other data.
      DataError: fewer records (text: rows) than one batch with drop_remainder.
    """
    if isinstance(data, (Mixture, Mapping)):
        raise ConfigError(
            "steps_per_epoch counts one pass over one dataset; a mixture has no epoch (each source "
            "repeats at its own rate, and Pipeline.describe() says each one's epoch at a step). Count "
            "each source's steps, or choose the steps of an epoch yourself. Received: a mixture of "
            f"{sorted(data.names if isinstance(data, Mixture) else data)}"
        )
    batch_size = check_batch_size("batch_size", batch_size)
    check_bool("drop_remainder", drop_remainder)
    text = _text_options(preset, preset_options)
    src = resolve(data, split=split, training=True)
    if src.examples is None:
        raise ManifestError(
            "steps_per_epoch needs the record counts of a tfpipe dataset (a directory with "
            "tfpipe.json, or its shards) or of a TFDS dataset (its version folder, with "
            f"dataset_info.json). Received: {data!r}, files without either."
        )
    examples, what = _units(src, batch_size, text, given=isinstance(preset, Text) or bool(preset_options))
    steps = examples // batch_size if drop_remainder else math.ceil(examples / batch_size)
    if steps == 0:
        raise DataError(
            f"Split {src.split!r} of {src.where} has {what}, fewer than one batch of {batch_size}."
        )
    return steps


def _text_options(preset: str | PresetLike | None, options: Mapping[str, Any]) -> Text:
    """The text preset's options `steps_per_epoch` was given: a Text object, or its keywords
    over the named preset's (a keyword beside a Text object is refused, as build() does)."""
    chosen = get_preset(preset) if preset is not None else TEXT
    if not isinstance(chosen, Text):
        if options:
            raise ConfigError(
                "steps_per_epoch counts records, or a text split's rows: the text preset's are the only "
                f"options that change the count. Received: preset={preset!r}, {sorted(options)}"
            )
        return TEXT
    if options and not isinstance(preset, (str, type(None))):
        raise ConfigError(
            f"{', '.join(f'{k}=' for k in sorted(options))} set options of the preset object given "
            f"as preset=, which carries its own: set them there. Received: preset={preset!r}"
        )
    return with_options(chosen, options)


def _units(src: ResolvedData, batch_size: int, text: Text, *, given: bool) -> tuple[int, str]:
    """(what one pass over the split `src` holds in units of a batch, and how to name it): its
    records, or a text split's rows as build() packs them with the options `text` (`given`:
    the caller passed text options)."""
    manifest = src.manifest
    split_text = manifest.split(src.split).text if manifest is not None and src.split is not None else None
    if manifest is not None and manifest.layout == "text" and split_text is not None:
        if text.sequence_length is None:
            raise ConfigError(
                f"{src.where} is text: a batch is {batch_size} rows of sequence_length tokens, so "
                "steps_per_epoch needs the sequence_length (and packing) build() gets. Received: "
                "sequence_length=None"
            )
        rows = _text_rows(src, text)
        return rows, (
            f"{split_text.documents:,} records (documents) that pack into {rows:,} rows of "
            f"{text.sequence_length} tokens"
        )
    if given:
        set_ = {f.name: getattr(text, f.name) for f in dataclasses.fields(text)}
        raise ConfigError(
            f"sequence_length, packing and the text options count the rows of a text split; "
            f"{src.where} is {manifest.layout if manifest is not None else 'TFDS'!r} data. Received: "
            + ", ".join(f"{k}={v!r}" for k, v in set_.items() if v not in (None, False))
        )
    assert src.examples is not None
    return src.examples, f"{src.examples} records"


def _text_rows(src: ResolvedData, text: Text) -> int:
    """The rows one epoch of the text split `src` packs into, as build() would pack it."""
    assert src.manifest is not None
    ctx = PresetContext(src.manifest, src.manifest.schema, {}, True, src.where, src.split)
    return epoch_rows(plan_packing(ctx, text)[0])

"""What an epoch of a text split holds in units of a batch: rows of `sequence_length` tokens,
predicted from the manifest's length histogram as `build()` packs them (`packing.fill.epoch_rows`),
without reading data (`tfpipe.steps_per_epoch`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tfpipe.errors import ConfigError
from tfpipe.modalities.modality import records_in_epoch
from tfpipe.modalities.text.preset import TEXT, plan_packing
from tfpipe.packing.fill import epoch_rows
from tfpipe.presets.base import PresetContext, with_options


def epoch(src: Any, batch_size: int, options: Mapping[str, Any]) -> tuple[int, str]:
    """(the rows one pass over the text split `src` packs into, how to name them).

    Args:
      options: the text preset's options `build()` gets (sequence_length, packing, output,
        eos, truncate, chunk, label): they change the rows.

    Raises:
      ConfigError: no sequence_length.
    """
    manifest = src.manifest
    text = manifest.split(src.split).text if manifest is not None and src.split is not None else None
    if text is None:
        return records_in_epoch(src, batch_size, options)
    sequence_length = options.get("sequence_length")
    if sequence_length is None:
        raise ConfigError(
            f"{src.where} is text: a batch is {batch_size} rows of sequence_length tokens, so "
            "steps_per_epoch needs the sequence_length (and packing) build() gets. Received: "
            "sequence_length=None"
        )
    opts = with_options(TEXT, options)
    ctx = PresetContext(manifest, manifest.schema, {}, True, src.where, src.split)
    rows = epoch_rows(plan_packing(ctx, opts)[0])
    return (
        rows,
        f"{text.documents:,} records (documents) that pack into {rows:,} rows of {sequence_length} tokens",
    )

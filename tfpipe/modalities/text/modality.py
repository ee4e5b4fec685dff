"""The text modality: a corpus of documents tokenized at convert time into one record each, with
its tokenizer and each split's lengths file (convert/); read by the text preset (preset.py), whose
batching packs chunks of documents into rows of L tokens (rows.py, stages.py, packer.py); benched
in tokens: the fill, padding, real and slot tokens a second (bench/)."""

from __future__ import annotations

from typing import Any

from tfpipe.bench.measure.models import TEXT_MODELS
from tfpipe.modalities.modality import BenchHalf, Modality, Units
from tfpipe.modalities.text import epoch, summary
from tfpipe.modalities.text.bench import advice, counts, data, figures, present, section
from tfpipe.modalities.text.convert.kind import TEXT
from tfpipe.modalities.text.preset import TEXT as TEXT_PRESET

# Tokens in a text row when none is given: BERT-large's, as the default reference row trained.
DEFAULT_SEQUENCE_LENGTH = 512


def row_length(cfg: Any) -> int:
    """The sequence length L of the rows bench plans (DEFAULT_SEQUENCE_LENGTH when not given)."""
    return int(cfg.sequence_length or DEFAULT_SEQUENCE_LENGTH)


BENCH = BenchHalf(
    # Sequences a batch: a multiple of 8, a TPU core's rows per tile.
    default_batch=64,
    models=TEXT_MODELS,
    # Text counts slot tokens (sequences x sequence length): a billion a second is 3,000x the
    # fastest text row (297,114 per TPU v4 host).
    max_consumer_rate=1e9,
    rate_unit="slot tokens",
    slots=lambda sequence_length: sequence_length or DEFAULT_SEQUENCE_LENGTH,
    synthetic=data.SYNTHETIC,
    noun="a tokenized text corpus",
    options=("sequence_length", "packing", "truncate"),
    row_length=row_length,
    plan_options=lambda cfg: {
        "sequence_length": row_length(cfg),
        "packing": cfg.packing,
        "truncate": cfg.truncate,
    },
    mixes=True,
    batch_counts_records=False,
    without_manifest=data.without_manifest,
    folder_advice=lambda path: data.FOLDER_ADVICE,
    raw=data.raw,
    raw_precedence=2,
    convert_advice=data.convert_advice,
    measure=counts.count,
    units=counts.units,
    storage_examples=counts.storage_examples,
    reference_shape=counts.reference_shape,
    figures=figures.section,
    stage_advice=advice.stage_advice,
    advice=lambda text: advice.text_advice(text) if text is not None else [],
    units_words=Units(example="sequence"),
    section_json=section.section_json,
    view=present.view,
)

MODALITY = Modality(
    name=TEXT.name,
    convert=TEXT,
    preset=TEXT_PRESET,
    bench=BENCH,
    epoch=epoch.epoch,
    summary=summary.converted,
    about_dataset=summary.about_dataset,
    about_split=summary.about_split,
)

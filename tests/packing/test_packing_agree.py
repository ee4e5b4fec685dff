"""describe() and bench predict one fill for a pipeline: the packing spec's, for every mode,
with `chunk=` and for a classifier (its [CLS] and [SEP] added)."""

from __future__ import annotations

import re

import pytest

from tfpipe.modalities.text.bench import measure as textmeasure
from tfpipe.pipeline import plan

L = 128
CASES = {
    **{f"{m}": ("text_ds", {"packing": m}) for m in ("first_fit", "none", "concat")},
    **{
        f"{m}, chunk=7, eos": ("text_ds", {"packing": m, "chunk": 7, "eos": True})
        for m in ("first_fit", "concat")
    },
    "none, chunk=7, truncate": ("text_ds", {"packing": "none", "chunk": 7, "truncate": True}),
    "classifier": ("labeled_text_ds", {"output": "keras_classifier", "truncate": True}),
}


@pytest.mark.parametrize("case", CASES)
def test_describe_and_bench_predict_the_same_fill(case, request):
    fixture, options = CASES[case]
    data = request.getfixturevalue(fixture)
    pipe = plan(data, batch_size=8, sequence_length=L, training=False, **options)
    bench = textmeasure.predict(pipe, L, pipe.decoder.packing.mode)
    described = re.search(r"predicted fill (\d+\.\d)%", pipe.describe())
    assert described is not None and described.group(1) == f"{100 * bench:.1f}", (case, described, bench)

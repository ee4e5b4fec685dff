"""The packing spec on fixed histograms: the tokens added to each document, the chunk, and the
fill predicted as the pipeline packs (its chunk=, EOS, a classifier's [CLS] and [SEP])."""

from __future__ import annotations

import pytest

from tfpipe.modalities.text.preset import TextPacking
from tfpipe.packing import MODES, fill, spec

# 4 documents of 10, 10, 126 and 200 tokens.
HISTOGRAM = {"lengths": [10, 126, 200], "counts": [2, 1, 1], "tokens": [20, 126, 200]}


def test_the_modes_are_one_literal_and_its_names():
    assert MODES == ("first_fit", "none", "concat")


def test_tokens_added_and_the_chunk():
    lm = TextPacking(sequence_length=128, mode="first_fit", eos=3, mean_tokens=63.0)
    assert spec.added_tokens(lm) == 1 and spec.added_tokens(TextPacking(128, "none")) == 0
    assert spec.chunk_size(lm) == 512 * 128 // 64  # about 512 rows at the mean length as packed
    assert spec.chunk_size(lm, 256) == 512 * 256 // 64
    chunked = TextPacking(sequence_length=128, mode="first_fit", eos=3, mean_tokens=63.0, chunk=7)
    assert spec.chunk_size(chunked) == 7 and spec.chunk_size(chunked, 256) == 2048  # chunk= is for its L
    classifier = TextPacking(sequence_length=128, mode="none", truncate=True, classify=True, cls=1, sep=2)
    assert spec.added_tokens(classifier) == 2 and spec.chunk_size(classifier) == 512  # a row a document


def test_a_classifiers_fill_counts_its_cls_and_sep():
    pack = TextPacking(128, "none", truncate=True, classify=True, cls=1, sep=2, histogram=HISTOGRAM)
    # 12, 12, 128 and 128 tokens as packed (framed, cut to L), one row each.
    assert fill.predicted_fill(pack) == (12 + 12 + 128 + 128) / (4 * 128)
    assert fill.epoch_rows(pack) == 4


@pytest.mark.parametrize("mode", ["first_fit", "concat"])
def test_the_fill_packs_in_the_pipelines_chunks(mode):
    h = {"lengths": [10, 20], "counts": [1, 1], "tokens": [10, 20]}
    whole = TextPacking(128, mode, eos=0, histogram=h)
    assert fill.predicted_fill(whole) == (11 + 21) / 128  # both documents in one row
    apart = TextPacking(128, mode, eos=0, histogram=h, chunk=1)
    assert fill.predicted_fill(apart) == (11 + 21) / (2 * 128)  # each packed alone
    assert fill.predicted_fill(apart, 64) == (11 + 21) / 64  # another L: the chunk build() picks there

"""Text corpora on the Beam engine: the local engine's bytes and manifest, tokenized on Beam's
workers with the tokenizer the dataset stores."""

import pytest

from support.records import same_output
from support.text_data import docs, tokenizer_path

pytest.importorskip("apache_beam")

import tfpipe
from tfpipe.synthetic.text import write_corpus

IN_PROCESS = "--runner=FnApiRunner"
TWO_WORKERS = "--runner=DirectRunner --direct_running_mode=multi_processing --direct_num_workers=2"


def test_a_labelled_corpus_matches_the_local_engine(tmp_path):
    texts = docs()[:70]
    write_corpus(
        tmp_path / "src", texts, "jsonl", files=3, labels=[("b", "a", "c")[i % 3] for i in range(70)]
    )
    write_corpus(tmp_path / "src", texts[:9], "parquet", labels=["a"] * 9)
    options = {
        "tokenizer": tokenizer_path(tmp_path),
        "label": "label",
        "num_shards": 4,
        "compression": "gzip",
    }
    local = tfpipe.convert(str(tmp_path / "src"), str(tmp_path / "local"), workers=1, **options)
    beam = tfpipe.convert(
        str(tmp_path / "src"), str(tmp_path / "beam"), engine="beam", pipeline_options=IN_PROCESS, **options
    )
    same_output(tmp_path / "local", tmp_path / "beam")
    assert beam.split("train").text == local.split("train").text and beam.class_names == ("a", "b", "c")


@pytest.mark.slow
def test_a_trained_tokenizer_on_two_worker_processes(tmp_path):
    write_corpus(tmp_path / "src", docs()[:90], "lines", files=2)
    options = {"train_tokenizer": "sentencepiece", "vocab_size": 500, "lines": True, "num_shards": 3}
    tfpipe.convert(str(tmp_path / "src"), str(tmp_path / "local"), workers=2, **options)
    tfpipe.convert(
        str(tmp_path / "src"), str(tmp_path / "beam"), engine="beam", pipeline_options=TWO_WORKERS, **options
    )
    same_output(tmp_path / "local", tmp_path / "beam")


@pytest.mark.slow
def test_workers_reading_their_own_ranges_match_the_local_engine(tmp_path, monkeypatch):
    """Plain files read from checkpoints by Beam's workers (segments of 2 KB, pieces of 7
    documents: many of each), a gzip file read by the converting process: the local engine's
    bytes and manifest, with 2 local workers."""
    from tfpipe.modalities.text.convert import ranges as text_ranges

    monkeypatch.setattr(text_ranges, "SEGMENT_BYTES", 2048)
    monkeypatch.setattr(text_ranges, "DOCS_PER_TASK", 7)
    texts = docs()[:100]
    write_corpus(tmp_path / "src", texts[:80], "jsonl", files=2, labels=[i % 3 for i in range(80)])
    write_corpus(tmp_path / "src", texts[80:], "jsonl.gz", labels=[i % 3 for i in range(20)])
    options = {"tokenizer": tokenizer_path(tmp_path), "label": "label", "num_shards": 3}
    local = tfpipe.convert(str(tmp_path / "src"), str(tmp_path / "local"), workers=2, **options)
    tfpipe.convert(
        str(tmp_path / "src"), str(tmp_path / "beam"), engine="beam", pipeline_options=IN_PROCESS, **options
    )
    same_output(tmp_path / "local", tmp_path / "beam")
    assert local.split("train").text.documents == 100

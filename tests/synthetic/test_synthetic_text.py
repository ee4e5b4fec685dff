"""The built-in English corpus: real text every CPython has, the same on every run, and the
corpus folders written for tests and benchmarks."""

import gzip
import json
import pathlib

import pyarrow.parquet as pq
import pytest

from tfpipe.synthetic import text


def test_the_corpus_is_the_standard_librarys_docstrings_once_each_in_a_fixed_order():
    first = text.documents(120)
    assert first == text.documents(120) and first[:40] == text.documents(40)
    assert len(set(first)) == 120 and all(d.strip() for d in first)
    assert not any("turtle" in d.lower() and "graphics" in d.lower() for d in first)


@pytest.mark.slow  # reads every standard library module: seconds of ast.parse
def test_the_whole_corpus_ends_with_pydocs_topics():
    everything = text.documents()
    assert everything[:120] == text.documents(120)
    import pydoc_data.topics

    assert everything[-1] == pydoc_data.topics.topics[sorted(pydoc_data.topics.topics)[-1]]
    assert len(everything) > 4000 and sum(map(len, everything)) > 1_000_000


def test_write_corpus_in_each_format(tmp_path):
    docs = ["one\nwith a new line", "two", "three é"]
    paths = text.write_corpus(tmp_path / "j", docs, "jsonl.gz", files=2, labels=["a", "b", "a"])
    lines = [
        json.loads(line) for p in paths for line in gzip.decompress(pathlib.Path(p).read_bytes()).splitlines()
    ]
    assert lines == [{"text": d, "label": y} for d, y in zip(docs, "aba", strict=True)]
    assert len(text.write_corpus(tmp_path / "t", docs, "txt")) == 3
    (lines_file,) = text.write_corpus(tmp_path / "l", docs, "lines")
    assert pathlib.Path(lines_file).read_text(encoding="utf-8") == "one with a new line\ntwo\nthree é\n"
    (pq_file,) = text.write_corpus(
        tmp_path / "p", docs, "parquet", labels=[1, 0, 1], class_names=["no", "yes"]
    )
    table = pq.read_table(pq_file)
    assert table.column("text").to_pylist() == docs and table.column("label").to_pylist() == [1, 0, 1]
    features = json.loads(table.schema.metadata[b"huggingface"])["info"]["features"]
    assert features == {
        "text": {"dtype": "string", "_type": "Value"},
        "label": {"names": ["no", "yes"], "_type": "ClassLabel"},
    }

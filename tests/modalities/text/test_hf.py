"""Corpora where Hugging Face users keep them, made by `datasets` itself from real English:
`Dataset.to_json` (JSON Lines named .json, also gzip), `save_to_disk` (Arrow stream files,
state.json, dataset_info.json) as a corpus and as a table, a saved DatasetDict."""

import functools
import json
import os

import pytest

from tfpipe.modalities.text.convert import tokenizers

from support.records import nothing_written, records
from support.text_data import convert, docs, token_lists, tokenizer_path, trained

datasets = pytest.importorskip("datasets", reason='the test extra: pip install "tfpipe[test]" (datasets)')

N = 37  # documents: odd, so 3 Arrow files are uneven
NAMES = ["neg", "neu", "pos"]


@functools.lru_cache(maxsize=1)
def dataset():
    """A `datasets.Dataset` of real English with a ClassLabel (made once per session)."""
    datasets.disable_progress_bars()
    features = datasets.Features(
        {"text": datasets.Value("string"), "label": datasets.ClassLabel(names=NAMES)}
    )
    return datasets.Dataset.from_dict(
        {"text": docs()[:N], "label": [i % 3 for i in range(N)]}, features=features
    )


@pytest.fixture
def bpe(tmp_path):
    return tokenizer_path(tmp_path, "bpe")


def decoded(dest, split="train"):
    tok = tokenizers.load(trained("bpe"))
    return [tok.decode(t) for t in token_lists(records(dest, split)[0])]


@pytest.mark.parametrize("name", ["x.json", "x.json.gz", "x.jsonl"])
def test_to_json_under_a_json_name_is_a_corpus(tmp_path, bpe, name):
    """datasets writes JSON Lines by default, named as the caller likes (.json, .jsonl, gzip by
    option)."""
    src = tmp_path / name
    dataset().to_json(str(src), compression="gzip" if name.endswith(".gz") else None)
    code, _, err = convert(src, tmp_path / "out", "--tokenizer", bpe, "--label", "label")
    assert code == 0, err
    recs, _ = records(tmp_path / "out")
    assert decoded(tmp_path / "out") == docs()[:N]
    assert [r["label"][0] for r in recs] == [i % 3 for i in range(N)]  # numbers, as JSON holds them


def test_a_json_array_is_refused_with_the_way_to_json_lines(tmp_path, bpe):
    src = tmp_path / "x.json"
    dataset().to_json(str(src), lines=False)
    code, _, err = convert(src, tmp_path / "out", "--tokenizer", bpe)
    assert code == 1 and nothing_written(tmp_path / "out")
    assert "one JSON array, not JSON Lines" in err and "lines=True" in err


def test_a_folder_of_json_lines_and_a_json_that_is_not(tmp_path, bpe):
    (tmp_path / "src").mkdir()
    dataset().select(range(20)).to_json(str(tmp_path / "src" / "a.json"))
    dataset().select(range(20, N)).to_json(str(tmp_path / "src" / "b.json"))
    (tmp_path / "src" / "config.json").write_text(json.dumps({"name": "corpus"}, indent=2))
    assert convert(tmp_path / "src", tmp_path / "out", "--tokenizer", bpe)[0] == 0
    _, m = records(tmp_path / "out")
    assert decoded(tmp_path / "out") == docs()[:N]
    assert [(os.path.basename(s.input), s.reason) for s in m.splits["train"].skipped] == [
        ("config.json", "not a corpus file: a .json file that is not JSON Lines")
    ]


def test_save_to_disk_is_a_corpus_with_its_class_names(tmp_path, bpe):
    src = tmp_path / "saved"
    dataset().save_to_disk(str(src), num_shards=3)
    code, _, err = convert(src, tmp_path / "out", "--tokenizer", bpe, "--label", "label")
    assert code == 0, err
    recs, m = records(tmp_path / "out")
    assert decoded(tmp_path / "out") == docs()[:N]  # the files in state.json's order
    assert m.class_names == tuple(NAMES) and [r["label"][0] for r in recs] == [i % 3 for i in range(N)]
    assert m.splits["train"].skipped == ()  # state.json and dataset_info.json are read, not skipped


def test_save_to_disk_is_a_table_without_a_tokenizer(tmp_path):
    src = tmp_path / "saved"
    dataset().save_to_disk(str(src), num_shards=3)
    code, _, err = convert(src, tmp_path / "out", "--label", "label")
    assert code == 0, err
    recs, m = records(tmp_path / "out")
    assert m.layout == "table" and m.splits["train"].skipped == ()
    assert [r["text"][0].decode() for r in recs] == docs()[:N]
    assert m.class_names == tuple(NAMES) and [r["label"][0] for r in recs] == [i % 3 for i in range(N)]


def test_to_parquet_is_a_corpus_with_its_class_names(tmp_path, bpe):
    dataset().to_parquet(str(tmp_path / "x.parquet"))
    code, _, err = convert(tmp_path / "x.parquet", tmp_path / "out", "--tokenizer", bpe, "--label", "label")
    assert code == 0, err
    recs, m = records(tmp_path / "out")
    assert decoded(tmp_path / "out") == docs()[:N]
    assert m.class_names == tuple(NAMES) and [r["label"][0] for r in recs] == [i % 3 for i in range(N)]


def test_to_parquet_is_a_table_with_its_class_names(tmp_path):
    dataset().to_parquet(str(tmp_path / "x.parquet"))
    assert convert(tmp_path / "x.parquet", tmp_path / "out", "--label", "label")[0] == 0
    recs, m = records(tmp_path / "out")
    assert m.class_names == tuple(NAMES) and [r["label"][0] for r in recs] == [i % 3 for i in range(N)]


def test_datasets_missing_label_is_refused_by_row(tmp_path, bpe):
    """datasets stores "no label" as -1 under a ClassLabel (GLUE's test splits): as a corpus and
    as a table, it is no class."""
    ds = dataset().map(lambda row, i: {"label": -1 if i == 4 else row["label"]}, with_indices=True)
    ds.save_to_disk(str(tmp_path / "saved"))
    code, _, err = convert(tmp_path / "saved", tmp_path / "out", "--tokenizer", bpe, "--label", "label")
    assert code == 1 and nothing_written(tmp_path / "out")
    assert "data-00000-of-00001.arrow: row 4: label -1 is not a class index of the file's ClassLabel" in err
    code, _, err = convert(tmp_path / "saved", tmp_path / "out", "--label", "label")
    assert code == 1 and nothing_written(tmp_path / "out")
    assert "label column 'label', row 4 holds -1, which is not a class index of the file's ClassLabel" in err


def test_a_saved_datasetdict_names_a_command_per_split(tmp_path, bpe):
    src = tmp_path / "dd"
    datasets.DatasetDict({"train": dataset(), "test": dataset().select(range(5))}).save_to_disk(str(src))
    code, _, err = convert(src, tmp_path / "out", "--tokenizer", bpe)
    assert code == 1 and nothing_written(tmp_path / "out")
    assert f"tfpipe convert {src / 'train'}" in err and "--split test" in err
    for split in ("train", "test"):
        assert convert(src / split, tmp_path / "out", "--tokenizer", bpe, "--split", split)[0] == 0
    assert decoded(tmp_path / "out", "test") == docs()[:5]

"""`tfpipe convert` for text corpora, through the real CLI on real files: every document one
record holding every token, in source order, from each kind of file; the tokenizer stored and
fingerprinted; the manifest's figures; labels; later splits; resume; workers; inspect."""

import hashlib
import json
import os
import pathlib
import struct

import pytest

import tfpipe
from tfpipe.format.manifest import Manifest
from tfpipe.format.manifest_text import length_bin
from tfpipe.modalities.text.convert import tokenizers
from tfpipe.synthetic.text import write_corpus

from support.records import nothing_written, records
from support.text_data import N_DOCS, cli, convert, docs, token_lists, tokenizer_path, trained


def encoded(kind, texts, vocab_size=600):
    return tokenizers.load(trained(kind, vocab_size)).encode(list(texts))


def visible_files(dest):
    return {
        n: hashlib.sha256(open(os.path.join(dest, n), "rb").read()).hexdigest()
        for n in sorted(os.listdir(dest))
        if not n.startswith(".") and n != "tfpipe.json"
    }


def lengths_of(dest, split="train"):
    data = pathlib.Path(dest, f"lengths.{split}.u32").read_bytes()
    return list(struct.unpack(f"<{len(data) // 4}I", data))


def crc32c(data):
    import google_crc32c

    return google_crc32c.Checksum(data).digest().hex()


@pytest.fixture(scope="module")
def jsonl(tmp_path_factory):
    return str(tmp_path_factory.mktemp("jsonl"))


@pytest.fixture(scope="module")
def corpus(jsonl):
    write_corpus(jsonl, docs(), "jsonl", files=3)
    return jsonl


def test_a_trained_tokenizer_and_every_document_as_one_record(corpus, tmp_path):
    dest = tmp_path / "out"
    code, out, err = convert(
        corpus, dest, "--train-tokenizer", "bpe", "--vocab-size", "600", "--num-shards", "4"
    )
    assert code == 0, err
    recs, m = records(dest)
    assert m.layout == "text" and [f.name for f in m.schema.fields] == ["tokens"]
    assert m.schema["tokens"].shape == (None,) and m.schema.label is None
    # The tokenizer is stored beside the shards; trained on the same documents, it is the same file.
    stored = (dest / "tokenizer.json").read_bytes()
    assert stored == trained("bpe").data
    assert m.tokenizer.fingerprint == "sha256:" + hashlib.sha256(stored).hexdigest()
    assert m.tokenizer.kind == "huggingface" and m.tokenizer.vocab_size == 600
    assert m.tokenizer.special_ids == {"pad": 0, "bos": 1, "eos": 2, "cls": 1, "sep": 2, "mask": 3}
    # Every document, in source order, every token, no special token added; decodes to its text.
    expected = encoded("bpe", docs())
    assert token_lists(recs) == expected
    tok = tokenizers.load(trained("bpe"))
    assert [tok.decode(t) for t in token_lists(recs)] == docs()
    assert [s.examples for s in m.split("train").shards] == [61, 60, 60, 60]
    text = m.split("train").text
    assert (text.documents, text.tokens, text.empty_documents) == (N_DOCS, sum(map(len, expected)), 0)
    h = text.length_histogram
    assert sum(h["counts"]) == N_DOCS and sum(h["tokens"]) == text.tokens
    lengths = sorted(len(t) for t in expected)
    assert h["lengths"] == sorted({length_bin(n) for n in lengths})
    assert text.percentiles((0.5, 1.0)) == [lengths[(N_DOCS + 1) // 2 - 1], lengths[-1]]
    assert f"converted {N_DOCS:,} documents ({text.tokens:,} tokens) into 4 shards" in out
    # The lengths file: each record's token count, in record order, as little-endian uint32.
    assert lengths_of(dest) == [len(t) for t in token_lists(recs)]
    assert text.lengths.to_json() == {
        "file": "lengths.train.u32",
        "format": "uint32le",
        "bytes": 4 * N_DOCS,
        "checksum": "crc32c:" + crc32c((dest / "lengths.train.u32").read_bytes()),
    }


@pytest.mark.parametrize("fmt", ["jsonl.gz", "txt", "lines", "parquet"])
def test_each_kind_of_file_gives_the_same_tokens(fmt, tmp_path):
    """The same documents as .jsonl.gz, .txt files, .txt lines and Parquet: the same records.
    (A .txt line holds no newline, so `lines` documents are the documents on one line.)"""
    texts = docs()[:40]
    if fmt == "lines":
        texts = [" ".join(t.splitlines()) for t in texts]
    write_corpus(tmp_path / "src", texts, fmt, files=2)
    tok = tokenizer_path(tmp_path, "sentencepiece")
    args = ["--tokenizer", tok, "--num-shards", "3"] + (["--lines"] if fmt == "lines" else [])
    code, _, err = convert(tmp_path / "src", tmp_path / "out", *args)
    assert code == 0, err
    recs, m = records(tmp_path / "out")
    assert token_lists(recs) == encoded("sentencepiece", texts)
    assert m.tokenizer.kind == "sentencepiece" and (tmp_path / "out" / "tokenizer.model").exists()
    assert m.tokenizer.special_ids == {"pad": 3, "unk": 0, "bos": 1, "eos": 2, "cls": 4, "sep": 5, "mask": 6}
    assert m.split("train").notes == ()  # nothing lost: byte fallback covers every character


def test_a_glob_and_a_single_file(corpus, tmp_path):
    tok = tokenizer_path(tmp_path)
    code, _, err = convert(os.path.join(corpus, "part-0000[02].jsonl"), tmp_path / "glob", "--tokenizer", tok)
    assert code == 0, err
    recs, _ = records(tmp_path / "glob")
    texts = [
        json.loads(line)["text"]
        for name in ("part-00000.jsonl", "part-00002.jsonl")
        for line in (pathlib.Path(corpus) / name).read_text().splitlines()
    ]
    assert token_lists(recs) == encoded("bpe", texts)
    code, _, err = convert(os.path.join(corpus, "part-00001.jsonl"), tmp_path / "one", "--tokenizer", tok)
    assert code == 0, err
    assert Manifest.load(str(tmp_path / "one")).split("train").text.documents == N_DOCS - len(texts)


def test_workers_change_no_byte_and_a_resumed_run_writes_the_same(corpus, tmp_path, monkeypatch):
    tok = tokenizer_path(tmp_path)
    args = ["--tokenizer", tok, "--num-shards", "5"]
    assert convert(corpus, tmp_path / "one", *args, "--workers", "1")[0] == 0
    assert convert(corpus, tmp_path / "two", *args, "--workers", "2")[0] == 0
    assert visible_files(tmp_path / "one") == visible_files(tmp_path / "two")
    from tfpipe.convert import engine, run, writer

    calls = []

    def stop_after_two_shards(name):
        calls.append(name)
        if calls.count("shard-committed") == 2:
            raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        for module in (run, writer, engine):
            if hasattr(module, "pause_point"):
                patch.setattr(module, "pause_point", stop_after_two_shards)
        assert convert(corpus, tmp_path / "resumed", *args)[0] == 130
    assert not (tmp_path / "resumed" / "tfpipe.json").exists()
    assert convert(corpus, tmp_path / "resumed", *args)[0] == 1  # interrupted: --resume or --overwrite
    code, _, err = convert(corpus, tmp_path / "resumed", *args, "--resume")
    assert code == 0, err
    assert visible_files(tmp_path / "resumed") == visible_files(tmp_path / "one")
    one, resumed = Manifest.load(str(tmp_path / "one")), Manifest.load(str(tmp_path / "resumed"))
    assert resumed.split("train").text == one.split("train").text


@pytest.mark.parametrize(
    "first,second", [("absolute", "relative"), ("relative", "absolute"), ("glob", "abs glob")]
)
def test_resume_of_a_corpus_spelled_another_way_continues(corpus, tmp_path, monkeypatch, first, second):
    """SRC, DEST and --tokenizer named `corpus` once and `/abs/corpus` the next time are the
    same: the resume continues, and writes what one uninterrupted run writes."""
    from tfpipe.convert import engine, run, writer

    (tmp_path / "tok").mkdir()
    tok = tokenizer_path(tmp_path / "tok")
    monkeypatch.chdir(tmp_path)
    spelled = {
        "absolute": (corpus, str(tmp_path / "out"), tok),
        "relative": (os.path.relpath(corpus), "out", os.path.relpath(tok)),
        "glob": (os.path.join(os.path.relpath(corpus), "*.jsonl"), "out", tok),
        "abs glob": (os.path.join(corpus, "*.jsonl"), str(tmp_path / "out"), tok),
    }
    calls = []

    def stop_after_two_shards(name):
        calls.append(name)
        if calls.count("shard-committed") == 2:
            raise KeyboardInterrupt

    def run_as(spelling, *flags):
        src, dest, tokenizer = spelled[spelling]
        return convert(src, dest, "--tokenizer", tokenizer, "--num-shards", "4", "--workers", "1", *flags)

    with monkeypatch.context() as patch:
        for module in (run, writer, engine):
            if hasattr(module, "pause_point"):
                patch.setattr(module, "pause_point", stop_after_two_shards)
        assert run_as(first)[0] == 130
    code, _, err = run_as(second, "--resume")
    assert code == 0, err
    assert convert(corpus, tmp_path / "one", "--tokenizer", tok, "--num-shards", "4")[0] == 0
    assert visible_files(tmp_path / "out") == visible_files(tmp_path / "one")


def test_the_lengths_file_is_committed_with_the_split(corpus, tmp_path, monkeypatch):
    """Written after the shards and before the manifest; a done-record of an older tfpipe (no
    lengths) has its shard rewritten on --resume; --overwrite replaces the file."""
    from tfpipe.convert import engine, run, writer

    args = ["--tokenizer", tokenizer_path(tmp_path), "--num-shards", "5"]
    assert convert(corpus, tmp_path / "whole", *args)[0] == 0
    out = tmp_path / "out"

    def stop_at(point, times=1):
        calls = []

        def pause(name):
            calls.append(name)
            if calls.count(point) == times:
                raise KeyboardInterrupt

        for module in (run, writer, engine):
            if hasattr(module, "pause_point"):
                monkeypatch.setattr(module, "pause_point", pause)

    stop_at("shard-committed", times=2)
    assert convert(corpus, out, *args)[0] == 130
    record = out / ".train-00000-of-00005.done"
    older = json.loads(record.read_text())
    del older["text"]["lengths"]
    record.write_text(json.dumps(older))
    inodes = [os.stat(out / f"train-0000{i}-of-00005").st_ino for i in (0, 1)]
    stop_at("split-file-committed")
    assert convert(corpus, out, *args, "--resume")[0] == 130
    assert lengths_of(out) == lengths_of(tmp_path / "whole") and not (out / "tfpipe.json").exists()
    assert os.stat(out / "train-00000-of-00005").st_ino != inodes[0]  # rewritten
    assert os.stat(out / "train-00001-of-00005").st_ino == inodes[1]  # kept
    monkeypatch.undo()
    code, _, err = convert(corpus, out, *args)
    assert code == 1 and "interrupted conversion of split 'train'" in err
    assert convert(corpus, out, *args, "--resume")[0] == 0
    assert visible_files(out) == visible_files(tmp_path / "whole")
    one_file = os.path.join(corpus, "part-00001.jsonl")
    assert convert(one_file, out, *args, "--overwrite")[0] == 0
    recs, m = records(out)
    assert lengths_of(out) == [len(t) for t in token_lists(recs)] and len(recs) < N_DOCS
    assert m.split("train").text.lengths.bytes == 4 * len(recs)


def test_labels_text_becomes_class_indices_numbers_stay(tmp_path):
    texts = docs()[:30]
    names = ["pos", "neg", "neutral"]
    write_corpus(tmp_path / "named", texts, "jsonl", labels=[names[i % 3] for i in range(30)])
    write_corpus(tmp_path / "numbers", texts, "jsonl", labels=[(i * 7) % 5 - 1 for i in range(30)])
    tok = tokenizer_path(tmp_path)
    assert convert(tmp_path / "named", tmp_path / "a", "--tokenizer", tok, "--label", "label")[0] == 0
    recs, m = records(tmp_path / "a")
    assert m.class_names == ("neg", "neutral", "pos") and m.schema.label == "label"
    assert [r["label"][0] for r in recs] == [m.class_names.index(names[i % 3]) for i in range(30)]
    assert token_lists(recs) == encoded("bpe", texts)
    assert convert(tmp_path / "numbers", tmp_path / "b", "--tokenizer", tok, "--label", "label")[0] == 0
    recs, m = records(tmp_path / "b")
    assert m.class_names == () and [r["label"][0] for r in recs] == [(i * 7) % 5 - 1 for i in range(30)]
    # A later split keeps the classes' numbering; a class the dataset does not know is refused.
    write_corpus(tmp_path / "val", texts[:4], "jsonl", labels=["pos", "pos", "neg", "pos"])
    assert convert(tmp_path / "val", tmp_path / "a", "--split", "validation", "--label", "label")[0] == 0
    assert [r["label"][0] for r in records(tmp_path / "a", "validation")[0]] == [2, 2, 0, 2]
    write_corpus(tmp_path / "odd", texts[:2], "jsonl", labels=["pos", "angry"])
    code, _, err = convert(tmp_path / "odd", tmp_path / "a", "--split", "test", "--label", "label")
    assert code == 1 and "label(s) ['angry'] are not classes of the dataset this split joins" in err


def test_parquet_as_datasets_writes_it_with_a_classlabel(tmp_path):
    import pyarrow.parquet as pq

    texts = docs()[:25]
    write_corpus(
        tmp_path / "src",
        texts,
        "parquet",
        files=2,
        labels=[i % 2 for i in range(25)],
        class_names=["neg", "pos"],
    )
    meta = pq.read_schema(tmp_path / "src" / "part-00000.parquet").metadata
    assert json.loads(meta[b"huggingface"])["info"]["features"]["label"]["_type"] == "ClassLabel"
    code, _, err = convert(
        tmp_path / "src", tmp_path / "out", "--tokenizer", tokenizer_path(tmp_path), "--label", "label"
    )
    assert code == 0, err
    recs, m = records(tmp_path / "out")
    assert m.class_names == ("neg", "pos") and [r["label"][0] for r in recs] == [i % 2 for i in range(25)]


def test_a_later_split_uses_the_datasets_tokenizer(corpus, tmp_path):
    dest = tmp_path / "out"
    assert convert(corpus, dest, "--train-tokenizer", "bpe", "--vocab-size", "600")[0] == 0
    fingerprint = Manifest.load(str(dest)).tokenizer.fingerprint
    write_corpus(tmp_path / "val", docs()[:9], "jsonl")
    code, _, err = convert(tmp_path / "val", dest, "--split", "validation")
    assert code == 0, err
    m = Manifest.load(str(dest))
    assert m.tokenizer.fingerprint == fingerprint and m.split("validation").text.documents == 9
    assert token_lists(records(dest, "validation")[0]) == encoded("bpe", docs()[:9])
    other = tokenizer_path(tmp_path, "bpe", 700)
    code, _, err = convert(tmp_path / "val", dest, "--split", "test", "--tokenizer", other)
    assert code == 1 and fingerprint in err and trained("bpe", 700).fingerprint in err
    code, _, err = convert(
        tmp_path / "val", dest, "--split", "test", "--train-tokenizer", "bpe", "--vocab-size", "600"
    )
    assert code == 1 and "would train another" in err
    assert sorted(Manifest.load(str(dest)).splits) == ["train", "validation"]


def test_inspect_shows_the_text_figures_and_a_decoded_sample(corpus, tmp_path):
    dest = tmp_path / "out"
    assert (
        convert(corpus, dest, "--tokenizer", tokenizer_path(tmp_path, "wordpiece"), "--num-shards", "2")[0]
        == 0
    )
    code, out, err = cli("inspect", dest)
    assert code == 0, err
    m = Manifest.load(str(dest))
    text = m.split("train").text
    p10, p50, p90, p99, top = text.percentiles((0.1, 0.5, 0.9, 0.99, 1.0))
    assert f"text: {N_DOCS:,} documents, {text.tokens:,} tokens" in out
    assert (
        f"document length in tokens: p10 {p10:,}, p50 {p50:,}, p90 {p90:,}, p99 {p99:,}, max {top:,}" in out
    )
    assert (
        "tokenizer: huggingface tokenizer.json, vocabulary 600, special ids: pad 0, unk 1, cls 2, sep 3, mask 4"
        in out
    )
    assert "whitespace not kept" in out
    first = encoded("wordpiece", docs()[:1])[0]
    decoded = tokenizers.load(trained("wordpiece")).decode(first)
    assert f"sample record 0 ({len(first):,} tokens): {decoded[:150]!r}"[:-1] in out
    # --verify checks the lengths file too, and names it when it was changed.
    code, out, _ = cli("inspect", dest, "--verify")
    # The lengths file is no shard: its lengths are counted as such, and said beside the shards.
    assert code == 0 and f"train/lengths.train.u32: {N_DOCS} lengths ok" in out
    assert "verify: 2 of 2 shards ok; the lengths file ok; the tokenizer ok" in out
    lengths = dest / "lengths.train.u32"
    lengths.write_bytes(b"\1\0\0\0" + lengths.read_bytes()[4:])
    code, out, _ = cli("inspect", dest, "--verify")
    assert code == 1 and "train/lengths.train.u32" in out and "checksum mismatch" in out
    assert "verify: 2 of 2 shards ok; the lengths file FAILED; the tokenizer ok" in out


def test_a_tokenizer_replaced_after_convert_is_named_by_inspect_and_verify(corpus, tmp_path):
    dest = tmp_path / "out"
    assert convert(corpus, dest, "--tokenizer", tokenizer_path(tmp_path, "bpe"), "--num-shards", "2")[0] == 0
    code, out, _ = cli("inspect", dest, "--verify")
    assert (
        code == 0
        and "tokenizer.json: fingerprint ok" in out
        and "2 of 2 shards ok; the lengths file ok; the tokenizer ok" in out
    )
    recorded = Manifest.load(str(dest)).tokenizer.fingerprint
    (dest / "tokenizer.json").write_bytes(trained("bpe", 700).data)  # another tokenizer, same name
    now = trained("bpe", 700).fingerprint
    code, out, _ = cli("inspect", dest)
    assert code == 0  # a summary; --verify fails
    assert f"WARNING: tokenizer.json: fingerprint mismatch: manifest {recorded}, file {now}" in out
    assert "sample: not decoded (" in out and "expected the tokenizer the dataset was converted with" in out
    code, out, _ = cli("inspect", dest, "--verify")
    assert code == 1 and "tokenizer.json: fingerprint FAILED" in out
    assert "verify: 2 of 2 shards ok; the lengths file ok; the tokenizer FAILED" in out


def test_options_of_other_sources_are_refused_by_kind(corpus, tmp_path):
    tok = tokenizer_path(tmp_path)
    code, _, err = convert(corpus, tmp_path / "a", "--tokenizer", tok, "--resize-shorter", "64")
    assert code == 1 and "resize_shorter=64" in err and "text corpus" in err
    code, _, err = convert(corpus, tmp_path / "b", "--tokenizer", tok, "--seed", "3", "--missing", "fill")
    assert code == 1 and "seed=3" in err and "missing='fill'" in err
    table = tmp_path / "t.csv"
    table.write_text("a,b\n1,2\n")
    code, _, err = convert(table, tmp_path / "c", "--text-field", "body")
    assert code == 1 and "text_field='body'" in err and "csv" in err
    code, _, err = convert(corpus, tmp_path / "d")
    # Every trainer, as the guide lists them (it once left out sentencepiece-bpe).
    trainers = "--train-tokenizer sentencepiece|sentencepiece-bpe|bpe|wordpiece --vocab-size N"
    assert code == 1 and "needs a tokenizer" in err and trainers in err
    assert trainers in (pathlib.Path(__file__).parents[3] / "docs" / "guides" / "text.md").read_text()
    code, _, err = convert(corpus, tmp_path / "e", "--vocab-size", "600")
    assert code == 1 and "go together" in err
    code, _, err = convert(corpus, tmp_path / "f", "--train-tokenizer", "sentencepiece", "--vocab-size", "20")
    assert code == 1 and "vocab_size" in err and "at least" in err
    assert all(nothing_written(tmp_path / d) for d in "abcdef")


def test_the_python_api_returns_the_manifest(corpus, tmp_path):
    m = tfpipe.convert(
        corpus, str(tmp_path / "out"), tokenizer=tokenizer_path(tmp_path), num_shards=2, workers=1
    )
    assert m.split("train").text.documents == N_DOCS and m.split("train").options["tokenizer"].endswith(
        ".json"
    )
    assert "resize_shorter" not in m.split("train").options  # only options that apply are recorded


def test_a_trained_vocabulary_smaller_than_asked_is_said(tmp_path):
    write_corpus(tmp_path / "src", docs()[:20], "jsonl")
    code, out, err = convert(
        tmp_path / "src", tmp_path / "out", "--train-tokenizer", "bpe", "--vocab-size", "50000"
    )
    assert code == 0, err
    size = Manifest.load(str(tmp_path / "out")).tokenizer.vocab_size
    assert size < 50000 and f"the trained bpe tokenizer has {size:,} ids, not the 50,000 asked for" in out

"""A text corpus is converted exactly, or what was not is named by file and line (row for
Parquet), through the real CLI: invalid UTF-8, JSON that does not parse, missing and non-string
fields, labels, empty documents, round trips that change the text, special tokens spelled in
the text, byte-order marks, blank lines and CRLF. Nothing is written when the first pass
refuses a corpus."""

import gzip
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tfpipe.format.manifest import Manifest
from tfpipe.modalities.text.convert import tokenizers

from support.cli import cli_here as cli
from support.records import nothing_written, records
from support.text_data import convert, docs, token_lists, tokenizer_path, trained


@pytest.fixture
def bpe(tmp_path):
    return tokenizer_path(tmp_path, "bpe")


def write_lines(path, lines):
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def obj(text, **more):
    return json.dumps({"text": text, **more}).encode()


def refused(src, dest, *args):
    """The convert run's error, checking that it failed and wrote nothing."""
    code, _, err = convert(src, dest, *args)
    assert code == 1, err
    assert nothing_written(dest)
    return err


def test_invalid_utf8_in_json_lines_names_file_line_and_byte_offset(tmp_path, bpe):
    src = write_lines(tmp_path / "c.jsonl", [obj("fine"), obj("also fine"), b'{"text": "caf\xe9"}'])
    err = refused(src, tmp_path / "out", "--tokenizer", bpe)
    offset = len(obj("fine")) + 1 + len(obj("also fine")) + 1 + len(b'{"text": "caf')
    assert f"{src}: line 3, byte offset {offset}: expected UTF-8 text. Received: bytes e9 22 7d 0a" in err


def test_invalid_utf8_in_gzip_text_and_lines(tmp_path, bpe):
    gz = tmp_path / "c.jsonl.gz"
    gz.write_bytes(gzip.compress(obj("ok") + b"\n" + b'{"text": "\xff"}\n'))
    offset = len(obj("ok") + b'\n{"text": "')
    assert f"{gz}: line 2, byte offset {offset} of the decompressed text: expected UTF-8" in refused(
        gz, tmp_path / "a", "--tokenizer", bpe
    )
    txt = tmp_path / "doc.txt"
    txt.write_bytes(b"first line\nsecond \xc3( line\n")
    assert f"{txt}: line 2, byte offset 18: expected UTF-8" in refused(
        txt, tmp_path / "b", "--tokenizer", bpe
    )
    assert f"{txt}: line 2, byte offset 18" in refused(txt, tmp_path / "c", "--tokenizer", bpe, "--lines")


def test_invalid_utf8_in_a_parquet_row(tmp_path, bpe):
    src = tmp_path / "c.parquet"
    bad = pa.array([b"ok", b"caf\xe9"], pa.binary()).view(pa.string())
    pq.write_table(pa.table({"text": bad}), src)
    assert f"{src}: row 1, byte offset 3 of column 'text': expected UTF-8" in refused(
        src, tmp_path / "out", "--tokenizer", bpe
    )


def test_every_bad_line_is_named_at_once(tmp_path, bpe):
    src = write_lines(
        tmp_path / "c.jsonl",
        [
            obj("fine"),
            b'{"text": "unterminated}',
            b'{"body": "no text field"}',
            b'{"text": 12}',
            b'{"text": null}',
            b'["a", "list"]',
            b'{"text": ["a list"]}',
            b'{"text": "lone \\ud800 surrogate"}',
        ],
    )
    err = refused(src, tmp_path / "out", "--tokenizer", bpe)
    assert "the first pass found 7 problems" in err
    assert f'{src}: line 2: expected one JSON object. Received: \'{{"text": "unterminated}}\'' in err
    assert (
        f"{src}: line 3: expected the text in field 'text' (--text-field). Received: an object with fields ['body']"
        in err
    )
    assert f"{src}: line 4: expected text (a JSON string) in field 'text'. Received: a number 12" in err
    assert f"{src}: line 5: field 'text' is null" in err
    assert f"{src}: line 6: expected a JSON object. Received: list" in err
    assert f"{src}: line 7: expected text (a JSON string) in field 'text'. Received: a list" in err
    assert f"{src}: line 8: field 'text' holds a lone surrogate (\\ud800" in err


def test_text_field_picks_another_field(tmp_path, bpe):
    src = write_lines(tmp_path / "c.jsonl", [json.dumps({"body": t, "text": 1}).encode() for t in docs()[:5]])
    code, _, err = convert(src, tmp_path / "out", "--tokenizer", bpe, "--text-field", "body")
    assert code == 0, err
    assert token_lists(records(tmp_path / "out")[0]) == tokenizers.load(trained("bpe")).encode(docs()[:5])


def test_bad_labels_are_named(tmp_path, bpe):
    src = write_lines(
        tmp_path / "c.jsonl",
        [obj("a", label=1), obj("b", label=2.5), obj("c", label=True), obj("d"), obj("e", label="pos")],
    )
    err = refused(src, tmp_path / "out", "--tokenizer", bpe, "--label", "label")
    assert f"{src}: line 2: expected a label that is text or an integer. Received: float 2.5" in err
    assert f"{src}: line 3: expected a label that is text or an integer. Received: bool true" in err
    assert f"{src}: line 4: expected the label in field 'label' (--label)" in err
    assert (
        f"labels of one kind in 'label': text (class names) or integers. Received: text at {src}: line 5"
        in err
    )
    txt = tmp_path / "t.txt"
    txt.write_text("no label here")
    assert "a .txt file holds no label" in refused(txt, tmp_path / "txt", "--tokenizer", bpe, "--label", "y")


def test_a_number_label_beyond_the_classes_of_the_dataset_it_joins_is_named(tmp_path, bpe):
    """The dataset names its classes ['neg', 'pos']: a number is one of their indices (it used
    to be written as it was, label 7 of 2 classes)."""
    train = write_lines(tmp_path / "train.jsonl", [obj(docs()[0], label="pos"), obj(docs()[1], label="neg")])
    assert convert(train, tmp_path / "out", "--tokenizer", bpe, "--label", "label")[0] == 0
    val = write_lines(tmp_path / "val.jsonl", [obj(docs()[2], label=1), obj(docs()[3], label=7)])
    code, _, err = convert(val, tmp_path / "out", "--label", "label", "--split", "validation")
    assert code == 1
    assert (
        f"{val}: line 2: label 7 is not a class index of the dataset this split joins (['neg', 'pos'], 0..1)"
        in err
    )
    assert "validation" not in Manifest.load(str(tmp_path / "out")).splits
    ok = write_lines(tmp_path / "ok.jsonl", [obj(docs()[2], label=1), obj(docs()[3], label=0)])
    assert convert(ok, tmp_path / "out", "--label", "label", "--split", "validation")[0] == 0


def test_a_text_label_beside_a_classlabel_it_is_not_in_is_named(tmp_path, bpe):
    """The encoder indexes text labels by the ClassLabel's names: the first pass checks them
    (it used to end in a KeyError inside a worker)."""
    features = {"label": {"names": ["neg", "pos"], "_type": "ClassLabel"}}
    table = pa.table({"text": docs()[:3], "label": ["pos", "positive", "neg"]})
    src = tmp_path / "c.parquet"
    pq.write_table(
        table.replace_schema_metadata({"huggingface": json.dumps({"info": {"features": features}})}), src
    )
    err = refused(src, tmp_path / "out", "--tokenizer", bpe, "--label", "label")
    assert (
        f"{src}: label(s) ['positive'] (first at {src}: row 1 ('positive')) are not among the ClassLabel"
        in err
    )


def test_empty_documents_are_counted_and_left_out(tmp_path, bpe):
    texts = [docs()[0], "", docs()[1], "", "", docs()[2]]
    src = write_lines(tmp_path / "c.jsonl", [obj(t) for t in texts])
    code, out, err = convert(src, tmp_path / "out", "--tokenizer", bpe, "--num-shards", "2")
    assert code == 0, err
    recs, m = records(tmp_path / "out")
    text = m.split("train").text
    assert (text.documents, text.empty_documents, m.split("train").examples) == (3, 3, 3)
    assert token_lists(recs) == tokenizers.load(trained("bpe")).encode(docs()[:3])
    note = f"3 empty document(s) left out (they tokenize to nothing), the first at {src}: line 2"
    assert any(note in n for n in m.split("train").notes) and note in out and "3 empty left out" in out


def test_a_round_trip_that_changes_the_text_is_counted_loudly(tmp_path):
    """WordPiece trained on English has no 日本語: [UNK], counted with the first case shown."""
    wordpiece = tokenizer_path(tmp_path, "wordpiece")
    texts = [docs()[0], "Tokyo is 東京 in Japanese.", docs()[1], "日本語"]
    src = write_lines(tmp_path / "c.jsonl", [obj(t) for t in texts])
    code, out, err = convert(src, tmp_path / "out", "--tokenizer", wordpiece)
    assert code == 0, err
    m = Manifest.load(str(tmp_path / "out"))
    assert m.split("train").text.documents == 4  # written as tokenized, never dropped
    (note,) = [n for n in m.split("train").notes if n.startswith("ROUND TRIP")]
    assert note.startswith("ROUND TRIP: 2 document(s) decode to other text than they hold")
    assert f"the first: {src}: line 2, character 7 after normalisation" in note
    assert "'Tokyois東京inJapanese.'" in note and "'Tokyois[UNK][UNK]inJapanese'" in note
    assert "WARNING: ROUND TRIP: 2 document(s)" in out and "special token" not in out  # [UNK] is not one


def test_special_tokens_spelled_in_the_text_are_noted(tmp_path, bpe):
    src = write_lines(tmp_path / "c.jsonl", [obj(docs()[0]), obj("the end of a text is </s> here")])
    code, out, err = convert(src, tmp_path / "out", "--tokenizer", bpe)
    assert code == 0, err
    recs, _ = records(tmp_path / "out")
    assert 2 in recs[1]["tokens"]  # </s>: the tokenizer's own choice, kept and said
    assert (
        "1 document(s) spell a special token that the tokenizer encodes as its special id "
        f"(e.g. a literal </s>); the first: {src}: line 2" in out
    )


def test_a_byte_order_mark_is_dropped_blank_lines_noted_and_crlf_kept_out(tmp_path, bpe):
    jsonl = tmp_path / "j" / "c.jsonl"
    jsonl.parent.mkdir()
    jsonl.write_bytes(b"\xef\xbb\xbf" + obj("first") + b"\n\n" + obj("second") + b"\n   \n")
    code, out, err = convert(jsonl.parent, tmp_path / "a", "--tokenizer", bpe)
    assert code == 0, err
    tok = tokenizers.load(trained("bpe"))
    assert [tok.decode(t) for t in token_lists(records(tmp_path / "a")[0])] == ["first", "second"]
    assert "note: 1 blank line(s) of JSON Lines left out" in out
    txt = tmp_path / "t" / "a.txt"
    txt.parent.mkdir()
    txt.write_bytes(b"\xef\xbb\xbfline one\r\nline two\r\n")
    assert convert(txt.parent, tmp_path / "b", "--tokenizer", bpe, "--lines")[0] == 0
    assert [tok.decode(t) for t in token_lists(records(tmp_path / "b")[0])] == ["line one", "line two"]
    assert convert(txt.parent, tmp_path / "c", "--tokenizer", bpe)[0] == 0
    assert [tok.decode(t) for t in token_lists(records(tmp_path / "c")[0])] == ["line one\r\nline two\r\n"]


def test_folders_subfolders_and_other_files(tmp_path, bpe):
    src = tmp_path / "src"
    (src / "more").mkdir(parents=True)
    write_lines(src / "a.jsonl", [obj("x")])
    err = refused(src, tmp_path / "a", "--tokenizer", bpe)
    assert f"{src}: expected a folder of text corpus files. Received: subfolder(s) ['more']" in err
    (src / "more").rmdir()
    (src / "notes.md").write_text("not a corpus file")
    (src / "_SUCCESS").write_text("")
    code, out, err = convert(src, tmp_path / "b", "--tokenizer", bpe)
    assert code == 0, err
    m = Manifest.load(str(tmp_path / "b"))
    assert [(s.input, s.reason) for s in m.split("train").skipped] == [
        (
            str(src / "notes.md"),
            "not a corpus file: its name ends in none of .jsonl, .ndjson, .txt (each also "
            "compressed: .gz, .bz2, .xz, .zip), .parquet, .pq, .arrow",
        )
    ]
    assert "skipped" in out and "notes.md" in out
    err = refused(tmp_path / "missing.jsonl", tmp_path / "c", "--tokenizer", bpe)
    assert "does not exist" in err


def test_a_tokenizer_file_that_does_not_load_is_named(tmp_path):
    src = write_lines(tmp_path / "c.jsonl", [obj("x")])
    bad = tmp_path / "tok.model"
    bad.write_bytes(b"not a model")
    err = refused(src, tmp_path / "a", "--tokenizer", bad)
    assert f"{bad}: expected a SentencePiece model (.model) or a Hugging Face tokenizer.json" in err
    err = refused(src, tmp_path / "b", "--tokenizer", tmp_path / "nothing.json")
    assert "nothing.json: cannot read the tokenizer file" in err
    empty = tmp_path / "empty.model"
    empty.write_bytes(b"")
    err = refused(src, tmp_path / "c", "--tokenizer", empty)
    assert f"{empty}: expected a SentencePiece model (.model) or a Hugging Face tokenizer.json. " in err
    assert "Received: an empty file (0 bytes)" in err and "Traceback" not in err


def test_a_symlink_loop_in_a_corpus_is_named_with_its_links(tmp_path, bpe):
    src = tmp_path / "corpus"
    src.mkdir()
    write_lines(src / "a.jsonl", [obj("one"), obj("two")])
    (src / "l1.jsonl").symlink_to("l2.jsonl")
    (src / "l2.jsonl").symlink_to("l1.jsonl")
    err = refused(src, tmp_path / "out", "--tokenizer", bpe)
    assert (
        f"{src}/l1.jsonl: expected a corpus file. Received: a symbolic link loop: "
        f"{src}/l1.jsonl -> l2.jsonl -> l1.jsonl, which is where it started" in err
    )
    assert "--resume (resume=True)" not in err and "a --resume cannot get past it" in err
    os.remove(src / "l2.jsonl")
    err = refused(src, tmp_path / "out", "--tokenizer", bpe)
    assert f"a broken symbolic link: {src}/l1.jsonl -> l2.jsonl, which does not exist" in err


def test_a_count_of_one_is_said_in_the_singular_and_the_lengths_file_is_no_shard(tmp_path, bpe):
    """It said "into 1 shards", and `inspect --verify` counted the lengths file as a shard."""
    src = write_lines(tmp_path / "one.jsonl", [obj(docs()[0])])
    code, out, err = convert(src, tmp_path / "out", "--tokenizer", bpe)
    tokens = Manifest.load(str(tmp_path / "out")).split("train").text.tokens
    assert code == 0, err
    assert "1/1 document, 1/1 shard\n" in out
    assert f"converted 1 document ({tokens:,} tokens) into 1 shard, " in out
    code, out, _ = cli("inspect", tmp_path / "out", "--verify")
    assert code == 0 and "split train: 1 example in 1 shard, " in out
    assert "train/train-00000-of-00001: 1 record ok" in out and "train/lengths.train.u32: 1 length ok" in out
    assert out.endswith("verify: 1 of 1 shard ok; the lengths file ok; the tokenizer ok\n")

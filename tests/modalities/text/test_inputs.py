"""Text corpora as users have them, through the real CLI: compressed under any of the usual
names, UTF-16 and UTF-32, old Mac line ends, a key given twice, one file under two names,
Hive-partitioned Parquet. Each is read exactly, or refused by name and with a way out."""

import bz2
import gzip
import json
import lzma
import zipfile

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tfpipe.modalities.text.convert import tokenizers

from support.records import nothing_written, records
from support.text_data import convert, docs, token_lists, tokenizer_path, trained


@pytest.fixture
def bpe(tmp_path):
    return tokenizer_path(tmp_path, "bpe")


def body(texts):
    """JSON Lines of `texts`, as `DataFrame.to_json(orient="records", lines=True)` writes them."""
    return "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts)


def decoded(dest):
    tok = tokenizers.load(trained("bpe"))
    return [tok.decode(t) for t in token_lists(records(dest)[0])]


def refused(src, dest, *args):
    code, _, err = convert(src, dest, *args)
    assert code == 1, err
    assert nothing_written(dest)
    return err


def _zip(data):
    import io

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("corpus.jsonl", data)
    return out.getvalue()


@pytest.mark.parametrize(
    "name,pack",
    [
        ("c.jsonl.bz2", bz2.compress),
        ("c.jsonl.xz", lzma.compress),
        ("c.jsonl.zip", _zip),
        ("c.ndjson.gz", gzip.compress),
        ("c.jsonl", gzip.compress),  # gzip under a plain name: read by content
    ],
)
def test_compressed_json_lines_are_read_by_content_whatever_the_name(tmp_path, bpe, name, pack):
    texts = docs()[:7]
    src = tmp_path / name
    src.write_bytes(pack(body(texts).encode()))
    code, _, err = convert(src, tmp_path / "out", "--tokenizer", bpe)
    assert code == 0, err
    assert decoded(tmp_path / "out") == texts


def test_a_gzipped_text_file_is_one_document(tmp_path, bpe):
    src = tmp_path / "doc.txt.gz"
    src.write_bytes(gzip.compress(docs()[3].encode()))
    assert convert(src, tmp_path / "out", "--tokenizer", bpe)[0] == 0
    assert decoded(tmp_path / "out") == [docs()[3]]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32"])
def test_utf16_and_utf32_json_lines_with_or_without_a_bom(tmp_path, bpe, encoding):
    """`utf-16`/`utf-32` write a byte-order mark; `-le`/`-be` none (read by their NUL bytes)."""
    texts = [*docs()[:4], "naïve café, 東京"]
    src = tmp_path / "c.jsonl"
    src.write_bytes(body(texts).encode(encoding))
    code, _, err = convert(src, tmp_path / "out", "--tokenizer", bpe)
    assert code == 0, err
    assert decoded(tmp_path / "out") == texts


def test_utf16_text_read_by_line(tmp_path, bpe):
    src = tmp_path / "lines.txt"
    src.write_bytes("first line\r\nsecond line\nthird\n".encode("utf-16"))
    assert convert(src, tmp_path / "out", "--tokenizer", bpe, "--lines")[0] == 0
    assert decoded(tmp_path / "out") == ["first line", "second line", "third"]


def test_cr_only_line_ends_split_lines_as_universal_newlines_do(tmp_path, bpe):
    cr = tmp_path / "mac" / "old.txt"
    cr.parent.mkdir()
    cr.write_bytes(b"one\rtwo\rthree\r")
    assert convert(cr, tmp_path / "a", "--tokenizer", bpe, "--lines")[0] == 0
    assert decoded(tmp_path / "a") == ["one", "two", "three"]
    mixed = tmp_path / "mixed.txt"
    mixed.write_bytes(b"one\r\ntwo\rthree\nfour")
    assert convert(mixed, tmp_path / "b", "--tokenizer", bpe, "--lines")[0] == 0
    assert decoded(tmp_path / "b") == ["one", "two", "three", "four"]
    assert decoded(tmp_path / "b") == mixed.read_text().splitlines()  # Python's own reading
    jsonl = tmp_path / "cr.jsonl"
    jsonl.write_bytes(body(["a", "b"]).replace("\n", "\r").encode())
    assert convert(jsonl, tmp_path / "c", "--tokenizer", bpe)[0] == 0
    assert decoded(tmp_path / "c") == ["a", "b"]


def test_a_json_key_given_twice_is_refused_by_line(tmp_path, bpe):
    src = tmp_path / "c.jsonl"
    src.write_text(body(["fine"]) + '{"text": "first", "text": "second"}\n')
    err = refused(src, tmp_path / "out", "--tokenizer", bpe)
    assert f"{src}: line 2: expected each key once in a JSON object. Received: key(s) ['text']" in err
    nested = tmp_path / "nested.jsonl"  # a key twice in a field tfpipe does not read: no matter
    nested.write_text('{"text": "kept", "meta": {"a": 1, "a": 2}}\n')
    assert convert(nested, tmp_path / "b", "--tokenizer", bpe)[0] == 0


def test_one_file_under_two_names_is_refused(tmp_path, bpe):
    src = tmp_path / "corpus"
    src.mkdir()
    (src / "a.jsonl").write_text(body(docs()[:3]))
    (src / "b.jsonl").symlink_to("a.jsonl")
    err = refused(src, tmp_path / "out", "--tokenizer", bpe)
    assert f"{src / 'b.jsonl'}: the same file as {src / 'a.jsonl'} (a symbolic link to it)" in err


def test_hive_partitioned_parquet_text_is_offered_a_glob_that_works(tmp_path, bpe):
    src = tmp_path / "hive"
    for lang, texts in (("en", docs()[:3]), ("fr", docs()[3:5])):
        (src / f"lang={lang}").mkdir(parents=True)
        pq.write_table(pa.table({"text": texts}), src / f"lang={lang}" / "part-0.parquet")
    err = refused(src, tmp_path / "a", "--tokenizer", bpe)
    pattern = f"{src}/*/*.parquet"
    assert f"Pass a glob that names their 2 files: '{pattern}'." in err
    assert "key=value pairs are not read into the records" in err
    assert convert(pattern, tmp_path / "b", "--tokenizer", bpe)[0] == 0
    assert decoded(tmp_path / "b") == docs()[:5]


@pytest.mark.parametrize(
    "name,pack", [("c.txt.bz2", bz2.compress), ("c.txt", lzma.compress), ("c.txt.zip", _zip)]
)
def test_compressed_text_read_by_line_by_content_whatever_the_name(tmp_path, bpe, name, pack):
    """--lines reads each line of compressed text as a document, as it does plain text."""
    texts = [" ".join(d.split()) for d in docs()[:6]]
    src = tmp_path / name
    src.write_bytes(pack("\n".join(texts).encode()))
    assert convert(src, tmp_path / "out", "--tokenizer", bpe, "--lines")[0] == 0
    assert decoded(tmp_path / "out") == texts

"""Tokenizers at convert time: trained deterministically (the same documents give the same
file, for every kind), their special ids by role, what their round trip may change, and the
one-line error when the text extra is missing."""

import json
import textwrap

import pytest

from tfpipe.errors import DataError
from tfpipe.modalities.text.convert import tokenizers, tokenizertrain

from support.text_data import docs, trained
from support.without import run_without


@pytest.mark.parametrize("kind", ["sentencepiece", "sentencepiece-bpe", "bpe", "wordpiece"])
def test_training_is_deterministic(kind):
    again = tokenizertrain.train(kind, 600, tokenizertrain.documents_of(docs()))
    assert again.data == trained(kind).data and again.fingerprint == trained(kind).fingerprint
    tok = tokenizers.load(again)
    assert tok.vocab_size == 600
    ids = tok.encode(docs()[:50])
    assert all(0 <= i < 600 for t in ids for i in t)
    # On the text it was trained on, every round trip is faithful after its normalisation.
    assert [tok.canonical(tok.decode(t)) for t in ids] == [tok.canonical(d) for d in docs()[:50]]


def test_what_each_round_trip_may_change():
    spm, bpe, wordpiece = (tokenizers.load(trained(k)) for k in ("sentencepiece", "bpe", "wordpiece"))
    text = "\uff26\uff55\uff4c\uff4c width,   two  spaces\nand a new line. 日本 😀"  # "Full", fullwidth
    assert spm.canonical(text) == "Full width, two spaces and a new line. 日本 😀"  # NFKC, spaces
    assert spm.canonical(spm.decode(spm.encode([text])[0])) == spm.canonical(text)  # byte fallback
    assert bpe.decode(bpe.encode([text])[0]) == text and bpe.canonical(text) == text  # lossless
    assert wordpiece.canonical("a  b\nc") == "abc"  # words split on whitespace
    assert wordpiece.decode(wordpiece.encode(["日本"])[0]) == "[UNK] [UNK]"
    assert "NFKC" in spm.normalization and bpe.normalization == "none"
    assert (
        wordpiece.normalization
        == "the tokenizer's normalizer (BertNormalizer); whitespace not kept (words are split on it)"
    )


def test_special_ids_by_role_from_a_post_processor_and_by_name():
    tk = pytest.importorskip("tokenizers")
    tok = tk.Tokenizer(tk.models.WordLevel({"<unk>": 0, "<s>": 1, "</s>": 2, "hi": 3}, unk_token="<unk>"))
    tok.add_special_tokens(["<unk>", "<s>", "</s>"])
    tok.post_processor = tk.processors.RobertaProcessing(("</s>", 2), ("<s>", 1))
    loaded = tokenizers.load(tokenizers.TokenizerFile("huggingface", tok.to_str().encode()))
    assert loaded.special_ids == {"unk": 0, "bos": 1, "eos": 2, "cls": 1, "sep": 2}
    assert loaded.specials == {1, 2}  # <unk> is unknown text, not a special spelled in it
    spec = json.loads(trained("wordpiece").data)
    assert [t["content"] for t in spec["added_tokens"]] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def test_a_stored_tokenizer_that_changed_is_refused(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_bytes(trained("bpe").data)
    assert tokenizers.load_stored(str(path), trained("bpe").fingerprint).vocab_size == 600
    with pytest.raises(DataError, match="expected the tokenizer the dataset was converted with"):
        tokenizers.load_stored(str(path), "sha256:" + "0" * 64)


def test_read_file_knows_the_kind_by_content(tmp_path):
    for kind, name in (("sentencepiece", "odd-name.bin"), ("bpe", "vocab.txt")):
        path = tmp_path / name
        path.write_bytes(trained(kind).data)
        assert tokenizers.read_file(str(path)).kind == (
            "sentencepiece" if kind == "sentencepiece" else "huggingface"
        )


@pytest.mark.slow
def test_without_the_text_extra_convert_says_how_to_install_it(tmp_path):
    (tmp_path / "c.jsonl").write_text('{"text": "hello"}\n')
    (tmp_path / "spm.model").write_bytes(trained("sentencepiece").data)
    code = f"""
        import tfpipe.cli
        raise SystemExit(tfpipe.cli.main(["convert", {str(tmp_path / "c.jsonl")!r}, {str(tmp_path / "out")!r},
                                          "--tokenizer", {str(tmp_path / "spm.model")!r}, "--quiet"]))
    """
    done = run_without("sentencepiece", textwrap.dedent(code), tmp_path)
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("tfpipe convert: error: Text conversion needs the sentencepiece package")
    assert line.endswith('Install the extra: pip install "tfpipe[text]"')
    assert not (tmp_path / "out" / "tfpipe.json").exists()

"""What a tokenizer may not do in silence at convert time, through the real CLI: drop a
document's whole text, take a vocabulary size below its alphabet, number its tokens beyond its
vocabulary; and a corpus with no text at all. A vocabulary size beyond what the corpus gives
trains the most it gives, with a note, for every trainer."""

import functools
import json

import pytest

from tfpipe.modalities.text.convert import tokenizers, tokenizertrain

from support.records import nothing_written, records
from support.text_data import convert, docs, token_lists, tokenizer_path


def write(path, texts):
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    return path


@functools.lru_cache(maxsize=1)
def bpe_without_unk():
    """A plain (not byte-level) BPE trained on English, with no unknown token: a character it
    never saw encodes to nothing, as `tokenizers`' BPE() does by default."""
    tk = pytest.importorskip("tokenizers")
    tok = tk.Tokenizer(tk.models.BPE())
    tok.pre_tokenizer = tk.pre_tokenizers.Whitespace()
    tok.train_from_iterator(docs(), tk.trainers.BpeTrainer(vocab_size=300, show_progress=False))
    return tok.to_str().encode()


def test_a_document_the_tokenizer_drops_whole_is_counted_as_lost_text(tmp_path):
    tok = tmp_path / "tokenizer.json"
    tok.write_bytes(bpe_without_unk())
    src = write(tmp_path / "c.jsonl", [docs()[0], "\u2603\u2603\u2603", "", docs()[1]])
    code, out, err = convert(src, tmp_path / "out", "--tokenizer", tok)
    assert code == 0, err
    recs, m = records(tmp_path / "out")
    text = m.split("train").text
    assert (text.documents, text.empty_documents, len(recs)) == (2, 2, 2)
    (trip,) = [n for n in m.split("train").notes if n.startswith("ROUND TRIP")]
    assert trip.startswith("ROUND TRIP: 1 document(s) decode to other text than they hold")
    assert f"the first: {src}: line 2, character 0 after normalisation" in trip
    assert "(1 it made nothing of are left out)" in trip
    assert "2 empty document(s) left out (they tokenize to nothing; 1 of them held text" in out


def test_a_corpus_the_tokenizer_drops_whole_is_not_committed(tmp_path):
    tok = tmp_path / "tokenizer.json"
    tok.write_bytes(bpe_without_unk())
    src = write(tmp_path / "c.jsonl", ["\u2603\u2603", "\u2603"])
    code, _, err = convert(src, tmp_path / "out", "--tokenizer", tok)
    assert code == 1 and not (tmp_path / "out" / "tfpipe.json").exists()
    assert (
        f"{src}: expected documents that tokenize to something. Received: every one of the 2 left out" in err
    )
    assert "ROUND TRIP: 2 document(s)" in err


@pytest.mark.parametrize("texts", [["", "  ", "\n"], ["\t"]])
def test_a_corpus_of_only_empty_documents_is_refused(tmp_path, texts):
    src = write(tmp_path / "c.jsonl", texts)
    code, _, err = convert(src, tmp_path / "out", "--tokenizer", tokenizer_path(tmp_path))
    assert code == 1 and nothing_written(tmp_path / "out")
    assert f"{src}: expected documents with text. Received: {len(texts)} document(s) in 1 file(s), " in err
    assert "every one empty or whitespace only" in err
    assert "another field or column than 'text' (--text-field)" in err


def test_wordpiece_refuses_a_vocabulary_below_its_alphabet(tmp_path):
    src = write(tmp_path / "c.jsonl", docs()[:60])
    code, _, err = convert(src, tmp_path / "out", "--train-tokenizer", "wordpiece", "--vocab-size", "10")
    assert code == 1 and nothing_written(tmp_path / "out")
    assert "vocab_size (--vocab-size) must be at least " in err and "for a WordPiece on this corpus" in err
    least = int(err.split("must be at least ")[1].split(" ")[0].replace(",", ""))
    assert convert(src, tmp_path / "ok", "--train-tokenizer", "wordpiece", "--vocab-size", least)[0] == 0
    code, _, err = convert(src, tmp_path / "b", "--train-tokenizer", "wordpiece", "--vocab-size", least - 1)
    assert code == 1 and f"must be at least {least:,} " in err


@pytest.mark.parametrize("kind", ["sentencepiece", "bpe"])
def test_a_vocabulary_beyond_the_corpus_gives_the_most_it_gives_with_a_note(tmp_path, kind):
    """README's `--vocab-size 32000` on a small corpus: SentencePiece used to refuse it."""
    src = write(tmp_path / "c.jsonl", docs()[:60])
    code, out, err = convert(src, tmp_path / "out", "--train-tokenizer", kind, "--vocab-size", "32000")
    assert code == 0, err
    m = records(tmp_path / "out")[1]
    size = m.tokenizer.vocab_size
    assert 600 < size < 32000
    note = (
        f"the trained {kind} tokenizer has {size:,} ids, not the 32,000 asked for (--vocab-size): "
        f"{size:,} is the most this corpus gives"
    )
    assert note in out and any(note in n for n in m.split("train").notes)
    if kind == "sentencepiece":  # the model --vocab-size of that bound trains
        again = tokenizertrain.train(kind, size, tokenizertrain.documents_of(docs()[:60]))
        assert again.fingerprint == m.tokenizer.fingerprint


def test_sentencepiece_below_its_alphabet_names_the_least(tmp_path):
    src = write(tmp_path / "c.jsonl", docs()[:60])
    code, _, err = convert(src, tmp_path / "out", "--train-tokenizer", "sentencepiece", "--vocab-size", "10")
    assert code == 1 and "(at least " in err and "for this corpus: its characters and special pieces)" in err


@pytest.mark.parametrize("far", [3_000_000_000, 50])
def test_a_tokenizer_whose_ids_exceed_its_vocabulary_is_refused(tmp_path, far):
    tk = pytest.importorskip("tokenizers")
    tok = tk.Tokenizer(tk.models.WordLevel({"a": 0, "b": 1, "[UNK]": 2}, unk_token="[UNK]"))
    tok.pre_tokenizer = tk.pre_tokenizers.Whitespace()
    spec = json.loads(tok.to_str())  # `tokenizers` itself takes ~45 s to write an id of 3e9
    spec["model"]["vocab"]["[UNK]"] = far
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec))
    src = write(tmp_path / "c.jsonl", ["a b c", "b a"])
    code, _, err = convert(src, tmp_path / "out", "--tokenizer", path)
    assert code == 1 and nothing_written(tmp_path / "out")
    assert f"{path}: expected token ids 0..2 (its vocabulary holds 3 tokens). Received: id(s) [{far}]" in err
    assert "the first missing id 2" in err


def test_the_tokens_of_a_dataset_are_its_tokenizers(tmp_path):
    """The refusals above leave the ordinary case alone: the ids are the tokenizer's."""
    src = write(tmp_path / "c.jsonl", docs()[:5])
    path = tokenizer_path(tmp_path)
    assert convert(src, tmp_path / "out", "--tokenizer", path)[0] == 0
    tok = tokenizers.load(tokenizers.read_file(str(path)))
    assert token_lists(records(tmp_path / "out")[0]) == tok.encode(docs()[:5])

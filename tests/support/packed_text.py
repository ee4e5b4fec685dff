"""Text datasets for the text pipeline tests (tests/presets/test_text*.py,
tests/modalities/text/test_packer.py), made once a session by the real `tfpipe convert` from real
English: the first N_DOCS documents of `tfpipe.synthetic.text` (the standard library's
docstrings), as a JSON Lines corpus in 3 files. Fixtures registered by tests/conftest.py."""

from __future__ import annotations

import io
import os

import pytest

import tfpipe
from tfpipe.format.manifest import Manifest
from tfpipe.modalities.text.convert import tokenizers
from tfpipe.synthetic import text as corpus

N_DOCS = 701  # odd, so chunks, shards and batches are uneven


def stored_tokenizer(root: str) -> tokenizers.Tokenizer:
    """The tokenizer a converted dataset carries."""
    info = Manifest.load(root).tokenizer
    return tokenizers.load_stored(os.path.join(root, info.file), info.fingerprint)


def convert(tmp, docs, dest_name, *, labels=None, **options) -> str:
    """`docs` written as a JSON Lines corpus and converted into 3 shards; the dataset's path.
    Skips the test where the text extra (sentencepiece, tokenizers) is not installed."""
    pytest.importorskip("tokenizers", reason='the text extra: pip install "tfpipe[text]"')
    pytest.importorskip("sentencepiece", reason='the text extra: pip install "tfpipe[text]"')
    src = tmp / f"{dest_name}-corpus"
    corpus.write_corpus(src, docs, "jsonl", files=3, labels=labels)
    dest = str(tmp / dest_name)
    tfpipe.convert(str(src), dest, num_shards=3, workers=1, **options)
    return dest


@pytest.fixture(scope="session")
def text_ds(tmp_path_factory) -> str:
    """The corpus tokenized by a byte-level BPE trained on it (vocabulary 4000, with `</s>`)."""
    docs = corpus.documents(N_DOCS)
    return convert(tmp_path_factory.mktemp("text"), docs, "bpe", train_tokenizer="bpe", vocab_size=4000)


@pytest.fixture(scope="session")
def text_corpus(text_ds):
    """(documents, the dataset's tokenizer, each document's token ids as converted)."""
    docs = corpus.documents(N_DOCS)
    tok = stored_tokenizer(text_ds)
    return docs, tok, tok.encode(docs)


@pytest.fixture(scope="session")
def labeled_text_ds(tmp_path_factory) -> str:
    """The corpus with a label per document (its index mod 3), tokenized by a WordPiece (it
    has [CLS] and [SEP], as BERT's)."""
    docs = corpus.documents(N_DOCS)
    labels = [i % 3 for i in range(len(docs))]
    return convert(
        tmp_path_factory.mktemp("labeled"),
        docs,
        "wordpiece",
        labels=labels,
        label="label",
        train_tokenizer="wordpiece",
        vocab_size=2000,
    )


@pytest.fixture(scope="session")
def spm_text(tmp_path_factory):
    """(root, tokenizer, ids): the corpus through a SentencePiece model trained here on part of
    it with character coverage under 1, so rare characters become `<unk>`, id 0."""
    spm = pytest.importorskip("sentencepiece", reason='the text extra: pip install "tfpipe[text]"')
    tmp = tmp_path_factory.mktemp("spm")
    docs = corpus.documents(N_DOCS)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(docs[:300]),
        model_writer=model,
        vocab_size=1000,
        character_coverage=0.98,
        max_sentence_length=1 << 16,
        minloglevel=2,
    )
    path = tmp / "spm.model"
    path.write_bytes(model.getvalue())
    root = convert(tmp, docs, "spm", tokenizer=str(path))
    tok = stored_tokenizer(root)
    return root, tok, tok.encode(docs)

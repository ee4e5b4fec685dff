"""Text corpora and tokenizers for the text conversion tests: real English (the standard
library's docstrings), tokenizers trained once per session, and the CLI run in this process."""

import functools
import os

import pytest

from tfpipe.modalities.text.convert import tokenizertrain
from tfpipe.synthetic import text

from support.cli import cli_here as cli

pytest.importorskip("sentencepiece", reason='the text extra: pip install "tfpipe[text]"')
pytest.importorskip("tokenizers", reason='the text extra: pip install "tfpipe[text]"')

N_DOCS = 241  # odd, so shards and pieces are uneven


@functools.lru_cache(maxsize=1)
def docs():
    """Real English documents: the first N_DOCS of the standard library's docstrings."""
    return text.documents(N_DOCS)


@functools.lru_cache(maxsize=8)
def trained(kind, vocab_size=600):
    """A tokenizer file trained on `docs()` (once per session and kind)."""
    return tokenizertrain.train(kind, vocab_size, tokenizertrain.documents_of(docs()))


def tokenizer_path(folder, kind="bpe", vocab_size=600):
    """`trained(kind)` written to a file in `folder`; its path."""
    file = trained(kind, vocab_size)
    path = os.path.join(str(folder), f"{kind}-{vocab_size}-{file.name}")
    with open(path, "wb") as f:
        f.write(file.data)
    return path


def convert(src, dest, *args):
    """`tfpipe convert SRC DEST ARGS --quiet` in this process: (exit code, stdout, stderr)."""
    return cli("convert", src, dest, *args, "--quiet")


def token_lists(recs):
    return [r["tokens"] for r in recs]

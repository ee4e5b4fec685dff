"""What bench reads of text: the default corpus (the real English that ships with Python, the
standard library's docstrings, tokenized by a BPE trained on them: nothing is downloaded), raw
corpora named for what they are with the command that tokenizes them at convert time, and why
records without a manifest cannot be benched (the fill is predicted from its length histogram)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tfpipe.format.manifest import MANIFEST_NAME
from tfpipe.modalities.modality import Synthetic
from tfpipe.modalities.text.convert.reader import kind_of
from tfpipe.synthetic import text

# The text default's tokenizer, trained on its documents at the first run: a byte-level BPE
# (every byte kept, so any text round-trips) of 8,000 ids, as small models use.
TEXT_TOKENIZER, TEXT_VOCAB = "bpe", 8000
# How a raw text corpus becomes a dataset: tokenized once, at convert time, not every epoch.
TOKENIZE = "tfpipe convert CORPUS DEST --tokenizer PATH (or --train-tokenizer bpe --vocab-size 32000)"


def generate(spec: Any, raw: str) -> str:
    """`spec.examples` documents of this CPython's docstrings, as JSON Lines files in `raw`."""
    docs = text.documents(spec.examples)
    text.write_corpus(raw, docs, "jsonl", files=min(spec.shards, len(docs)))
    return raw


def key() -> dict[str, str]:
    """What shapes the text default's bytes besides the spec: this CPython's standard library
    (its docstrings are the documents) and the tokenizer library that trains on them."""
    import platform
    from importlib import metadata

    try:
        tokenizers = metadata.version("tokenizers")
    except metadata.PackageNotFoundError:
        tokenizers = "missing"
    return {
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "tokenizer": f"{TEXT_TOKENIZER} {TEXT_VOCAB} tokenizers {tokenizers}",
    }


# Documents (CPython 3.11's standard library has ~6,500; reading them takes ~10 s, the
# tokenizer's training and the conversion ~12 s, on 2 cores).
SYNTHETIC = Synthetic(
    examples=6000,
    shards=8,
    generate=generate,
    describe=lambda spec: (
        "Reading",
        "documents of real English (this Python's docstrings), to tokenize with a BPE trained on them",
    ),
    convert_options={"train_tokenizer": TEXT_TOKENIZER, "vocab_size": TEXT_VOCAB},
    key=key,
)

_CORPUS_WORDS = {"jsonl": "JSON Lines", "txt": "plain text", "parquet": "Parquet"}


def _corpus_kinds(asked: bool) -> tuple[str, ...]:
    """The corpus kinds a raw file is named as: JSON Lines always; plain .txt files and Parquet
    only when the text pipeline is asked for (a .txt beside other data is a note, a Parquet file
    otherwise a table)."""
    return ("jsonl", "txt", "parquet") if asked else ("jsonl",)


def raw(path: str, names: Sequence[str] | None, asked: bool) -> str | None:
    """ "a text corpus file (JSON Lines)", "a folder of text corpus files"; None otherwise."""
    corpus = _corpus_kinds(asked)
    if names is None:
        kind = kind_of(path)
        return f"a text corpus file ({_CORPUS_WORDS[kind]})" if kind in corpus else None
    return "a folder of text corpus files" if any(kind_of(n) in corpus for n in names) else None


def without_manifest(raw_path: str, what: str) -> str:
    return (
        f"{raw_path} {what} without a {MANIFEST_NAME} manifest, and the text pipeline's bench "
        "predicts the fill from the length histogram and tokenizer one holds: pass a tfpipe "
        f"text dataset directory, or convert the corpus with `{TOKENIZE}`."
    )


FOLDER_ADVICE = f"pass a tfpipe text dataset directory, or convert the corpus with `{TOKENIZE}`."


def convert_advice(raw_path: str, what: str) -> str:
    return (
        f"{raw_path} is {what}, not a tfpipe dataset: tokenize it once, at convert time, with "
        f"`{TOKENIZE.replace('CORPUS', raw_path)}`, then `tfpipe bench --data DEST`. The pipeline "
        "then reads token ids; tokenizing in it would cost CPU every epoch."
    )

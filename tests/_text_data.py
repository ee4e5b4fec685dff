"""Real English text and tokenized text datasets for the text tests and benchmarks.

Text: the docstrings of the standard library (read with `ast`, nothing imported) and
`pydoc_data.topics`, which every CPython has. Tokenizers are trained on it here: a Hugging Face
byte-level BPE, or a SentencePiece model (whose `<unk>` is id 0, so the text has real 0 ids).

Until `tfpipe convert` takes text (issue 23 part 1), `write_dataset` writes the records and the
manifest of the contract in tfpipe/manifest.py through tfpipe's own ShardWriter: one
`tf.train.Example` per document, `tokens` an int64 list, an optional int64 `label`.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import io
import os
import sysconfig
from collections.abc import Sequence

import numpy as np

import tfpipe.cli
from tfpipe.convert import tokenizers
from tfpipe.convert.writer import ShardWriter
from tfpipe.manifest import Manifest, Split, SplitText, TokenizerInfo
from tfpipe.schema import Field, Schema
from tfpipe.shardnames import shard_name
from tfpipe.synthetic import text

# Stdlib packages and modules the tests read (a few seconds for all of the stdlib; these ~0.5 s).
SMALL = ("json", "email", "collections", "http", "textwrap.py", "argparse.py", "string.py", "calendar.py")
# Bins of width 1 up to here, then 128 bins per power of two (the manifest's histogram).
FINE_UP_TO = 16_384


def stdlib_documents(only: Sequence[str] | None = None, topics: bool = True) -> list[str]:
    """Docstrings of the stdlib's modules, classes and functions (tests excluded), in path
    order, then pydoc's topics in name order. `only`: names under the stdlib to read."""
    root = sysconfig.get_paths()["stdlib"]
    paths = []
    for top in sorted(only) if only else [""]:
        start = os.path.join(root, top)
        if os.path.isfile(start):
            paths.append(start)
            continue
        for d, dirs, files in os.walk(start):
            dirs[:] = sorted(
                x for x in dirs if x not in ("site-packages", "test", "tests", "idle_test", "__pycache__")
            )
            paths += [os.path.join(d, f) for f in sorted(files) if f.endswith(".py")]
    docs = []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                text = ast.get_docstring(node)
                if text and text.strip():
                    docs.append(text)
    if topics:
        from pydoc_data.topics import topics as pydoc_topics

        docs += [pydoc_topics[k] for k in sorted(pydoc_topics)]
    return docs


SPECIALS = ("<pad>", "<eos>", "[CLS]", "[SEP]", "[MASK]")


def train_bpe(docs: Sequence[str], vocab_size: int = 8000):
    """A byte-level BPE trained on `docs`, with SPECIALS as ids 0..4."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=list(SPECIALS),
        show_progress=False,
    )
    tok.train_from_iterator(docs, trainer)
    return tok


def bpe_info(tok, root: str) -> TokenizerInfo:
    """Saves `tok` as root/tokenizer.json and describes it as the manifest does."""
    path = os.path.join(root, "tokenizer.json")
    tok.save(path)
    roles = {"pad": "<pad>", "eos": "<eos>", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"}
    return TokenizerInfo(
        kind="huggingface",
        file="tokenizer.json",
        fingerprint="sha256:" + hashlib.sha256(open(path, "rb").read()).hexdigest(),
        vocab_size=tok.get_vocab_size(),
        special_ids={role: tok.token_to_id(t) for role, t in roles.items()},
        normalization="none (byte-level BPE)",
    )


def train_sentencepiece(docs: Sequence[str], root: str, vocab_size: int = 2000):
    """A SentencePiece unigram model (`<unk>` 0, `<s>` 1, `</s>` 2) at root/spm.model, with
    character coverage under 1, so rare characters become `<unk>` (id 0)."""
    import io

    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(docs),
        model_writer=model,
        vocab_size=vocab_size,
        character_coverage=0.98,
        max_sentence_length=1 << 16,
        minloglevel=2,
    )
    path = os.path.join(root, "spm.model")
    with open(path, "wb") as f:
        f.write(model.getvalue())
    proc = spm.SentencePieceProcessor(model_file=path)
    info = TokenizerInfo(
        kind="sentencepiece",
        file="spm.model",
        fingerprint="sha256:" + hashlib.sha256(model.getvalue()).hexdigest(),
        vocab_size=proc.get_piece_size(),
        special_ids={"unk": proc.unk_id(), "bos": proc.bos_id(), "eos": proc.eos_id()},
        normalization="NFKC, whitespace collapsed",
    )
    return proc, info


def histogram(lengths: Sequence[int]) -> dict[str, list[int]]:
    """The manifest's length histogram: width-1 bins up to FINE_UP_TO tokens, then bins 1/128
    of a power of two wide; only non-empty bins."""
    lengths = np.asarray(lengths, np.int64)
    lows = lengths.copy()
    big = lengths >= FINE_UP_TO
    if big.any():
        width = 2 ** np.floor(np.log2(lengths[big])).astype(np.int64) // 128
        lows[big] = lengths[big] // width * width
    bins, inverse = np.unique(lows, return_inverse=True)
    return {
        "lengths": bins.tolist(),
        "counts": np.bincount(inverse).tolist(),
        "tokens": np.bincount(inverse, weights=lengths).astype(np.int64).tolist(),
    }


def example(tokens: Sequence[int], label: int | None = None) -> bytes:
    """One document as `tf.train.Example` bytes (protobuf's own encoder)."""
    from tensorflow.core.example import example_pb2, feature_pb2

    feature = {"tokens": feature_pb2.Feature(int64_list=feature_pb2.Int64List(value=list(tokens)))}
    if label is not None:
        feature["label"] = feature_pb2.Feature(int64_list=feature_pb2.Int64List(value=[label]))
    return example_pb2.Example(features=feature_pb2.Features(feature=feature)).SerializeToString()


def write_dataset(
    root: str,
    docs: Sequence[Sequence[int]],
    tokenizer: TokenizerInfo,
    *,
    shards: int = 3,
    labels: Sequence[int] | None = None,
    split: str = "train",
    manifest: Manifest | None = None,
) -> Manifest:
    """Writes `docs` (token ids, in order) as `shards` shards of a text split and its manifest
    (added to `manifest`'s splits when given)."""
    os.makedirs(root, exist_ok=True)
    bounds = np.linspace(0, len(docs), shards + 1).astype(int)
    infos = []
    for i in range(shards):
        writer = ShardWriter(root, shard_name(split, i, shards))
        for j in range(bounds[i], bounds[i + 1]):
            writer.write(example(docs[j], None if labels is None else int(labels[j])))
        infos.append(writer.commit().info)
    lengths = [len(d) for d in docs]
    text = SplitText(documents=len(docs), tokens=int(sum(lengths)), length_histogram=histogram(lengths))
    fields = (Field("tokens", "int64"),) + ((Field("label", "int64"),) if labels is not None else ())
    schema = Schema(fields, label="label" if labels is not None else None)
    splits = dict(manifest.splits) if manifest is not None else {}
    splits[split] = Split(shards=tuple(infos), source="stdlib docstrings", text=text)
    out = Manifest(root=root, layout="text", schema=schema, splits=splits, tokenizer=tokenizer)
    out.save()
    return out


# Fixtures (registered by tests/conftest.py), each made once a session.
import pytest  # noqa: E402


@pytest.fixture(scope="session")
def text_corpus():
    """(documents, a BPE trained on them, their token ids): ~700 stdlib docstrings and pydoc topics."""
    docs = stdlib_documents(SMALL)
    tok = train_bpe(docs, 4000)
    return docs, tok, [e.ids for e in tok.encode_batch(docs)]


@pytest.fixture(scope="session")
def text_ds(text_corpus, tmp_path_factory) -> str:
    """The corpus as a text dataset: a train split in 3 shards, BPE token ids."""
    root = str(tmp_path_factory.mktemp("text"))
    _, tok, ids = text_corpus
    write_dataset(root, ids, bpe_info(tok, root), shards=3)
    return root


@pytest.fixture(scope="session")
def labeled_text_ds(text_corpus, tmp_path_factory) -> str:
    """The corpus with a label per document (its index mod 3), for classification."""
    root = str(tmp_path_factory.mktemp("labeled_text"))
    _, tok, ids = text_corpus
    write_dataset(root, ids, bpe_info(tok, root), shards=3, labels=[i % 3 for i in range(len(ids))])
    return root


@pytest.fixture(scope="session")
def spm_text(text_corpus, tmp_path_factory):
    """(root, processor, documents, ids): the corpus through a SentencePiece model whose
    `<unk>` is id 0, which the rare characters of the text become."""
    root = str(tmp_path_factory.mktemp("spm_text"))
    docs = text_corpus[0]
    proc, info = train_sentencepiece(docs, root)
    ids = proc.encode(docs)
    write_dataset(root, ids, info, shards=2)
    return root, proc, docs, ids


# ---- h-textconv's helpers (main's tests/_text_data.py; h-textpack added its own file of this name: joined here) ----

N_DOCS = 241  # odd, so shards and pieces are uneven


@functools.lru_cache(maxsize=1)
def docs():
    """Real English documents: the first N_DOCS of the standard library's docstrings."""
    return text.documents(N_DOCS)


@functools.lru_cache(maxsize=8)
def trained(kind, vocab_size=600):
    """A tokenizer file trained on `docs()` (once per session and kind)."""
    return tokenizers.train(kind, vocab_size, tokenizers.documents_of(docs()))


def tokenizer_path(folder, kind="bpe", vocab_size=600):
    """`trained(kind)` written to a file in `folder`; its path."""
    file = trained(kind, vocab_size)
    path = os.path.join(str(folder), f"{kind}-{vocab_size}-{file.name}")
    with open(path, "wb") as f:
        f.write(file.data)
    return path


def cli(*args):
    """`tfpipe ARGS` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = tfpipe.cli.main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


def convert(src, dest, *args):
    """`tfpipe convert SRC DEST ARGS --quiet` in this process: (exit code, stdout, stderr)."""
    return cli("convert", src, dest, *args, "--quiet")


def token_lists(recs):
    return [r["tokens"] for r in recs]

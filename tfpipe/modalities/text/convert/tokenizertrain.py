"""Training a tokenizer on a corpus, deterministically: the same documents and options give
the same bytes. SentencePiece (unigram or BPE, with byte fallback), a byte-level BPE as GPT-2
and RoBERTa use, or BERT's WordPiece; `tokenizers.load` loads what `train` makes.

`sentencepiece` and `tokenizers` are the `text` extra, imported only on use.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterable, Iterator

from tfpipe.errors import ConfigError
from tfpipe.modalities.text.convert.tokenizers import TokenizerFile, require

SPM_TRAIN_THREADS = 4
"""Threads SentencePiece trains with, fixed: its result depends on the thread count (measured:
2 threads twice gave the same model, 1 thread another), so a fixed count makes the model a
function of the documents and options alone, on any machine."""


def train(kind: str, vocab_size: int, documents: Callable[[], Iterator[str]]) -> TokenizerFile:
    """Trains a tokenizer on the documents, deterministically.

    Args:
      kind: "sentencepiece" (unigram) or "sentencepiece-bpe" (SentencePiece, with byte
        fallback, so no character is unknown); "bpe" (byte-level BPE, `tokenizers`; lossless);
        "wordpiece" (BERT's WordPiece, cased, `tokenizers`).
      documents: makes a fresh iterator over the training documents (read once or twice).

    `vocab_size` is the most ids the tokenizer gets: a corpus that gives fewer (a byte-level
    BPE out of merges, SentencePiece beyond the pieces it finds) gives the most it can, and
    the caller says so (`text.open_text`'s note).

    Raises:
      ConfigError: `vocab_size` is too small for the tokenizer's alphabet on this corpus,
        naming the least it takes where the trainer says.
    """
    if kind.startswith("sentencepiece"):
        return _train_sentencepiece(
            "bpe" if kind == "sentencepiece-bpe" else "unigram", vocab_size, documents
        )
    if kind == "bpe":
        return _train_byte_bpe(vocab_size, documents)
    return _train_wordpiece(vocab_size, documents)


def _train_sentencepiece(
    model_type: str, vocab_size: int, documents: Callable[[], Iterator[str]]
) -> TokenizerFile:
    try:
        return _spm_train(model_type, vocab_size, documents)
    except RuntimeError as e:
        most = re.search(r"Please set it to a value <= (\d+)", str(e))
        if most is None or int(most.group(1)) >= vocab_size:
            raise _vocab_error("sentencepiece", vocab_size, e) from None
    # More than this corpus gives: the most it gives, as a byte-level BPE stops where its
    # merges do (a note says so); the model is the one --vocab-size of that bound trains.
    try:
        return _spm_train(model_type, int(most.group(1)), documents)
    except RuntimeError as e:
        raise _vocab_error("sentencepiece", vocab_size, e) from None


def _spm_train(model_type: str, vocab_size: int, documents: Callable[[], Iterator[str]]) -> TokenizerFile:
    spm = require("sentencepiece")
    out = io.BytesIO()
    # SentencePiece trains on sentences: each non-empty line of each document.
    lines = (line for doc in documents() for line in doc.splitlines() if line.strip())
    spm.SentencePieceTrainer.train(
        sentence_iterator=lines,
        model_writer=out,
        model_type=model_type,
        vocab_size=vocab_size,
        byte_fallback=True,
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=3,
        control_symbols=["<cls>", "<sep>", "<mask>"],
        num_threads=SPM_TRAIN_THREADS,
        input_sentence_size=0,  # every sentence: a sample would be drawn at random
        shuffle_input_sentence=False,
        max_sentence_length=1 << 16,
        minloglevel=2,
    )
    return TokenizerFile("sentencepiece", out.getvalue())


def _vocab_error(kind: str, vocab_size: int, e: Exception) -> ConfigError:
    text = " ".join(str(e).split())
    least = re.search(r"smaller than required_chars\. \d+ vs (\d+)", text)
    hint = f" (at least {least.group(1)} for this corpus: its characters and special pieces)" if least else ""
    return ConfigError(
        f"vocab_size (--vocab-size) must suit the training corpus{hint}. Received: "
        f"vocab_size={vocab_size} for a {kind} tokenizer; its trainer says: {text[:300]}"
    )


_BPE_SPECIALS = ("<pad>", "<s>", "</s>", "<mask>")
_WORDPIECE_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def _train_byte_bpe(vocab_size: int, documents: Callable[[], Iterator[str]]) -> TokenizerFile:
    """Byte-level BPE as GPT-2 and RoBERTa use it: every byte is in the alphabet, so decode
    gives back the text exactly. <s> and </s> frame a sequence (RoBERTa's post-processor)."""
    tk = require("tokenizers")
    alphabet = tk.pre_tokenizers.ByteLevel.alphabet()
    if vocab_size < len(alphabet) + len(_BPE_SPECIALS):
        raise ConfigError(
            f"vocab_size (--vocab-size) must be at least {len(alphabet) + len(_BPE_SPECIALS)} for a "
            f"byte-level BPE (its 256 bytes and {len(_BPE_SPECIALS)} special tokens). Received: {vocab_size}"
        )
    tok = tk.Tokenizer(tk.models.BPE())
    tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tk.decoders.ByteLevel()
    trainer = tk.trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(_BPE_SPECIALS),
        initial_alphabet=alphabet,
        show_progress=False,
    )
    tok.train_from_iterator(documents(), trainer)
    tok.post_processor = tk.processors.RobertaProcessing(("</s>", 2), ("<s>", 1), add_prefix_space=False)
    return TokenizerFile("huggingface", tok.to_str().encode("utf-8"))


# WordPiece's continuation pieces ("##ing") are trained as their own characters: each character
# after a word's first is moved to the plane-15/16 private-use block (U+F0000 + code point), so
# a plain BPE learns word-initial and continuation pieces apart. `tokenizers`' own
# WordPieceTrainer does the same with a "##" prefix, but numbers those pieces in hash-map order,
# which changes the vocabulary from run to run (huggingface/tokenizers issue 1794).
_CONTINUATION = 0xF0000
_MAPPABLE = 0x10FFFE - _CONTINUATION  # code points up to here have a continuation twin


def _continuation_word(word: str) -> str | None:
    """`word` with every character after the first moved to its continuation twin; None for a
    word that cannot be (a character beyond U+1FFFD, or one already in the private-use planes)."""
    if any(ord(c) >= _MAPPABLE for c in word):
        return None
    return word[0] + "".join(chr(_CONTINUATION + ord(c)) for c in word[1:])


def _wordpiece_token(piece: str) -> str:
    """A trained piece back in WordPiece's spelling: a continuation piece gets the "##" prefix."""
    prefix = "##" if ord(piece[0]) >= _CONTINUATION else ""
    return prefix + "".join(chr(ord(c) - _CONTINUATION) if ord(c) >= _CONTINUATION else c for c in piece)


def _train_wordpiece(vocab_size: int, documents: Callable[[], Iterator[str]]) -> TokenizerFile:
    """BERT's cased WordPiece, trained deterministically (see _CONTINUATION)."""
    tk = require("tokenizers")
    normalizer = tk.normalizers.BertNormalizer(lowercase=False)
    pre = tk.pre_tokenizers.BertPreTokenizer()

    def words() -> Iterator[str]:
        for doc in documents():
            pieces = pre.pre_tokenize_str(normalizer.normalize_str(doc))
            mapped = (_continuation_word(w) for w, _ in pieces)
            yield " ".join(w for w in mapped if w)

    bpe = tk.Tokenizer(tk.models.BPE())
    bpe.pre_tokenizer = tk.pre_tokenizers.WhitespaceSplit()
    trainer = tk.trainers.BpeTrainer(
        vocab_size=max(vocab_size - len(_WORDPIECE_SPECIALS), 1), show_progress=False
    )
    bpe.train_from_iterator(words(), trainer)
    learned = sorted(bpe.get_vocab().items(), key=lambda kv: kv[1])
    vocab = {t: i for i, t in enumerate(_WORDPIECE_SPECIALS)}
    for piece, _ in learned:
        vocab.setdefault(_wordpiece_token(piece), len(vocab))
    tok = tk.Tokenizer(tk.models.WordPiece(vocab, unk_token="[UNK]", continuing_subword_prefix="##"))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    tok.decoder = tk.decoders.WordPiece(prefix="##")
    tok.add_special_tokens(list(_WORDPIECE_SPECIALS))
    tok.post_processor = tk.processors.BertProcessing(("[SEP]", 3), ("[CLS]", 2))
    if len(vocab) > vocab_size:  # the trainer keeps every character, whatever the size asked
        raise ConfigError(
            f"vocab_size (--vocab-size) must be at least {len(vocab):,} for a WordPiece on this corpus "
            f"(its {len(_WORDPIECE_SPECIALS)} special tokens and each character of the corpus, as a "
            f"word's start and as a continuation). Received: vocab_size={vocab_size}"
        )
    return TokenizerFile("huggingface", tok.to_str().encode("utf-8"))


def documents_of(texts: Iterable[str]) -> Callable[[], Iterator[str]]:
    """A `documents` argument for `train` from a list of texts (tests, small corpora)."""
    items = list(texts)
    return lambda: iter(items)

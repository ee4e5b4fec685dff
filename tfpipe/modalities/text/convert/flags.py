"""The text modality's `tfpipe convert` flags (the text group): its options as the command line
takes them, and those it passes to `convert()` in another form."""

from __future__ import annotations

import argparse
from typing import get_args

from tfpipe.convert.config import TokenizerTraining
from tfpipe.modalities.text.convert.specialtokens import parse


def add_flags(g: argparse._ArgumentGroup) -> None:
    g.add_argument(
        "--tokenizer",
        metavar="PATH",
        help="a SentencePiece .model or a Hugging Face tokenizer.json (stored with the dataset)",
    )
    g.add_argument(
        "--train-tokenizer",
        choices=get_args(TokenizerTraining),
        help="train a tokenizer on the corpus instead, deterministically: SentencePiece unigram "
        "(or BPE), byte-level BPE or WordPiece; needs --vocab-size",
    )
    g.add_argument(
        "--vocab-size",
        type=int,
        metavar="N",
        help="the trained tokenizer's vocabulary size; a corpus too small for N gives the most it "
        "can, said in a note",
    )
    g.add_argument(
        "--special-tokens",
        action="append",
        metavar="ROLE=TOKEN,...",
        help="roles of tokens the tokenizer does not declare (or declares otherwise): "
        "eos=[EOS],bos=[BOS] (roles: pad, unk, bos, eos, cls, sep, mask); the tokenizer's own fill in "
        "the rest, and the manifest records both. Given more than once, the flags are merged (a role "
        "named twice is refused)",
    )
    g.add_argument(
        "--text-field",
        default="text",
        metavar="FIELD",
        help="the JSON Lines field (or Parquet column) holding each document (default: text)",
    )
    g.add_argument(
        "--lines", action="store_true", help=".txt files hold one document per line (default: one per file)"
    )
    g.description = (
        "One record per document: its token ids (an int64 list, every token, no special tokens "
        "added) and its --label. The sequence length is chosen when the data is read."
    )


def flag_options(args: argparse.Namespace) -> dict[str, object]:
    """--special-tokens as convert() takes it (a mapping of roles to tokens)."""
    return {"special_tokens": parse(args.special_tokens)} if args.special_tokens else {}

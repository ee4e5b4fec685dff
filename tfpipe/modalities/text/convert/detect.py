"""How `--format auto` finds a text corpus (convert/detect.py weighs every modality's answers):
never by its content alone, since JSON Lines and Parquet may be tables too, but whenever a
tokenizer option is given or the split joins a text dataset (`claims`); a source of JSON Lines
or .txt files nothing else reads is a corpus whose tokenizer was forgotten (`explains`)."""

from __future__ import annotations

from typing import Any

from tfpipe.convert.config import TOKENIZER_OPTIONS
from tfpipe.errors import ConfigError
from tfpipe.modalities.text.convert.listing import looks_like_corpus


def claims(src: str, cfg: Any, joins: Any) -> str | None:
    if cfg.tokenizer or cfg.train_tokenizer:
        return "auto: a tokenizer option (--tokenizer or --train-tokenizer) was given"
    if joins is not None and joins.layout == "text":
        return f"auto: the dataset it joins (splits {sorted(joins.splits)}) is text"
    return None


def explains(src: str) -> Exception | None:
    if looks_like_corpus(src):
        return ConfigError(
            f"{src} holds text (JSON Lines or .txt files); a text corpus needs a tokenizer. Pass "
            f"{TOKENIZER_OPTIONS}."
        )
    return None

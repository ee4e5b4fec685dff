"""The format of a source given as `--format auto`, detected by content.

This is the one place in convert's core that names kinds: it decides which kind reads a
source before any kind is chosen, so it weighs the kinds' signs against each other (a
tokenizer option means text; a folder of class folders, images; JSON Lines records with text
in the text field, a corpus whose tokenizer was forgotten).
"""

from __future__ import annotations

from tfpipe.convert.config import ConvertConfig
from tfpipe.convert.formats import jsonlfile
from tfpipe.convert.images import folders
from tfpipe.convert.tables.read import list_table
from tfpipe.convert.text import listing as text_listing
from tfpipe.errors import ConfigError, DataError
from tfpipe.format.manifest import Manifest


def choose_format(src: str, cfg: ConvertConfig, joins: Manifest | None) -> tuple[str, str]:
    """The source format, and why: given, or detected by content. A tokenizer option, or a
    text dataset to join, makes it text."""
    if cfg.format != "auto":
        return cfg.format, "given"
    if cfg.tokenizer or cfg.train_tokenizer:
        return "text", "auto: a tokenizer option (--tokenizer or --train-tokenizer) was given"
    if joins is not None and joins.layout == "text":  # detection: the kinds weighed, see the docstring
        return "text", f"auto: the dataset it joins (splits {sorted(joins.splits)}) is text"
    try:
        choice = folders.explain_format(src, cfg.labels_file)
        if choice.format == "jsonl":
            _refuse_a_corpus_as_a_table(src, cfg)
    except DataError:
        if text_listing.looks_like_corpus(src):
            raise ConfigError(
                f"{src} holds text (JSON Lines or .txt files); a text corpus needs a tokenizer. Pass "
                "--tokenizer PATH or --train-tokenizer sentencepiece|bpe|wordpiece --vocab-size N."
            ) from None
        raise
    return choice.format, f"auto: {choice.reason}"


def _refuse_a_corpus_as_a_table(src: str, cfg: ConvertConfig) -> None:
    """JSON Lines without a tokenizer option are read as a table, unless their first record
    holds text in the text field: that is a corpus whose tokenizer was forgotten.

    Raises:
      ConfigError: naming the field, the way to tokenize it, and the way to keep it a table.
    """
    first = jsonlfile.first_object(list_table(src, "jsonl").files[0])
    if first is None or not isinstance(first.get(cfg.text_field), str):
        return
    raise ConfigError(
        f"{src} holds JSON Lines whose records have text in field {cfg.text_field!r}: a text corpus, "
        "which needs a tokenizer. Pass --tokenizer PATH or --train-tokenizer sentencepiece|bpe|wordpiece "
        "--vocab-size N. To convert the records as a table instead (the text a string feature), pass "
        "--format jsonl."
    )

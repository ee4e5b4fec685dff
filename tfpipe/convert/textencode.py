"""Worker-side text encoding: a piece of documents -> one `tf.train.Example` each, counted.

Each document becomes a record with `tokens` (every token id, in order, no special tokens
added) and, for a classification corpus, `label`. A document that tokenizes to nothing is left
out and counted; one whose round trip differs from its text beyond the tokenizer's
normalisation is written as tokenized, and counted with the first case described. Pure: the
same piece gives the same bytes in any process (the tokenizer is read once per process from
the dataset, checked against its fingerprint).
"""

from __future__ import annotations

import dataclasses

from tfpipe.codec import encode_example
from tfpipe.convert.textfiles import where
from tfpipe.convert.textstats import TextTally
from tfpipe.convert.tokenizers import Tokenizer, load_stored
from tfpipe.schema import VARIABLE, Field, Schema

TOKENS = "tokens"
LABEL = "label"


def text_schema(labelled: bool) -> Schema:
    """A text record's features: `tokens` (int64, any length), and `label` (int64) if labelled."""
    tokens = Field(TOKENS, "int64", VARIABLE)
    return Schema((tokens, Field(LABEL, "int64")), label=LABEL) if labelled else Schema((tokens,))


@dataclasses.dataclass(frozen=True, slots=True)
class TextTask:
    """Consecutive documents of one file, and the tokenizer to encode them with.

    Attributes:
      texts: the documents.
      labels: their class indices (or labels as given), or None for an unlabelled corpus.
      path, lines: their file and each one's line (or Parquet row), for messages.
      tokenizer, fingerprint: the dataset's stored tokenizer file and its fingerprint.
    """

    texts: tuple[str, ...]
    labels: tuple[int, ...] | None
    path: str
    lines: tuple[int, ...]
    tokenizer: str
    fingerprint: str


def encode_text(task: TextTask) -> tuple[list[bytes | None], TextTally]:
    """Each document's record (None for one left out as empty), and what they hold."""
    import numpy as np

    tok = load_stored(task.tokenizer, task.fingerprint)
    schema = text_schema(task.labels is not None)
    tally = TextTally()
    records: list[bytes | None] = []
    for i, (text, ids) in enumerate(zip(task.texts, tok.encode(list(task.texts)), strict=True)):
        if not ids:
            tally.empty += 1
            tally.first_empty = tally.first_empty or where(task.path, task.lines[i])
            records.append(None)
            continue
        row = {TOKENS: np.asarray(ids, dtype=np.int64)}
        if task.labels is not None:
            row[LABEL] = task.labels[i]
        records.append(encode_example(row, schema))
        tally.add(len(ids))
        _check_round_trip(tok, text, ids, where(task.path, task.lines[i]), tally)
    return records, tally


def _check_round_trip(tok: Tokenizer, text: str, ids: list[int], place: str, tally: TextTally) -> None:
    if tok.specials and not tok.specials.isdisjoint(ids):
        tally.special += 1
        tally.first_special = tally.first_special or place
    expected, got = tok.canonical(text), tok.canonical(tok.decode(ids))
    if expected == got:
        return
    tally.mismatched += 1
    if not tally.first_mismatch:
        at = next(
            (k for k, (a, b) in enumerate(zip(expected, got, strict=False)) if a != b),
            min(len(expected), len(got)),
        )
        tally.first_mismatch = (
            f"{place}, character {at} after normalisation: the text has {expected[max(0, at - 20) : at + 20]!r}, "
            f"its tokens decode to {got[max(0, at - 20) : at + 20]!r}"
        )

"""Worker-side text encoding: a piece of documents -> one `tf.train.Example` each, counted.

Each document becomes a record with `tokens` (every token id, in order, no special tokens
added) and, for a classification corpus, `label`. A document that tokenizes to nothing is left
out and counted; one whose round trip differs from its text beyond the tokenizer's
normalisation is written as tokenized, and counted with the first case described (a document
of text the tokenizer drops whole, such as characters it has never seen and no <unk> for, is
both: left out, and counted as a round trip that lost its text). Pure: the
same piece gives the same bytes in any process (the tokenizer is read once per process from
the dataset, checked against its fingerprint).
"""

from __future__ import annotations

import dataclasses

from tfpipe.codec import encode_example, packed_int64_lists
from tfpipe.convert.textfiles import Doc, Raw, Reading, parse, where
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
    """Consecutive documents of one file, as stored, and how to encode them. The worker
    decodes and parses them (the first pass checked them), so the converting process only
    moves bytes.

    Attributes:
      raws: the documents as stored (`textfiles.Raw`: bytes, label, line, byte offset).
      path, reading: their file and how it is read.
      class_names: text labels' class indices; empty when labels are numbers (or none).
      tokenizer, fingerprint: the dataset's stored tokenizer file and its fingerprint.
    """

    raws: tuple[Raw, ...]
    path: str
    reading: Reading
    class_names: tuple[str, ...]
    tokenizer: str
    fingerprint: str


def encode_text(task: TextTask) -> tuple[list[bytes | None], TextTally]:
    """Each document's record (None for one left out as empty), and what they hold."""
    tok = load_stored(task.tokenizer, task.fingerprint)
    docs = [parse(raw, task.path, task.reading) for raw in task.raws]
    labelled = task.reading.label is not None
    index = {name: i for i, name in enumerate(task.class_names)}
    schema = text_schema(labelled)
    tally = TextTally()
    ids = tok.encode([d.text for d in docs])
    records: list[bytes | None] = []
    for doc, tokens, packed in zip(docs, ids, packed_int64_lists(ids), strict=True):
        if not packed.count:
            tally.empty += 1
            tally.first_empty = tally.first_empty or where(task.path, doc.line)
            records.append(None)
            before = tally.mismatched
            _check_round_trip(tok, doc, task.path, tokens, tally)  # text it had is lost: said
            tally.lost += tally.mismatched - before
            continue
        row: dict[str, object] = {TOKENS: packed}
        if labelled:
            row[LABEL] = index[doc.label] if isinstance(doc.label, str) else int(doc.label)
        records.append(encode_example(row, schema))
        tally.add(packed.count)
        _check_round_trip(tok, doc, task.path, tokens, tally)
    return records, tally


def _check_round_trip(tok: Tokenizer, doc: Doc, path: str, ids: list[int], tally: TextTally) -> None:
    if tok.specials and not tok.specials.isdisjoint(ids):
        tally.special += 1
        tally.first_special = tally.first_special or where(path, doc.line)
    decoded = tok.decode(ids)
    if tok.faithful(doc.text, decoded):
        return
    expected, got = tok.canonical(doc.text), tok.canonical(decoded)
    tally.mismatched += 1
    if not tally.first_mismatch:
        at = next(
            (k for k, (a, b) in enumerate(zip(expected, got, strict=False)) if a != b),
            min(len(expected), len(got)),
        )
        tally.first_mismatch = (
            f"{where(path, doc.line)}, character {at} after normalisation: the text has "
            f"{expected[max(0, at - 20) : at + 20]!r}, its tokens decode to {got[max(0, at - 20) : at + 20]!r}"
        )

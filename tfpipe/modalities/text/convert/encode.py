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
import itertools

from tfpipe.convert.encode import Encoded, EncodedPiece, Work
from tfpipe.errors import DataError
from tfpipe.format.codec import encode_example, packed_int64_lists
from tfpipe.format.schema import VARIABLE, Field, Schema
from tfpipe.format.tfrecord import frame_record
from tfpipe.modalities.text.convert.ranges import Checkpoint
from tfpipe.modalities.text.convert.reader import Doc, Raw, Reading, Span, parse, read_raw, where
from tfpipe.modalities.text.convert.tally import TextTally
from tfpipe.modalities.text.convert.tokenizers import Tokenizer, load_stored

TOKENS = "tokens"
LABEL = "label"


def text_schema(labelled: bool) -> Schema:
    """A text record's features: `tokens` (int64, any length), and `label` (int64) if labelled."""
    tokens = Field(TOKENS, "int64", VARIABLE)
    return Schema((tokens, Field(LABEL, "int64")), label=LABEL) if labelled else Schema((tokens,))


@dataclasses.dataclass(frozen=True, slots=True)
class TextTask(Work):
    """Consecutive documents of one file, and how to encode them: where they are (`start`,
    `skip`, `count`), which the worker reads itself, or their bytes as stored (`raws`), read by
    the converting process. The worker decodes and parses them (the first pass checked them).

    Attributes:
      raws: the documents as stored (`reader.Raw`: bytes, label, line, byte offset), or ().
      path, reading: their file and how it is read.
      class_names: text labels' class indices; empty when labels are numbers (or none).
      tokenizer, fingerprint: the dataset's stored tokenizer file and its fingerprint.
      start, skip, count: without `raws`: the checkpoint to read from (`ranges`), the
        documents after it to skip, and how many to encode.
      specials: the tokenizer's special ids, named roles included (`Tokenizer.specials`, worked
        out once by the converting process), noted where a document's tokens hold one.
    """

    raws: tuple[Raw, ...]
    path: str
    reading: Reading
    class_names: tuple[str, ...]
    tokenizer: str
    fingerprint: str
    start: Checkpoint | None = None
    skip: int = 0
    count: int = 0
    specials: tuple[int, ...] = ()

    def encode(self, shard: int, first: int) -> EncodedPiece:
        """The documents' records, framed whole by the worker (small records, many), and their tally."""
        records, tally = encode_text(self)
        framed = [Encoded(None if r is None else frame_record(r), None, 0) for r in records]
        return EncodedPiece(shard, first, framed, tally, framed=True)

    def documents(self) -> tuple[Raw, ...]:
        """The task's documents as stored: its `raws`, or read from its checkpoint.

        Raises:
          DataError: the file holds fewer documents there than the first pass counted.
        """
        if self.start is None:
            return self.raws
        span = Span(self.start.offset, self.start.line)
        raws = tuple(itertools.islice(read_raw(self.path, self.reading, self.skip, span), self.count))
        if len(raws) < self.count:
            raise DataError(
                f"{self.path}: expected {self.count} documents from line {self.start.line} on (document "
                f"{self.start.doc + self.skip + 1} of the first pass). Received: {len(raws)}; did the input "
                "change during the conversion?"
            )
        return raws


def encode_text(task: TextTask) -> tuple[list[bytes | None], TextTally]:
    """Each document's record (None for one left out as empty), and what they hold."""
    tok = load_stored(task.tokenizer, task.fingerprint)
    specials = frozenset(task.specials)
    docs = [parse(raw, task.path, task.reading) for raw in task.documents()]
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
            _check_round_trip(tok, specials, doc, task.path, tokens, tally)  # text it had is lost: said
            tally.lost += tally.mismatched - before
            continue
        row: dict[str, object] = {TOKENS: packed}
        if labelled:
            row[LABEL] = index[doc.label] if isinstance(doc.label, str) else int(doc.label)
        records.append(encode_example(row, schema))
        tally.add(packed.count)
        _check_round_trip(tok, specials, doc, task.path, tokens, tally)
    return records, tally


def _check_round_trip(
    tok: Tokenizer, specials: frozenset[int], doc: Doc, path: str, ids: list[int], tally: TextTally
) -> None:
    if specials and not specials.isdisjoint(ids):
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

"""What a text split holds, counted as its documents are tokenized: per piece by the workers,
summed per shard by the writer (kept in the shard's done-record, so `--resume` and the Beam
engine sum the same figures), and per split into the manifest's `SplitText`, its notes and its
lengths file (every document's token count, in record order: `manifest.LENGTHS_FORMAT`)."""

from __future__ import annotations

import array
import base64
import dataclasses
import sys
from typing import ClassVar

from tfpipe.errors import DataError
from tfpipe.format.jsonobject import JsonObject
from tfpipe.format.manifest import Checksum
from tfpipe.format.manifest_text import LengthsFile, SplitText, length_bin

_MAX_LENGTH = (1 << 32) - 1  # a uint32 of the lengths file


@dataclasses.dataclass(slots=True)
class TextTally:
    """Documents written and what was noticed about the rest, in document order.

    Attributes:
      documents, tokens: records written and the token ids they hold.
      lengths: each written document's token count, in record order (uint32).
      bins: the length histogram, bin lower bound (`manifest.length_bin`) -> [count, tokens].
      empty: documents left out because they tokenize to nothing; `first_empty` where the first is.
      lost: of them, documents whose text was not empty (only characters the tokenizer drops,
        such as ones it has never seen and has no <unk> for); also counted as `mismatched`.
      mismatched: documents whose round trip (decode of encode) differs from their text beyond
        the tokenizer's normalisation; `first_mismatch` says where and how the first differs.
      special: documents whose text the tokenizer reads as a special token (a literal "</s>");
        `first_special` where the first is.
    """

    kind: ClassVar[str] = "text"  # its kind's name: the key of a done-record's tally

    documents: int = 0
    tokens: int = 0
    lengths: array.array = dataclasses.field(default_factory=lambda: array.array("I"))
    bins: dict[int, list[int]] = dataclasses.field(default_factory=dict)
    empty: int = 0
    first_empty: str = ""
    lost: int = 0
    mismatched: int = 0
    first_mismatch: str = ""
    special: int = 0
    first_special: str = ""

    def add(self, n_tokens: int) -> None:
        """Counts a written document of `n_tokens` tokens.

        Raises:
          DataError: a document beyond 2**32 - 1 tokens, which the lengths file cannot hold.
        """
        if n_tokens > _MAX_LENGTH:
            raise DataError(
                f"expected documents of at most {_MAX_LENGTH:,} tokens (the split's lengths file holds "
                f"uint32 counts). Received: a document of {n_tokens:,} tokens"
            )
        self.lengths.append(n_tokens)
        self.documents += 1
        self.tokens += n_tokens
        count = self.bins.setdefault(length_bin(n_tokens), [0, 0])
        count[0] += 1
        count[1] += n_tokens

    def merge(self, later: TextTally) -> None:
        """Adds the tally of the documents that come after this one's."""
        self.documents += later.documents
        self.tokens += later.tokens
        self.lengths.extend(later.lengths)
        for lower, (count, tokens) in later.bins.items():
            mine = self.bins.setdefault(lower, [0, 0])
            mine[0] += count
            mine[1] += tokens
        for what in ("empty", "lost", "mismatched", "special"):
            setattr(self, what, getattr(self, what) + getattr(later, what))
        self.first_empty = self.first_empty or later.first_empty
        self.first_mismatch = self.first_mismatch or later.first_mismatch
        self.first_special = self.first_special or later.first_special

    def kept(self) -> TextTally:
        """The tally without its documents' lengths (4 bytes a document): what a conversion keeps
        in memory once the shard's done-record holds them (`kind.Tally.kept`)."""
        return dataclasses.replace(self, lengths=array.array("I")) if self.lengths else self

    def to_json(self) -> JsonObject:
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return fields | {
            "bins": [[k, *v] for k, v in sorted(self.bins.items())],
            "lengths": base64.b64encode(self.lengths_bytes()).decode("ascii"),
        }

    @classmethod
    def from_json(cls, obj: JsonObject) -> TextTally:
        """The tally of a done-record. A record without lengths (written before the lengths file
        existed) raises KeyError: its shard is rewritten on resume, as for any unreadable record."""
        fields = {f.name for f in dataclasses.fields(cls)} - {"bins", "lengths"}
        lengths = array.array("I", base64.b64decode(obj["lengths"], validate=True))
        if sys.byteorder == "big":
            lengths.byteswap()
        if len(lengths) != obj["documents"]:
            raise ValueError(f"a done-record of {obj['documents']} documents holds {len(lengths)} lengths")
        bins = {int(k): [int(c), int(t)] for k, c, t in obj["bins"]}
        # A field added later (`lost`) takes its default in a record written before it.
        return cls(**{k: obj[k] for k in fields if k in obj}, lengths=lengths, bins=bins)

    def lengths_bytes(self) -> bytes:
        """The lengths as the lengths file holds them: little-endian uint32, one a document."""
        if sys.byteorder == "big":
            swapped = array.array("I", self.lengths)
            swapped.byteswap()
            return swapped.tobytes()
        return self.lengths.tobytes()

    def lengths_file(self, name: str) -> tuple[LengthsFile, bytes]:
        """The split's lengths file under `name`: its manifest entry and its bytes."""
        data = self.lengths_bytes()
        checksum = Checksum()
        checksum.update(data)
        return LengthsFile(name, len(data), str(checksum)), data

    def split_text(self, lengths: LengthsFile | None = None) -> SplitText:
        """The manifest's figures of a split (validated by `SplitText`), with its lengths file."""
        lower = sorted(self.bins)
        histogram = {
            "lengths": lower,
            "counts": [self.bins[k][0] for k in lower],
            "tokens": [self.bins[k][1] for k in lower],
        }
        return SplitText(self.documents, self.tokens, self.empty, histogram if lower else {}, lengths)

    def notes(self, normalization: str) -> list[str]:
        """What the summary and the manifest's notes say of the documents not written as they are."""
        out = []
        if self.mismatched:
            out.append(
                f"ROUND TRIP: {self.mismatched} document(s) decode to other text than they hold, beyond "
                f"the tokenizer's normalisation ({normalization}); the first: {self.first_mismatch}. "
                "Their records hold what the tokenizer made of them"
                + (f" ({self.lost} it made nothing of are left out)" if self.lost else "")
                + ". A tokenizer that covers the text (e.g. --train-tokenizer bpe, byte-level and "
                "lossless) keeps it."
            )
        if self.special:
            out.append(
                f"{self.special} document(s) spell a special token that the tokenizer encodes as its "
                f"special id (e.g. a literal </s>); the first: {self.first_special}."
            )
        if self.empty:
            out.append(
                f"{self.empty} empty document(s) left out (they tokenize to nothing"
                + (f"; {self.lost} of them held text the tokenizer dropped whole" if self.lost else "")
                + f"), the first at {self.first_empty}; counted as text.empty_documents."
            )
        return out

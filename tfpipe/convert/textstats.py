"""What a text split holds, counted as its documents are tokenized: per piece by the workers,
summed per shard by the writer (kept in the shard's done-record, so `--resume` and the Beam
engine sum the same figures), and per split into the manifest's `SplitText` and notes."""

from __future__ import annotations

import dataclasses
from typing import Any

from tfpipe.manifest import SplitText, length_bin


@dataclasses.dataclass(slots=True)
class TextTally:
    """Documents written and what was noticed about the rest, in document order.

    Attributes:
      documents, tokens: records written and the token ids they hold.
      bins: the length histogram, bin lower bound (`manifest.length_bin`) -> [count, tokens].
      empty: documents left out because they tokenize to nothing; `first_empty` where the first is.
      mismatched: documents whose round trip (decode of encode) differs from their text beyond
        the tokenizer's normalisation; `first_mismatch` says where and how the first differs.
      special: documents whose text the tokenizer reads as a special token (a literal "</s>");
        `first_special` where the first is.
    """

    documents: int = 0
    tokens: int = 0
    bins: dict[int, list[int]] = dataclasses.field(default_factory=dict)
    empty: int = 0
    first_empty: str = ""
    mismatched: int = 0
    first_mismatch: str = ""
    special: int = 0
    first_special: str = ""

    def add(self, n_tokens: int) -> None:
        """Counts a written document of `n_tokens` tokens."""
        self.documents += 1
        self.tokens += n_tokens
        count = self.bins.setdefault(length_bin(n_tokens), [0, 0])
        count[0] += 1
        count[1] += n_tokens

    def merge(self, later: TextTally) -> None:
        """Adds the tally of the documents that come after this one's."""
        self.documents += later.documents
        self.tokens += later.tokens
        for lower, (count, tokens) in later.bins.items():
            mine = self.bins.setdefault(lower, [0, 0])
            mine[0] += count
            mine[1] += tokens
        for what in ("empty", "mismatched", "special"):
            setattr(self, what, getattr(self, what) + getattr(later, what))
        self.first_empty = self.first_empty or later.first_empty
        self.first_mismatch = self.first_mismatch or later.first_mismatch
        self.first_special = self.first_special or later.first_special

    def to_json(self) -> dict[str, Any]:
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "bins"}
        return fields | {"bins": [[k, *v] for k, v in sorted(self.bins.items())]}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> TextTally:
        fields = {f.name for f in dataclasses.fields(cls)} - {"bins"}
        return cls(**{k: obj[k] for k in fields}, bins={int(k): [int(c), int(t)] for k, c, t in obj["bins"]})

    def split_text(self) -> SplitText:
        """The manifest's figures of a split (validated by `SplitText`)."""
        lower = sorted(self.bins)
        histogram = {
            "lengths": lower,
            "counts": [self.bins[k][0] for k in lower],
            "tokens": [self.bins[k][1] for k in lower],
        }
        return SplitText(self.documents, self.tokens, self.empty, histogram if lower else {})

    def notes(self, normalization: str) -> list[str]:
        """What the summary and the manifest's notes say of the documents not written as they are."""
        out = []
        if self.mismatched:
            out.append(
                f"ROUND TRIP: {self.mismatched} document(s) decode to other text than they hold, beyond "
                f"the tokenizer's normalisation ({normalization}); the first: {self.first_mismatch}. "
                "Their records hold what the tokenizer made of them. A tokenizer that covers the text "
                "(e.g. --train-tokenizer bpe, byte-level and lossless) keeps it."
            )
        if self.special:
            out.append(
                f"{self.special} document(s) spell a special token that the tokenizer encodes as its "
                f"special id (e.g. a literal </s>); the first: {self.first_special}."
            )
        if self.empty:
            out.append(
                f"{self.empty} empty document(s) left out (they tokenize to nothing), the first at "
                f"{self.first_empty}; counted as text.empty_documents."
            )
        return out

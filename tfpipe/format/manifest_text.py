"""The text kind's entries of the manifest: the tokenizer (`TokenizerInfo`), a split's figures
(`SplitText`: documents, tokens, the length histogram and its bins) and its lengths file
(`LengthsFile`). The manifest (`tfpipe.format.manifest`) keeps the format and reads them by name."""

from __future__ import annotations

import dataclasses
import itertools
import math

from tfpipe.errors import ManifestError
from tfpipe.format.jsonobject import JsonObject
from tfpipe.format.manifest_checks import check_checksum, check_relative_name, is_count

TOKENIZER_ENTRY_VERSION = 2
"""The version of a manifest's tokenizer entry. 1 (no "version"): the special ids alone. 2: each
role's token and where it was declared (`special_tokens`, `roles_from`), and the ids `build()`
adds (`pipeline_adds`). An entry of version 1 reads as before: its roles' tokens and sources are
unknown, and the ids the pipeline adds follow from its special ids as they always did."""


@dataclasses.dataclass(frozen=True, slots=True)
class TokenizerInfo:
    """The tokenizer a text dataset was tokenized with, stored beside the shards.

    Attributes:
      kind: "sentencepiece" (a `.model` file) or "huggingface" (a `tokenizer.json`).
      file: the tokenizer file's name, relative to the dataset directory.
      fingerprint: `sha256:<hex>` of that file's bytes.
      vocab_size: ids are 0..vocab_size-1.
      special_ids: role -> id for the roles the tokenizer has ("pad", "unk", "bos", "eos",
        "cls", "sep", "mask"); a role it lacks is absent.
      normalization: what the tokenizer's round trip may change (e.g. "NFKC, whitespace
        collapsed"): a decode that differs from the text beyond this is counted at convert time.
      special_tokens: role -> the token's text ("[EOS]"); empty in an entry of version 1.
      roles_from: role -> where the role was declared: named at convert (--special-tokens), the
        tokenizer's post-processor or model, or a special token's name.
      pipeline_adds: the ids `build()` adds to documents: "eos" at each one's end for the
        causal outputs, "cls" and "sep" around each one for `keras_classifier`.
      version: the entry's version (TOKENIZER_ENTRY_VERSION; 1 when the JSON has none).
    """

    kind: str
    file: str
    fingerprint: str
    vocab_size: int
    special_ids: dict[str, int] = dataclasses.field(default_factory=dict)
    normalization: str = ""
    special_tokens: dict[str, str] = dataclasses.field(default_factory=dict)
    roles_from: dict[str, str] = dataclasses.field(default_factory=dict)
    pipeline_adds: dict[str, int] = dataclasses.field(default_factory=dict)
    version: int = TOKENIZER_ENTRY_VERSION

    def to_json(self) -> JsonObject:
        out = dataclasses.asdict(self)
        if self.version == 1:  # written back as it was read
            for key in ("special_tokens", "roles_from", "pipeline_adds", "version"):
                out.pop(key)
        return out

    @classmethod
    def from_json(cls, obj: JsonObject) -> TokenizerInfo:
        try:
            version = obj.get("version", 1)
            special_ids = dict(obj.get("special_ids", {}))
            info = cls(
                kind=str(obj["kind"]),
                file=check_relative_name(str(obj["file"])),
                fingerprint=str(obj["fingerprint"]),
                vocab_size=obj["vocab_size"],
                special_ids=special_ids,
                normalization=str(obj.get("normalization", "")),
                special_tokens={str(k): str(v) for k, v in obj.get("special_tokens", {}).items()},
                roles_from={str(k): str(v) for k, v in obj.get("roles_from", {}).items()},
                pipeline_adds=dict(obj["pipeline_adds"]) if version != 1 else framing_v1(special_ids),
                version=version,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ManifestError(f"Malformed tokenizer entry: {e!r}. Received: {str(obj)[:200]}") from e
        ids = [*info.special_ids.values(), *info.pipeline_adds.values()]
        if (
            info.version not in (1, TOKENIZER_ENTRY_VERSION)
            or not is_count(info.vocab_size)
            or not all(is_count(v) and v < info.vocab_size for v in ids)
        ):
            raise ManifestError(
                f"tokenizer: expected version 1 or {TOKENIZER_ENTRY_VERSION}, vocab_size > 0 and special ids below "
                f"it. Received: version={info.version!r}, vocab_size={info.vocab_size!r}, "
                f"special_ids={info.special_ids!r}, pipeline_adds={info.pipeline_adds!r}"
            )
        return info


def framing_v1(special_ids: dict[str, int]) -> dict[str, int]:
    """The ids the pipeline added for a tokenizer entry of version 1: its EOS, and its CLS and
    SEP when it had both."""
    out = {"eos": special_ids["eos"]} if "eos" in special_ids else {}
    if "cls" in special_ids and "sep" in special_ids:
        out |= {"cls": special_ids["cls"], "sep": special_ids["sep"]}
    return out


EXACT_LENGTHS = 16384
"""Document lengths below this many tokens have a histogram bin each."""
BINS_PER_OCTAVE = 128
"""Longer lengths share bins 1/128 of a power of two wide: [2**k, 2**(k+1)) in 128 bins, so a
bin's lengths differ by under 1%, which moves a predicted fill by far less than a point."""


def length_bin(n: int) -> int:
    """The lower bound of the length-histogram bin that holds a document of `n` tokens."""
    return n if n < EXACT_LENGTHS else n - n % bin_width(n)


def bin_width(n: int) -> int:
    """How many lengths the histogram bin holding `n` covers: 1 below EXACT_LENGTHS."""
    return 1 if n < EXACT_LENGTHS else (1 << (n.bit_length() - 1)) // BINS_PER_OCTAVE


def _check_histogram(h: dict[str, list[int]], documents: int, tokens: int) -> None:
    """Refuses a histogram that is not the one `length_bin` makes of `documents` documents
    holding `tokens` tokens: a packing prediction read from it would be wrong."""
    if not h and documents == 0:
        return
    keys = sorted(h)
    lengths, counts, toks = (h.get(k, []) for k in ("lengths", "counts", "tokens"))
    problem = None
    if keys != ["counts", "lengths", "tokens"] or not len(lengths) == len(counts) == len(toks):
        problem = "parallel lists lengths, counts and tokens of one length"
    elif not all(is_count(v) for v in (*lengths, *counts, *toks)):
        problem = "counts in 0..2**63-1"
    elif any(a >= b for a, b in itertools.pairwise(lengths)) or any(
        n < 1 or length_bin(n) != n for n in lengths
    ):
        problem = "increasing bin lower bounds (lengths >= 1, binned by length_bin)"
    elif any(
        c < 1 or not c * n <= t <= c * (n + bin_width(n) - 1)
        for n, c, t in zip(lengths, counts, toks, strict=True)
    ):
        problem = "each bin's tokens within its count times its lengths"
    elif (sum(counts), sum(toks)) != (documents, tokens):
        problem = f"counts summing to documents={documents} and tokens to tokens={tokens}"
    if problem:
        raise ManifestError(
            f"length_histogram: expected {problem}. Received: lengths {lengths[:5]}, counts "
            f"{counts[:5]}, tokens {toks[:5]} ({len(lengths)} bins)"
        )


LENGTHS_FORMAT = "uint32le"
"""The lengths file of a text split: every document's token count (the `tokens` of its record)
as a little-endian uint32, in record order across the split's shards: 4 bytes a document."""


def lengths_name(split: str) -> str:
    """The lengths file of `split`: not `<split>-*`, so no shard glob of the split matches it."""
    return f"lengths.{split}.u32"


@dataclasses.dataclass(frozen=True, slots=True)
class LengthsFile:
    """A text split's lengths file (`LENGTHS_FORMAT`), written with the split before the manifest.

    `build(..., start_step=K)` counts the packed rows before step K from it alone, without
    opening a shard.

    Attributes:
      file: its name, relative to the dataset directory.
      bytes: its size: 4 bytes a document.
      checksum: `<algorithm>:<hex>` of its bytes, as for shards.
    """

    file: str
    bytes: int
    checksum: str

    def __post_init__(self) -> None:
        check_relative_name(self.file)
        if not is_count(self.bytes) or self.bytes % 4:
            raise ManifestError(
                f"lengths file {self.file!r}: expected bytes to be a count of 4-byte lengths. "
                f"Received: bytes={self.bytes!r}"
            )
        check_checksum(f"lengths file {self.file!r}", self.checksum)

    def to_json(self) -> JsonObject:
        return {"file": self.file, "format": LENGTHS_FORMAT, "bytes": self.bytes, "checksum": self.checksum}

    @classmethod
    def from_json(cls, obj: JsonObject) -> LengthsFile:
        try:
            if obj.get("format") != LENGTHS_FORMAT:
                raise ManifestError(
                    f"lengths file: expected format {LENGTHS_FORMAT!r}. Received: {obj.get('format')!r}"
                )
            return cls(str(obj["file"]), obj["bytes"], str(obj["checksum"]))
        except ManifestError:
            raise
        except (KeyError, TypeError, AttributeError) as e:
            raise ManifestError(f"Malformed lengths entry: {e!r}. Received: {str(obj)[:200]}") from e


@dataclasses.dataclass(frozen=True, slots=True)
class SplitText:
    """What a text split holds, counted at convert time.

    Attributes:
      documents: records written (one document each; empty documents are left out).
      tokens: token ids in all of them.
      empty_documents: documents left out because they tokenized to nothing.
      length_histogram: document lengths in tokens, as parallel lists: `lengths[i]` is a bin's
        lower bound, `counts[i]` how many documents fall in it and `tokens[i]` their tokens.
        Only non-empty bins are listed. Bins are one length wide below EXACT_LENGTHS tokens,
        then 1/BINS_PER_OCTAVE of a power of two (`length_bin`): fine enough to predict each
        packing mode's fill at any sequence length.
      lengths: the split's lengths file, or None (converted before tfpipe wrote one).
    """

    documents: int
    tokens: int
    empty_documents: int = 0
    length_histogram: dict[str, list[int]] = dataclasses.field(default_factory=dict)
    lengths: LengthsFile | None = None

    def __post_init__(self) -> None:
        for what in ("documents", "tokens", "empty_documents"):
            if not is_count(getattr(self, what)):
                raise ManifestError(
                    f"text: expected {what} to be an int in 0..2**63-1. Received: {getattr(self, what)!r}"
                )
        _check_histogram(self.length_histogram, self.documents, self.tokens)
        if self.lengths is not None and self.lengths.bytes != 4 * self.documents:
            raise ManifestError(
                f"text: expected the lengths file {self.lengths.file!r} to hold 4 bytes for each of the "
                f"{self.documents} documents. Received: bytes={self.lengths.bytes}"
            )

    def percentiles(self, qs: tuple[float, ...] = (0.1, 0.5, 0.9, 0.99, 1.0)) -> list[int]:
        """Document lengths in tokens at each quantile in `qs` (nearest rank; the bin's lower
        bound above EXACT_LENGTHS). Empty for a split without documents."""
        if not self.documents:
            return []
        lengths, counts = self.length_histogram["lengths"], self.length_histogram["counts"]
        out, seen, i = [], 0, -1
        for q in sorted(qs):
            rank = max(1, math.ceil(q * self.documents))
            while seen < rank:
                i += 1
                seen += counts[i]
            out.append(lengths[i])
        return out

    def to_json(self) -> JsonObject:
        out = {k: v for k, v in dataclasses.asdict(self).items() if k != "lengths"}
        return out | ({} if self.lengths is None else {"lengths": self.lengths.to_json()})

    @classmethod
    def from_json(cls, obj: JsonObject) -> SplitText:
        try:
            return cls(
                documents=obj["documents"],
                tokens=obj["tokens"],
                empty_documents=obj.get("empty_documents", 0),
                length_histogram={str(k): list(v) for k, v in obj.get("length_histogram", {}).items()},
                lengths=None if obj.get("lengths") is None else LengthsFile.from_json(obj["lengths"]),
            )
        except ManifestError:
            raise
        except (KeyError, TypeError, ValueError) as e:
            raise ManifestError(f"Malformed text entry: {e!r}. Received: {str(obj)[:200]}") from e

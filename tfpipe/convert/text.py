"""Text corpora as a conversion source: the first pass, the tokenizer, and each shard's documents.

The first pass reads every document (`textfiles`) before anything is written: it counts them
per file, checks them (invalid UTF-8, JSON lines that do not parse, missing or non-string
fields, labels), and reports every problem it finds at once. The tokenizer is then read
(`--tokenizer`), trained on the documents (`--train-tokenizer`), or, for a split joining a
text dataset, the dataset's own; it is stored beside the shards, so the dataset can be
detokenized. Documents are items in source order, one record each; a shard's documents are
read from the files that hold them (`TextInputs`, plain values a Beam worker gets as JSON).
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import json
from collections.abc import Iterator, Sequence
from typing import Any

from tfpipe import storage
from tfpipe.convert import hfsaved, specialtokens, textfiles, textlist, tokenizers, tokenizertrain
from tfpipe.convert.config import ConvertConfig
from tfpipe.convert.encode import Piece
from tfpipe.convert.infer import Problems
from tfpipe.convert.textencode import TextTask, text_schema
from tfpipe.convert.textfiles import Raw, Reading
from tfpipe.convert.writer import files_holding
from tfpipe.errors import ConfigError, DataError, DestinationError
from tfpipe.manifest import Manifest, SkippedInput, TokenizerInfo

DOCS_PER_TASK = 256
TEXT_PER_TASK = 1 << 18
"""A worker task holds up to 256 documents or 256 KiB of text, whichever comes first: IPC is
then a small part of the tokenizing, and a shard's worth of tasks spreads over the workers."""
_SAMPLE_DOCS = 256  # documents tokenized to estimate the output size
_INT64 = 2**63


@dataclasses.dataclass(frozen=True, slots=True)
class TextScan:
    """What the first pass learned.

    Attributes:
      files, file_docs, identities: each corpus file, its document count and its identity.
      chars: characters in all documents (for the size estimate).
      class_names: labels by class index when labels are text or a Parquet ClassLabel; empty
        when they are numbers kept as given, or the corpus is unlabelled.
      blank_lines: blank lines of JSON Lines files, left out.
    """

    files: tuple[str, ...]
    file_docs: tuple[int, ...]
    identities: tuple[str, ...]
    skipped: tuple[SkippedInput, ...]
    chars: int
    class_names: tuple[str, ...] = ()
    blank_lines: int = 0


@dataclasses.dataclass(slots=True)
class _Labels:
    """The labels seen by the first pass: text ones, numbers, and the first of each."""

    names: dict[str, str] = dataclasses.field(default_factory=dict)  # text label -> where first seen
    first_text: str = ""
    first_number: str = ""
    declared: tuple[str, ...] | None = None  # a Parquet or Arrow ClassLabel's names
    known: tuple[str, ...] = ()  # the class names of the dataset this split joins

    def add(self, label: Any, place: str, problems: Problems) -> None:
        if isinstance(label, str):
            self.names.setdefault(label, f"{place} ({label!r})")
            self.first_text = self.first_text or f"{place} ({label!r})"
            return
        number = _integral(label)
        if number is None:
            problems.add(f"{place}: expected a label that is text or an integer. Received: {_shown(label)}")
        elif self.declared is not None and not 0 <= number < len(self.declared):
            problems.add(
                f"{place}: label {number} is not a class index of the file's ClassLabel "
                f"{list(self.declared)[:10]} (0..{len(self.declared) - 1})"
            )
        elif self.declared is None and self.known and not 0 <= number < len(self.known):
            # The dataset names its classes: a number is one of their indices, or nothing.
            problems.add(
                f"{place}: label {number} is not a class index of the dataset this split joins "
                f"({list(self.known)[:10]}, 0..{len(self.known) - 1})"
            )
        self.first_number = self.first_number or f"{place} ({label!r})"


def _integral(label: Any) -> int | None:
    if isinstance(label, bool) or not isinstance(label, (int, float)):
        return None
    if isinstance(label, float) and not label.is_integer():
        return None
    return int(label) if -_INT64 <= label < _INT64 else None


def _shown(value: Any) -> str:
    return f"{type(value).__name__} {json.dumps(value, default=str)[:60]}"


def scan(src: str, reading: Reading, known: tuple[str, ...] = ()) -> TextScan:
    """The first pass over a corpus: every document read and checked, and counted per file.

    Args:
      known: the class names of the dataset this split joins: text labels keep their indices,
        and a label not among them is refused.

    Raises:
      DataError: every problem found (up to `infer.PROBLEMS_SHOWN`), at once.
    """
    listing = textlist.list_corpus(src)
    problems, labels = Problems(), _Labels(known=known)
    counts, identities, chars, blank, textless = [], [], 0, 0, 0
    for path in listing.files:
        kind = textlist.read_as(path)
        if reading.label and kind == "txt":
            raise DataError(
                f"{path}: a .txt file holds no label. Received: label={reading.label!r} (--label); labels "
                "come from a JSON Lines field or a Parquet column."
            )
        identities.append(storage.identity(path, checksum=not storage.is_gcs(path)))
        if reading.label and kind in textlist.COLUMNS:
            labels.declared = _declared(path, reading.label, labels.declared, listing.features)
        n, last = 0, 0
        for doc in textfiles.read_documents(path, reading, problem=problems.add):
            n += 1
            chars += len(doc.text)
            textless += not doc.text.strip()
            blank += max(0, doc.line - last - 1) if kind == "jsonl" else 0
            last = doc.line
            if reading.label:
                labels.add(doc.label, textfiles.where(path, doc.line), problems)
        counts.append(n)
    names = _class_names(src, labels, known, reading.label, problems)
    error = problems.error(src)
    if error is not None:
        raise error
    if not sum(counts):
        raise DataError(
            f"{src}: expected at least one document. Received: none in {len(listing.files)} file(s)"
        )
    if textless == sum(counts):
        raise DataError(
            f"{src}: expected documents with text. Received: {textless:,} document(s) in "
            f"{len(listing.files)} file(s), every one empty or whitespace only: nothing to tokenize."
            + (
                f" Is the text in another field or column than {reading.text_field!r} (--text-field)?"
                if any(textlist.read_as(p) != "txt" for p in listing.files)
                else ""
            )
        )
    return TextScan(listing.files, tuple(counts), tuple(identities), listing.skipped, chars, names, blank)


def _declared(
    path: str, column: str, before: tuple[str, ...] | None, features: dict[str, Any]
) -> tuple[str, ...] | None:
    """The class names of a Parquet or Arrow file's `ClassLabel` label: a saved dataset's
    `dataset_info.json` says them, else the file's own metadata."""
    names = hfsaved.class_names(features, column) or textfiles.declared_labels(path, column)
    if before is not None and names != before:
        raise DataError(
            f"{path}: expected the ClassLabel names of the files before it, {list(before)[:10]}. "
            f"Received: {None if names is None else list(names)[:10]}"
        )
    return names


def _class_names(
    src: str, labels: _Labels, known: tuple[str, ...], label: str | None, problems: Problems
) -> tuple[str, ...]:
    """Class names by index: text labels (sorted, or the joined dataset's), a ClassLabel's, or
    none for numbers kept as given."""
    if labels.names and labels.first_number:
        problems.add(
            f"{src}: expected labels of one kind in {label!r}: text (class names) or integers. Received: "
            f"text at {labels.first_text} and a number at {labels.first_number}"
        )
    if labels.declared is not None:
        # The encoder indexes text labels by these names: one not among them is a problem here.
        undeclared = sorted(labels.names.keys() - set(labels.declared))
        if undeclared:
            problems.add(
                f"{src}: label(s) {undeclared[:5]} (first at {labels.names[undeclared[0]]}) are not among the "
                f"ClassLabel names its Parquet file(s) declare for {label!r}: {list(labels.declared)[:10]}"
            )
        return labels.declared
    if not labels.names:
        return known
    unknown = sorted(labels.names.keys() - set(known)) if known else []
    if unknown:
        problems.add(
            f"{src}: label(s) {unknown[:5]} are not classes of the dataset this split joins "
            f"({list(known)[:10]}{'...' if len(known) > 10 else ''}); its labels keep their numbering."
        )
    return known or tuple(sorted(labels.names))


@dataclasses.dataclass(frozen=True, slots=True)
class TextInputs:
    """The documents of one shard and how to encode them; plain values (`to_json`).

    Attributes:
      files: (file, index in the plan of its first document) of each file holding documents
        of the shard.
      class_names: text labels' class indices; empty when labels are numbers (or none).
      tokenizer, fingerprint: the dataset's stored tokenizer file.
    """

    files: tuple[tuple[str, int], ...]
    reading: Reading
    class_names: tuple[str, ...]
    tokenizer: str
    fingerprint: str

    def pieces(self, shard: int, first: int, count: int) -> Iterator[Piece]:
        yield from _cut(self, shard, first, count, _Cursor(self.files, self.reading))

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> TextInputs:
        return cls(
            files=tuple((str(p), int(i)) for p, i in obj["files"]),
            reading=Reading(**obj["reading"]),
            class_names=tuple(obj["class_names"]),
            tokenizer=str(obj["tokenizer"]),
            fingerprint=str(obj["fingerprint"]),
        )


class _Cursor:
    """Reads documents in plan order from files (file, index of its first document), moving
    forward only: consecutive shards continue where the last stopped."""

    def __init__(self, files: Sequence[tuple[str, int]], reading: Reading) -> None:
        self.files, self.reading = list(files), reading
        self.starts = [start for _, start in self.files]
        self.at = -1  # index in the plan of the next document `docs` yields
        self.file = -1
        self.docs: Iterator[Raw] = iter(())

    def take(self, first: int, count: int) -> Iterator[tuple[str, Raw]]:
        """Documents first..first+count-1 of the plan, each with its file."""
        end = first + count
        while first < end:
            k = bisect.bisect_right(self.starts, first) - 1
            path, start = self.files[k]
            if k != self.file or first < self.at:
                self.file, self.at = k, first
                self.docs = textfiles.read_raw(path, self.reading, first - start)
            doc = next(self.docs, None)
            while doc is not None and self.at < first:  # skip to `first` (a shard after one done)
                self.at += 1
                doc = next(self.docs, None)
            if doc is None:
                raise DataError(
                    f"{path}: expected document {first - start + 1} of the first pass. Received: the "
                    "file ends before it; did the input change during the conversion?"
                )
            self.at, first = self.at + 1, first + 1
            yield path, doc


def _cut(inputs: TextInputs, shard: int, first: int, count: int, cursor: _Cursor) -> Iterator[Piece]:
    """The shard's documents as pieces of work: one file's consecutive documents, up to
    DOCS_PER_TASK of them or TEXT_PER_TASK bytes."""
    batch: list[Raw] = []
    path, size, start = "", 0, first

    def piece() -> Piece:
        task = TextTask(
            tuple(batch), path, inputs.reading, inputs.class_names, inputs.tokenizer, inputs.fingerprint
        )
        return Piece(shard, start, task)

    for where, raw in cursor.take(first, count):
        if batch and (where != path or len(batch) == DOCS_PER_TASK or size >= TEXT_PER_TASK):
            yield piece()
            start += len(batch)
            batch, size = [], 0
        batch.append(raw)
        path = where
        size += len(raw.data or b"")
    if batch:
        yield piece()


@dataclasses.dataclass(frozen=True, slots=True)
class TextSource:
    """A text corpus, scanned, with the tokenizer its documents are encoded with.

    Attributes:
      tokenizer_file: stored in the dataset as `attachments` before any shard is written.
      dest: the dataset directory (the workers read the stored tokenizer from there).
    """

    scan: TextScan
    reading: Reading
    tokenizer_file: tokenizers.TokenizerFile
    tokenizer: TokenizerInfo
    dest: str
    fingerprint: str
    estimated_bytes: int
    notes: tuple[str, ...] = ()
    layout: str = "text"
    unit: str = "documents"
    label_offset: int = 0
    dropped_rows: int = 0

    schema = property(lambda self: text_schema(self.reading.label is not None))
    n_items = property(lambda self: sum(self.scan.file_docs))
    class_names = property(lambda self: self.scan.class_names)
    inputs = property(lambda self: self.scan.files)
    identities = property(lambda self: self.scan.identities)
    skipped = property(lambda self: self.scan.skipped)

    @property
    def attachments(self) -> tuple[tuple[str, bytes], ...]:
        return ((self.tokenizer_file.name, self.tokenizer_file.data),)

    def _inputs(self, files: tuple[tuple[str, int], ...]) -> TextInputs:
        path = storage.join(self.dest, self.tokenizer.file)
        return TextInputs(files, self.reading, self.scan.class_names, path, self.tokenizer.fingerprint)

    def shard_inputs(self, first: int, end: int) -> TextInputs:
        return self._inputs(files_holding(self.scan.files, self.scan.file_docs, first, end))

    def pieces(self, tasks: Sequence[Any]) -> Iterator[Piece]:
        """The pieces of all `tasks`, reading each file once, forward."""
        files = files_holding(self.scan.files, self.scan.file_docs, 0, self.n_items)
        inputs, cursor = self._inputs(files), _Cursor(files, self.reading)
        for task in tasks:
            yield from _cut(inputs, task.index, task.first, task.count, cursor)


def open_text(src: str, cfg: ConvertConfig, joins: Manifest | None, dest: str) -> TextSource:
    """Scans a text corpus and settles its tokenizer.

    Args:
      joins: the dataset the new split joins; its tokenizer and class names bind the split.
      dest: the dataset directory, where the tokenizer is stored.

    Raises:
      ConfigError: no tokenizer, or a vocabulary size that does not suit the corpus (image and
        table options are refused before, by `config.check_applies`).
      DestinationError: a tokenizer other than the dataset's, naming both fingerprints.
      DataError: bad documents (see `scan`), or a tokenizer file that does not load.
    """
    reading = Reading(cfg.text_field, cfg.label, cfg.lines)
    stored = joins.tokenizer if joins is not None and joins.layout == "text" else None
    if stored is not None and cfg.train_tokenizer:
        raise ConfigError(
            f"{dest} is tokenized with {stored.file} ({stored.fingerprint}); a new split uses it. "
            f"Received: train_tokenizer={cfg.train_tokenizer!r}, which would train another. Leave it out."
        )
    if stored is None and not (cfg.tokenizer or cfg.train_tokenizer):
        raise ConfigError(
            f"{src}: a text corpus needs a tokenizer. Pass --tokenizer PATH (a SentencePiece .model or a "
            "Hugging Face tokenizer.json) or --train-tokenizer sentencepiece|bpe|wordpiece --vocab-size N."
        )
    found = scan(src, reading, joins.class_names if joins is not None else ())
    file = _tokenizer_file(src, cfg, stored, dest, found, reading)
    tok = tokenizers.load(file).named(_names(cfg, stored, dest))
    # A split joining a dataset keeps its tokenizer entry: its roles bind every split.
    info = stored or tok.info(file)
    # Each file by its resolved path: a resume names the corpus as it likes (`c/`, `/abs/c/`).
    files = [storage.resolved(f) for f in found.files]
    digest = hashlib.sha256(
        json.dumps([files, found.file_docs, found.class_names, info.fingerprint]).encode()
    ).hexdigest()
    notes = [f"{found.blank_lines} blank line(s) of JSON Lines left out (they hold no document)"] * bool(
        found.blank_lines
    )
    if cfg.vocab_size and tok.vocab_size < cfg.vocab_size:
        notes.append(
            f"the trained {cfg.train_tokenizer} tokenizer has {tok.vocab_size:,} ids, not the {cfg.vocab_size:,} "
            f"asked for (--vocab-size): {tok.vocab_size:,} is the most this corpus gives (a larger corpus "
            "gives more)"
        )
    estimate = _estimate_bytes(tok, found, reading)
    return TextSource(found, reading, file, info, dest, digest, estimate, tuple(notes))


def _names(cfg: ConvertConfig, stored: TokenizerInfo | None, dest: str) -> dict[str, str]:
    """The roles the user names (`--special-tokens`): a split joining a dataset takes those
    its first split was converted with, and may repeat them, not change them.

    Raises:
      DestinationError: other names than the dataset's.
    """
    if stored is None:
        return dict(cfg.special_tokens)
    named = {
        r: t for r, t in stored.special_tokens.items() if stored.roles_from.get(r) == specialtokens.NAMED
    }
    if cfg.special_tokens and dict(cfg.special_tokens) != named:
        raise DestinationError(
            f"{dest} is tokenized with the special tokens {named or 'its tokenizer declares'} named at convert "
            f"(--special-tokens); every split uses the same. Received: special_tokens={dict(cfg.special_tokens)}. "
            "Leave --special-tokens out to use the dataset's, or write this split to another destination."
        )
    return named


def _tokenizer_file(
    src: str, cfg: ConvertConfig, stored: TokenizerInfo | None, dest: str, found: TextScan, reading: Reading
) -> tokenizers.TokenizerFile:
    """The tokenizer given, trained, or stored in the dataset this split joins."""
    if cfg.train_tokenizer:
        return tokenizertrain.train(cfg.train_tokenizer, cfg.vocab_size or 0, lambda: _texts(found, reading))
    file = tokenizers.read_file(cfg.tokenizer or storage.join(dest, stored.file))  # type: ignore[union-attr]
    if stored is not None and file.fingerprint != stored.fingerprint:
        raise DestinationError(
            f"{dest} is tokenized with {stored.file} ({stored.fingerprint}); every split uses the same "
            f"tokenizer. Received: {cfg.tokenizer} ({file.fingerprint}). Leave --tokenizer out to use the "
            "dataset's, or write this split to another destination."
        )
    return file


def _texts(found: TextScan, reading: Reading) -> Iterator[str]:
    for path in found.files:
        for doc in textfiles.read_documents(path, reading):
            yield doc.text


def _estimate_bytes(tok: tokenizers.Tokenizer, found: TextScan, reading: Reading) -> int:
    """Encodes the first documents and scales their bytes per character to the corpus."""
    sample = []
    for text in _texts(found, reading):
        sample.append(text)
        if len(sample) == _SAMPLE_DOCS:
            break
    chars = sum(len(t) for t in sample) or 1
    ids = tok.encode(sample)
    per_char = sum(2.1 * len(i) + 16 for i in ids) / chars  # ~2 bytes a varint token, 16 of framing
    return int(per_char * found.chars)


def sample(manifest: Manifest, split: str, count: int = 1) -> list[tuple[list[int], str]]:
    """The first `count` records of a text split, each as (token ids, decoded text), decoded
    by the tokenizer stored with the dataset (special tokens spelled out).

    Raises:
      MissingExtraError: the tokenizer's library is not installed (the `text` extra).
      DataError: the stored tokenizer is missing or is not the manifest's.
    """
    import gzip

    from tfpipe.codec import decode_example, read_records

    info = manifest.tokenizer
    if info is None:
        raise DataError(f"{manifest.root}: expected a text dataset. Received: layout {manifest.layout!r}")
    try:
        tok = tokenizers.load_checked(storage.join(manifest.root, info.file), info.fingerprint)
    except FileNotFoundError:
        raise DataError(f"{manifest.root}: its tokenizer {info.file} is missing") from None
    out: list[tuple[list[int], str]] = []
    for path in manifest.shard_paths(split):
        with storage.open_read(path) as raw:
            stream = gzip.GzipFile(fileobj=raw) if manifest.compression == "gzip" else raw
            for record in read_records(stream, path):  # type: ignore[arg-type]
                ids = decode_example(record)["tokens"]
                out.append((ids, tok.decode(ids)))
                if len(out) == count:
                    return out
    return out

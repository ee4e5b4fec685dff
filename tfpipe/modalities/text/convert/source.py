"""Text corpora as a conversion source: the first pass, the tokenizer, and each shard's documents.

The first pass (`text_scan`, on the conversion's workers) reads every document before anything
is written: it counts them per file, checks them (invalid UTF-8, JSON lines that do not parse,
missing or non-string fields, labels), reports every problem it finds at once, and marks where
the workers will read from. The tokenizer is then read (`--tokenizer`), trained on the
documents (`--train-tokenizer`), or, for a split joining a text dataset, the dataset's own; it
is stored beside the shards, so the dataset can be detokenized. Documents are items in source
order, one record each; a shard's documents are read by the workers from the files that hold
them (`TextInputs`, plain values a Beam worker gets as JSON).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterator, Sequence
from typing import Any, cast

from tfpipe import storage
from tfpipe.convert.config import TOKENIZER_OPTIONS, ConvertConfig
from tfpipe.convert.encode import Piece
from tfpipe.convert.writer import files_holding
from tfpipe.errors import ConfigError, DataError, DestinationError
from tfpipe.format.decode import decode_example
from tfpipe.format.manifest import Manifest
from tfpipe.format.manifest_text import TokenizerInfo
from tfpipe.format.schema import Schema
from tfpipe.format.tfrecord import read_records
from tfpipe.modalities.text.convert import ranges as text_ranges
from tfpipe.modalities.text.convert import reader as text_reader
from tfpipe.modalities.text.convert import scan as text_scan
from tfpipe.modalities.text.convert import specialtokens, tokenizers, tokenizertrain
from tfpipe.modalities.text.convert.encode import text_schema
from tfpipe.modalities.text.convert.inputs import Cursor, TextInputs, cut
from tfpipe.modalities.text.convert.reader import Reading
from tfpipe.modalities.text.convert.scan import TextScan

_SAMPLE_DOCS = 256  # documents tokenized to estimate the output size


@dataclasses.dataclass(frozen=True, slots=True)
class TextSource:
    """A text corpus, scanned, with the tokenizer its documents are encoded with.

    Attributes:
      tokenizer_file: stored in the dataset as `attachments` before any shard is written.
      dest: the dataset directory (the workers read the stored tokenizer from there).
      specials: the tokenizer's special ids (`Tokenizer.specials`, named roles included),
        handed to the workers, which note a document that spells one.
    """

    scan: TextScan
    reading: Reading
    tokenizer_file: tokenizers.TokenizerFile
    tokenizer: TokenizerInfo
    dest: str
    fingerprint: str
    estimated_bytes: int
    notes: tuple[str, ...] = ()
    specials: tuple[int, ...] = ()
    layout: str = "text"
    unit: str = "documents"
    label_offset: int = 0
    dropped_rows: int = 0
    kind = "text"

    schema = property(lambda self: text_schema(self.reading.label is not None))
    n_items = property(lambda self: sum(self.scan.file_docs))
    class_names = property(lambda self: self.scan.class_names)
    inputs = property(lambda self: self.scan.files)
    identities = property(lambda self: self.scan.identities)
    skipped = property(lambda self: self.scan.skipped)

    @property
    def attachments(self) -> tuple[tuple[str, bytes], ...]:
        return ((self.tokenizer_file.name, self.tokenizer_file.data),)

    def _inputs(self, first: int, end: int) -> TextInputs:
        """The inputs of documents first..end-1: each file with the checkpoints they need."""
        scan, files = self.scan, []
        points = dict(zip(scan.files, scan.checkpoints, strict=True)) if scan.checkpoints else {}
        for path, start in files_holding(scan.files, scan.file_docs, first, end):
            files.append(
                (
                    path,
                    start,
                    text_ranges.within(points.get(path, text_ranges.packed()), first - start, end - start),
                )
            )
        tokenizer = storage.join(self.dest, self.tokenizer.file)
        return TextInputs(
            tuple(files), self.reading, scan.class_names, tokenizer, self.tokenizer.fingerprint, self.specials
        )

    def shard_inputs(self, first: int, end: int) -> TextInputs:
        return self._inputs(first, end)

    def pieces(self, tasks: Sequence[Any]) -> Iterator[Piece]:
        """The pieces of all `tasks`; a file without checkpoints is read here once, forward."""
        inputs = self._inputs(0, self.n_items)
        cursor = Cursor(inputs.files, self.reading)
        for task in tasks:
            yield from cut(inputs, task.index, task.first, task.count, cursor)

    def with_schema(self, schema: Schema) -> TextSource:
        return self  # a text record's schema is the kind's own (`text_schema`)


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
        raise ConfigError(f"{src}: a text corpus needs a tokenizer. Pass {TOKENIZER_OPTIONS}.")
    found = text_scan.scan(src, reading, joins.class_names if joins is not None else (), cfg.n_workers)
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
    return TextSource(
        found, reading, file, info, dest, digest, estimate, tuple(notes), tuple(sorted(tok.specials))
    )


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
        for doc in text_reader.read_documents(path, reading):
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
                ids = cast("list[int]", decode_example(record)["tokens"])  # an int64 list
                out.append((ids, tok.decode(ids)))
                if len(out) == count:
                    return out
    return out

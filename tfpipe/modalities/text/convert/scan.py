"""The first pass over a text corpus: every document read and checked before anything is written,
in segments the conversion's workers read side by side (`text_ranges.segments`).

Each segment's task (`scan_segment`) counts its documents and characters, checks them
(invalid UTF-8, JSON lines that do not parse, missing or non-string fields, labels), and marks
checkpoints where the second pass's workers will start reading. The converting process merges
the segments' findings in order (`scan`), so the problems are reported as a reading in order
finds them, every one at once (up to `problems.PROBLEMS_SHOWN`).
"""

from __future__ import annotations

import collections
import dataclasses
import json
from collections.abc import Iterator, Sequence
from typing import Any

from tfpipe import storage
from tfpipe.convert.formats import hfsaved
from tfpipe.convert.parallel import ordered_map
from tfpipe.convert.problems import Problems
from tfpipe.errors import DataError
from tfpipe.format.manifest import SkippedInput
from tfpipe.modalities.text.convert import listing as text_listing
from tfpipe.modalities.text.convert import ranges as text_ranges
from tfpipe.modalities.text.convert import reader as text_reader
from tfpipe.modalities.text.convert.ranges import Marks, Points, Segment, packed, unpacked
from tfpipe.modalities.text.convert.reader import Reading

_INT64 = 2**63


@dataclasses.dataclass(frozen=True, slots=True)
class TextScan:
    """What the first pass learned.

    Attributes:
      files, file_docs, identities: each corpus file, its document count and its identity.
      checkpoints: each file's checkpoints (`text_ranges`); none for a file the converting
        process reads for the workers (compressed, UTF-16/32, gs://, Parquet, Arrow).
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
    checkpoints: tuple[Points, ...] = ()


@dataclasses.dataclass(slots=True)
class Labels:
    """The labels seen: text ones (each with where it was first seen), and the first of each kind."""

    names: dict[str, str] = dataclasses.field(default_factory=dict)
    first_text: str = ""
    first_number: str = ""

    def add(self, label: Any, place: str, problems: Problems, declared: Any, known: tuple[str, ...]) -> None:
        """Takes one document's label; a number must be a class index of the file's ClassLabel
        (`declared`), else of the dataset this split joins (`known`), when they name classes."""
        if isinstance(label, str):
            self.names.setdefault(label, f"{place} ({label!r})")
            self.first_text = self.first_text or f"{place} ({label!r})"
            return
        number = _integral(label)
        if number is None:
            problems.add(f"{place}: expected a label that is text or an integer. Received: {_shown(label)}")
        elif declared is not None and not 0 <= number < len(declared):
            problems.add(
                f"{place}: label {number} is not a class index of the file's ClassLabel "
                f"{list(declared)[:10]} (0..{len(declared) - 1})"
            )
        elif declared is None and known and not 0 <= number < len(known):
            # The dataset names its classes: a number is one of their indices, or nothing.
            problems.add(
                f"{place}: label {number} is not a class index of the dataset this split joins "
                f"({list(known)[:10]}, 0..{len(known) - 1})"
            )
        self.first_number = self.first_number or f"{place} ({label!r})"

    def merge(self, later: Labels) -> None:
        for name, place in later.names.items():
            self.names.setdefault(name, place)
        self.first_text = self.first_text or later.first_text
        self.first_number = self.first_number or later.first_number


def _integral(label: Any) -> int | None:
    if isinstance(label, bool) or not isinstance(label, (int, float)):
        return None
    if isinstance(label, float) and not label.is_integer():
        return None
    return int(label) if -_INT64 <= label < _INT64 else None


def _shown(value: Any) -> str:
    return f"{type(value).__name__} {json.dumps(value, default=str)[:60]}"


@dataclasses.dataclass(frozen=True, slots=True)
class SegmentTask:
    """One segment to scan, and what its documents are checked against: the file's ClassLabel
    names (`declared`), the joined dataset's classes (`known`)."""

    segment: Segment
    reading: Reading
    declared: tuple[str, ...] | None
    known: tuple[str, ...]


@dataclasses.dataclass(slots=True)
class SegmentScan:
    """What one segment holds. `first_line`, `last_line`: its first and last documents' lines;
    `blank`: blank lines between its documents; `problems`, `more`: the first problems found,
    and how many more."""

    docs: int = 0
    chars: int = 0
    textless: int = 0
    blank: int = 0
    first_line: int = 0
    last_line: int = 0
    labels: Labels = dataclasses.field(default_factory=Labels)
    problems: list[str] = dataclasses.field(default_factory=list)
    more: int = 0
    checkpoints: Points = dataclasses.field(default_factory=packed)


def scan_segment(task: SegmentTask) -> SegmentScan:
    """Reads and checks one segment's documents (in a worker, or in the converting process).

    Raises:
      DataError: what stops the file (a damaged gzip or Parquet file, a missing column).
    """
    seg, reading = task.segment, task.reading
    problems, out = Problems(), SegmentScan()
    marks = Marks(seg.ranged)
    jsonl = text_listing.read_as(seg.path) == "jsonl"
    for raw in text_reader.read_raw(seg.path, reading, 0, seg.span):
        marks.see(out.docs, raw.offset, raw.line, len(raw.data or b""))
        out.docs += 1
        if out.docs > 1 and jsonl:
            out.blank += raw.line - out.last_line - 1
        out.first_line = out.first_line or raw.line
        out.last_line = raw.line
        try:
            doc = text_reader.parse(raw, seg.path, reading)
        except DataError as e:
            problems.add(str(e))
            continue
        out.chars += len(doc.text)
        out.textless += not doc.text.strip()
        if reading.label:
            place = text_reader.where(seg.path, doc.line)
            out.labels.add(doc.label, place, problems, task.declared, task.known)
    out.problems, out.more = problems.found, problems.count - len(problems.found)
    out.checkpoints = packed(marks.points)
    return out


@dataclasses.dataclass(slots=True)
class _Totals:
    """The segments' findings, merged in order, file by file."""

    files: int
    docs: list[int] = dataclasses.field(init=False)
    points: list[Points] = dataclasses.field(init=False)
    last_line: list[int] = dataclasses.field(init=False)
    chars: int = 0
    textless: int = 0
    blank: int = 0
    labels: Labels = dataclasses.field(default_factory=Labels)
    problems: Problems = dataclasses.field(default_factory=Problems)

    def __post_init__(self) -> None:
        self.docs, self.points, self.last_line = (
            [0] * self.files,
            [packed() for _ in range(self.files)],
            [0] * self.files,
        )

    def add(self, seg: Segment, found: SegmentScan) -> None:
        i = seg.file
        for p in unpacked(found.checkpoints):
            self.points[i].extend((self.docs[i] + p.doc, p.offset, p.line))
        if found.docs and text_listing.read_as(seg.path) == "jsonl":
            self.blank += found.blank + found.first_line - self.last_line[i] - 1
            self.last_line[i] = found.last_line
        self.docs[i] += found.docs
        self.chars += found.chars
        self.textless += found.textless
        self.labels.merge(found.labels)
        for message in found.problems:
            self.problems.add(message)
        self.problems.count += found.more


def scan(src: str, reading: Reading, known: tuple[str, ...] = (), workers: int = 1) -> TextScan:
    """The first pass over a corpus, on `workers` processes: every document read and checked,
    and counted per file.

    Args:
      known: the class names of the dataset this split joins: text labels keep their indices,
        and a label not among them is refused.

    Raises:
      DataError: every problem found (up to `problems.PROBLEMS_SHOWN`), at once.
    """
    listing = text_listing.list_corpus(src)
    files = listing.files
    declared = _file_labels(files, reading, listing.features)
    identities = tuple(storage.identity(p, checksum=not storage.is_gcs(p)) for p in files)
    tasks = (SegmentTask(s, reading, declared[s.file], known) for s in text_ranges.segments(files, reading))
    totals = _Totals(len(files))
    for task, found in _scanned(tasks, workers):
        totals.add(task.segment, found)
    problems = totals.problems
    names = _class_names(src, totals.labels, declared, known, reading.label, problems)
    error = problems.error(src)
    if error is not None:
        raise error
    _check_documents(src, reading, files, totals)
    points = tuple(totals.points)
    return TextScan(
        files, tuple(totals.docs), identities, listing.skipped, totals.chars, names, totals.blank, points
    )


def _scanned(tasks: Iterator[SegmentTask], workers: int) -> Iterator[tuple[SegmentTask, SegmentScan]]:
    """(task, its scan) of each task, in order, scanned on `workers` processes."""
    held: collections.deque[SegmentTask] = collections.deque()

    def kept(task_iter: Iterator[SegmentTask]) -> Iterator[SegmentTask]:
        for task in task_iter:
            held.append(task)
            yield task

    for found in ordered_map(scan_segment, kept(tasks), workers):
        yield held.popleft(), found


def _check_documents(src: str, reading: Reading, files: Sequence[str], totals: _Totals) -> None:
    """Refuses a corpus of no document, or of documents without text."""
    if not sum(totals.docs):
        raise DataError(f"{src}: expected at least one document. Received: none in {len(files)} file(s)")
    if totals.textless == sum(totals.docs):
        raise DataError(
            f"{src}: expected documents with text. Received: {totals.textless:,} document(s) in "
            f"{len(files)} file(s), every one empty or whitespace only: nothing to tokenize."
            + (
                f" Is the text in another field or column than {reading.text_field!r} (--text-field)?"
                if any(text_listing.read_as(p) != "txt" for p in files)
                else ""
            )
        )


def _file_labels(
    files: Sequence[str], reading: Reading, features: dict[str, Any]
) -> list[tuple[str, ...] | None]:
    """The ClassLabel names each file's numbers are checked against: a Parquet or Arrow file's
    own (a saved dataset's `dataset_info.json` says them, else the file's metadata), the last
    such file's for the files after it.

    Raises:
      DataError: a .txt file with a label option, or files declaring other names.
    """
    out: list[tuple[str, ...] | None] = []
    declared: tuple[str, ...] | None = None
    for path in files:
        kind = text_listing.read_as(path)
        if reading.label and kind == "txt":
            raise DataError(
                f"{path}: a .txt file holds no label. Received: label={reading.label!r} (--label); labels "
                "come from a JSON Lines field or a Parquet column."
            )
        if reading.label and kind in text_listing.COLUMNS:
            names = hfsaved.class_names(features, reading.label) or text_reader.declared_labels(
                path, reading.label
            )
            if declared is not None and names != declared:
                raise DataError(
                    f"{path}: expected the ClassLabel names of the files before it, {list(declared)[:10]}. "
                    f"Received: {None if names is None else list(names)[:10]}"
                )
            declared = names
        out.append(declared)
    return out


def _class_names(
    src: str,
    labels: Labels,
    declared: Sequence[tuple[str, ...] | None],
    known: tuple[str, ...],
    label: str | None,
    problems: Problems,
) -> tuple[str, ...]:
    """Class names by index: text labels (sorted, or the joined dataset's), a ClassLabel's, or
    none for numbers kept as given."""
    if labels.names and labels.first_number:
        problems.add(
            f"{src}: expected labels of one kind in {label!r}: text (class names) or integers. Received: "
            f"text at {labels.first_text} and a number at {labels.first_number}"
        )
    names = declared[-1] if declared else None
    if names is not None:
        # The encoder indexes text labels by these names: one not among them is a problem here.
        undeclared = sorted(labels.names.keys() - set(names))
        if undeclared:
            problems.add(
                f"{src}: label(s) {undeclared[:5]} (first at {labels.names[undeclared[0]]}) are not among the "
                f"ClassLabel names its Parquet file(s) declare for {label!r}: {list(names)[:10]}"
            )
        return names
    if not labels.names:
        return known
    unknown = sorted(labels.names.keys() - set(known)) if known else []
    if unknown:
        problems.add(
            f"{src}: label(s) {unknown[:5]} are not classes of the dataset this split joins "
            f"({list(known)[:10]}{'...' if len(known) > 10 else ''}); its labels keep their numbering."
        )
    return known or tuple(sorted(labels.names))

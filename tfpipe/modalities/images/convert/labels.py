"""Label files of a flat image folder, in the forms people have them.

- One label per line, in sorted file-name order, as ImageNet ships
  `imagenet_2012_validation_synset_labels.txt`.
- `<file> <label>` per line, whitespace or comma separated, with or without a header line, as
  `ILSVRC2012_val_00000001.JPEG n01440764` or Kaggle's `LOC_val_solution.csv`
  (`ImageId,PredictionString` then `ILSVRC2012_val_00008726,n02119789 255 142 454 329`: the
  file named without its extension, and the label followed by box coordinates).

The file is read as text by `textfile` (compressed or not, a byte-order mark dropped). Nothing
is guessed in silence: a line that fits neither form, a file listed twice with two labels, or a
label field holding two labels is refused by line number; a header line and lines naming
files not in the folder are said in the notes. A labels file that gives every image its own
label was misread, and is refused; one that makes more classes than half the images is said.
"""

from __future__ import annotations

import csv
import dataclasses
import os
import re
from collections.abc import Sequence

from tfpipe.convert.formats import textfile
from tfpipe.errors import DataError

WHAT = "a labels file"
_NUMBER = re.compile(r"^[+-]?\d+(\.\d*)?$")  # a box coordinate after a label (Kaggle's boxes)
_INT = re.compile(r"^[+-]?\d+$")
SYNSET_RE = re.compile(r"^n\d{8}$")
"""An ImageNet synset (WordNet ID) such as n01440764."""
MIN_IMAGES_FOR_CLASS_CHECK = 10
"""Below this many images, a label per image may be what the user means."""


@dataclasses.dataclass(frozen=True, slots=True)
class Labels:
    """What a labels file says of a folder's images.

    Attributes:
      labels: the label of each image, in the order of the file names given.
      classes: the distinct labels in label order: sorted, and numerically when all are integers.
      notes: what was read otherwise than line by line (a header, unused lines, integer labels).
    """

    labels: tuple[str, ...]
    classes: tuple[str, ...]
    notes: tuple[str, ...] = ()


def read_labels(path: str, files: Sequence[str], folder: str) -> Labels:
    """The labels of `files` (the image file names of `folder`, sorted) from the labels file.

    Raises:
      DataError: naming the line that does not parse, the files without a label, or a file
        that looks misread (every image its own label).
    """
    rows = _rows(path)
    if not rows:
        raise DataError(f"{path}: expected a label per image of {folder}. Received: an empty file")
    widths = {len(fields) for _, fields in rows}
    if widths - {1, 2}:
        line, fields = next(r for r in rows if len(r[1]) not in (1, 2))
        raise _bad_line(path, line, fields, "1 or 2 fields")
    if len(widths) > 1:
        first = len(rows[0][1])
        line, fields = next(r for r in rows if len(r[1]) != first)
        raise _bad_line(path, line, fields, f"{first} field{'s' if first > 1 else ''}, as line {rows[0][0]}")
    notes: list[str] = []
    if widths == {1}:
        labels = _by_order(path, rows, files, folder, notes)
    else:
        labels = _by_name(path, rows, files, folder, notes)
    classes = _classes(labels, notes, path)
    _check_not_one_per_image(path, folder, labels, classes, notes)
    return Labels(tuple(labels), classes, tuple(notes))


def _rows(path: str) -> list[tuple[int, list[str]]]:
    """(1-based line number, fields) of each non-blank line: comma separated (CSV quoting
    allowed) if any line holds a comma, else whitespace separated."""
    with textfile.open_text(path, None, WHAT, newline="") as f:  # a byte-order mark may say UTF-16
        try:
            text = f.read()
        except UnicodeDecodeError as e:
            raise DataError(
                f"{path}: expected a labels file in UTF-8 (or UTF-16/32 with a byte-order mark). "
                f"Received: bytes {e.object[e.start : e.end]!r} that are not {e.encoding}. Save it as UTF-8."
            ) from None
    lines = text.splitlines()
    if any("," in line for line in lines):
        parsed = [(n, [field.strip() for field in row]) for n, row in enumerate(csv.reader(lines), 1)]
    else:
        parsed = [(n, line.split()) for n, line in enumerate(lines, 1)]
    return [(n, fields) for n, fields in parsed if any(fields)]


def _bad_line(path: str, line: int, fields: list[str], expected: str) -> DataError:
    return DataError(
        f"{path}, line {line}: expected {expected}: '<label>' (one per image, in sorted file-name "
        f"order) or '<file> <label>' (whitespace or comma separated). Received: {len(fields)} "
        f"fields {fields[:4]}"
    )


def _by_order(
    path: str, rows: list[tuple[int, list[str]]], files: Sequence[str], folder: str, notes: list[str]
) -> list[str]:
    """One label per line, for the files in sorted order; a first line more is a header."""
    values = [fields[0] for _, fields in rows]
    shapes = {_shape(v) for v in values[1:]}
    one_shape = len(shapes) == 1 and shapes != {"word"}
    if len(values) == len(files) + 1 and one_shape and _shape(values[0]) not in shapes:
        notes.append(
            f"{path}: line {rows[0][0]} ({values[0]!r}) was read as a header: every other line "
            f"holds {'a synset' if shapes == {'synset'} else 'an integer'}"
        )
        values = values[1:]
    if len(values) != len(files):
        raise DataError(
            f"{path}: expected one label per image of {folder} ({len(files)} images), in sorted "
            f"file-name order. Received: {len(values)} lines"
        )
    return values


def _shape(label: str) -> str:
    """ "synset" (n01440764), "int" or "word": a first line unlike all others is a header."""
    return "synset" if SYNSET_RE.match(label) else "int" if _INT.match(label) else "word"


def _by_name(
    path: str, rows: list[tuple[int, list[str]]], files: Sequence[str], folder: str, notes: list[str]
) -> list[str]:
    """`<file> <label>` lines; a file may be named without its extension, as Kaggle names it."""
    names = _names(files)
    if rows[0][1][0] not in names and any(fields[0] in names for _, fields in rows[1:]):
        notes.append(
            f"{path}: line {rows[0][0]} ({','.join(rows[0][1])!r}) was read as a header: it names no image"
        )
        rows = rows[1:]
    found: dict[str, tuple[int, str]] = {}
    unused = []
    for line, (name, field) in rows:
        label = _one_label(path, line, field)
        file = names.get(name)
        if file is None:
            unused.append(name)
            continue
        before = found.setdefault(file, (line, label))
        if before[1] != label:
            raise DataError(
                f"{path}, line {line}: {name!r} is labelled {label!r}, but line {before[0]} labels "
                f"it {before[1]!r}. Expected one label per image."
            )
    missing = [f for f in files if f not in found]
    if missing:
        raise DataError(f"{path}: no label for {len(missing)} file(s) of {folder}, e.g. {missing[:3]}")
    if unused:
        notes.append(
            f"{path}: {len(unused)} line(s) name files that are not images of {folder} (e.g. "
            f"{unused[:3]}); they were not used"
        )
    return [found[f][1] for f in files]


def _names(files: Sequence[str]) -> dict[str, str]:
    """Each file by its name, and by its name without extension where that is unambiguous."""
    stems: dict[str, list[str]] = {}
    for f in files:
        stems.setdefault(os.path.splitext(f)[0], []).append(f)
    by_stem = {stem: found[0] for stem, found in stems.items() if len(found) == 1}
    return by_stem | {f: f for f in files}


def _one_label(path: str, line: int, field: str) -> str:
    """The label of a label field: one word, or one followed by box coordinates (Kaggle's
    `n02119789 255 142 454 329 n02119789 44 21 322 295`)."""
    words = field.split()
    if not words:
        raise DataError(f"{path}, line {line}: expected a label after the file name. Received: none")
    label, rest = words[0], words[1:]
    other = [w for w in rest if w != label and not _NUMBER.match(w)]
    if other:
        raise DataError(
            f"{path}, line {line}: expected one label per image. Received: {field!r}, which holds "
            f"{[label, *dict.fromkeys(other)][:4]}"
        )
    return label


def _classes(labels: list[str], notes: list[str], path: str) -> tuple[str, ...]:
    """The distinct labels, sorted: numerically when every label is an integer (so 2 comes
    before 10), which the notes say."""
    distinct = set(labels)
    if all(_INT.match(x) for x in distinct):
        notes.append(
            f"{path}: the labels are integers, so classes are numbered in numeric order (2 before "
            "10). If they are ILSVRC2012 IDs (ILSVRC2012_validation_ground_truth.txt), they are not "
            "the sorted synset order of class folders: use the synset labels file instead"
        )
        return tuple(sorted(distinct, key=int))
    return tuple(sorted(distinct))


def _check_not_one_per_image(
    path: str, folder: str, labels: list[str], classes: tuple[str, ...], notes: list[str]
) -> None:
    n, k = len(labels), len(classes)
    if n < MIN_IMAGES_FOR_CLASS_CHECK or 2 * k <= n:
        return
    if k == n:
        raise DataError(
            f"{path}: every one of the {n} images of {folder} has a label of its own ({labels[0]!r}, "
            f"{labels[1]!r}, ...), so the labels file was surely misread. Expected the form "
            "'<label>' or '<file> <label>' per line; if each image really is its own class, "
            "put the images in class folders (SRC/<class>/<image>) instead."
        )
    notes.append(
        f"{path}: {k} classes for {n} images (fewer than 2 images a class); check that the "
        "labels file is the one for this folder"
    )

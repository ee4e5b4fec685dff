"""Image folder sources: `SRC/<class>/<file>` trees and flat ImageNet validation folders.

Inputs are listed, labelled (by sorted class name, or by the class list of the dataset the
split joins) and shuffled with a fixed seed, so every shard mixes classes and the same source
always gives the same plan.

Nothing is left out in silence:
- A class folder's subfolders are searched too, as Keras' `image_dataset_from_directory`
  does: `scenes/2019/a.jpg` is an image of class `scenes`, recorded with the file name
  `2019/a.jpg`. Files are taken in sorted order of their path, so the plan is deterministic.
- A file without an image extension is listed as skipped, with the reason, in the manifest.
- A class folder without any image, a symlink loop, a broken symlink, a FIFO or device, an
  unreadable folder and a file name that is not UTF-8 are errors naming the path. So is a file
  reached twice (a symbolic or hard link to an image listed elsewhere): it would be converted
  twice, perhaps under two labels.
- Hidden names (starting with ".") are ignored, like `.DS_Store` and tfpipe's own files.
"""

from __future__ import annotations

import dataclasses
import os
import random
from collections.abc import Iterator

from tfpipe import storage
from tfpipe.convert.entries import Entry, list_entries
from tfpipe.errors import DataError
from tfpipe.format.manifest import SkippedInput
from tfpipe.modalities.images.convert.decode import IMAGE_EXTENSIONS
from tfpipe.modalities.images.convert.encode import ImageItem
from tfpipe.modalities.images.convert.labels import read_labels


@dataclasses.dataclass(frozen=True, slots=True)
class ImageScan:
    layout: str
    items: tuple[ImageItem, ...]
    class_names: tuple[str, ...]
    label_offset: int
    estimated_bytes: int
    skipped: tuple[SkippedInput, ...] = ()  # inputs left out when listing, with the reason
    identities: tuple[str, ...] = ()  # each item's `storage.identity`, in the order of `items`
    notes: tuple[str, ...] = ()  # what the summary says of how the source was read


def _walk(
    folder: str, seen: dict[tuple[int, int], str], parents: tuple[tuple[int, int], ...] = ()
) -> Iterator[Entry]:
    """Every visible file under `folder`, named by its path relative to it, sorted by path.

    `seen` maps the folders walked so far (device, inode) to their path: a folder reached a
    second time through a symbolic link, a loop or not, is an error instead of a duplicate.
    """
    if storage.is_gcs(folder):
        for rel, _, size, identity in storage.gcs_entries(folder, recursive=True):
            if not any(part.startswith(".") for part in rel.split("/")):
                yield Entry(rel, False, size, identity)
        return
    node = _visit(folder, seen, parents)
    yield from _walk_local(folder, "", (*parents, node), seen)


def _inode(path: str) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def _visit(
    path: str, seen: dict[tuple[int, int], str], ancestors: tuple[tuple[int, int], ...]
) -> tuple[int, int]:
    node = _inode(path)
    if node in ancestors:
        raise DataError(f"{path}: a symlink loop (it leads back to {seen.get(node, 'a folder above it')})")
    if node in seen:
        raise DataError(
            f"{path}: the same folder as {seen[node]}, reached twice through a symbolic link; "
            "its images would be converted twice. Remove one of the two."
        )
    seen[node] = path
    return node


def _walk_local(
    folder: str, rel: str, ancestors: tuple[tuple[int, int], ...], seen: dict[tuple[int, int], str]
) -> Iterator[Entry]:
    here = os.path.join(folder, rel) if rel else folder
    for entry in list_entries(here):
        child = f"{rel}/{entry.name}" if rel else entry.name
        if not entry.is_dir:
            yield entry._replace(name=child)
            continue
        node = _visit(os.path.join(folder, child), seen, ancestors)
        yield from _walk_local(folder, child, (*ancestors, node), seen)


def is_image_name(name: str) -> bool:
    return os.path.splitext(name)[1].lower() in IMAGE_EXTENSIONS


def _not_an_image(path: str) -> SkippedInput:
    ext = os.path.splitext(path)[1] or "(none)"
    known = " ".join(sorted(IMAGE_EXTENSIONS))
    return SkippedInput(path, f"not an image file: extension {ext} is not one of {known}")


# ---- scans ----


def scan_class_folders(
    src: str, layout: str, label_offset: int, seed: int, class_names: tuple[str, ...] = ()
) -> ImageScan:
    """Lists `src/<class>/**/<image>`; labels are label_offset + the class's index.

    Args:
      class_names: the class list of the dataset this split joins. Its numbering is kept,
        so a synset has the same label in every split; a class folder not in it is refused.
        Empty: the sorted names of the class folders.
    """
    entries = list_entries(src)
    classes = [e.name for e in entries if e.is_dir]
    if not classes:
        raise DataError(f"{src}: expected class folders (SRC/<class>/<image>). Received: none")
    names = tuple(class_names) or tuple(classes)
    index = {c: i for i, c in enumerate(names)}
    unknown = [c for c in classes if c not in index]
    if unknown:
        raise DataError(
            f"{src}: class folder(s) {unknown[:5]} are not among the {len(names)} classes of the "
            f"dataset this split joins ({', '.join(names[:5])}{', ...' if len(names) > 5 else ''}). "
            "Labels must mean the same class in every split: convert into a new destination."
        )
    skipped = [
        SkippedInput(storage.join(src, e.name), "not inside a class folder") for e in entries if not e.is_dir
    ]
    listed: list[tuple[ImageItem, str]] = []
    files: dict[tuple[int, int], str] = {}  # (device, inode) -> the path it was first listed under
    total = 0
    top = () if storage.is_gcs(src) else (_inode(src),)
    seen = dict.fromkeys(top, src)
    for cls in classes:
        folder = storage.join(src, cls)
        found = 0
        for entry in _walk(folder, seen, top):
            path = storage.join(folder, *entry.name.split("/"))
            if not is_image_name(entry.name):
                skipped.append(_not_an_image(path))
                continue
            _refuse_second_link(path, entry, files)
            listed.append((ImageItem(path, label_offset + index[cls], cls, entry.name), entry.identity))
            total += entry.size
            found += 1
        if not found:
            raise DataError(
                f"{folder}: class folder holds no image files ({', '.join(sorted(IMAGE_EXTENSIONS))}). "
                "A class without examples is almost always a mistake: add images or remove the folder."
            )
    random.Random(seed).shuffle(listed)
    items, identities = tuple(i for i, _ in listed), tuple(d for _, d in listed)
    return ImageScan(layout, items, names, label_offset, total, tuple(skipped), identities)


def _refuse_second_link(path: str, entry: Entry, files: dict[tuple[int, int], str]) -> None:
    """Refuses a file listed before under another path (a symbolic or hard link to it)."""
    if entry.node is None:
        return
    first = files.setdefault(entry.node, path)
    if first != path:
        raise DataError(
            f"{path}: the same file as {first} (a symbolic or hard link to it). Expected each "
            "image once: it would be converted twice, under the label of each folder. Remove "
            "one of the two."
        )


def scan_validation(
    src: str, labels_file: str, label_offset: int, class_names: tuple[str, ...] = ()
) -> ImageScan:
    """A flat folder plus a labels file, as ImageNet ships its validation split.

    The labels file (`labels.read_labels`) has one line per image: either just the label, in
    sorted file-name order (`imagenet_2012_validation_synset_labels.txt`), or `<file> <label>`,
    whitespace or comma separated, with or without a header. Labels number the classes as
    `class_names` does (the train split's, when it is already in the destination), else the
    sorted labels of the file.
    """
    entries = list_entries(src)
    folders = [e.name for e in entries if e.is_dir]
    if folders:
        raise DataError(
            f"{src}: expected a flat folder of images with --labels (labels_file). "
            f"Received: subfolders {folders[:5]}. Drop --labels for a class-folder tree."
        )
    images = [e for e in entries if is_image_name(e.name)]
    nodes: dict[tuple[int, int], str] = {}
    for e in images:
        _refuse_second_link(storage.join(src, e.name), e, nodes)
    skipped = tuple(_not_an_image(storage.join(src, e.name)) for e in entries if not is_image_name(e.name))
    found = read_labels(labels_file, [e.name for e in images], src)
    names = class_names or found.classes
    index = {s: i for i, s in enumerate(names)}
    unknown = sorted(set(found.classes) - set(index))
    if unknown:
        raise DataError(
            f"{labels_file}: labels {unknown[:5]} are not among the {len(names)} classes of the dataset"
        )
    items = [
        ImageItem(storage.join(src, e.name), label_offset + index[s], s)
        for e, s in zip(images, found.labels, strict=True)
    ]
    total = sum(e.size for e in images)
    identities = tuple(e.identity for e in images)
    return ImageScan(
        "imagenet", tuple(items), tuple(names), label_offset, total, skipped, identities, found.notes
    )

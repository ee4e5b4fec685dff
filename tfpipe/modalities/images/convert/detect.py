"""How `--format auto` finds image folders (convert/detect.py weighs every modality's answers):
class folders (`imagenet` when every folder is named like an ImageNet synset, labels from 1;
`images` when none is, labels from 0; a mix is refused), or a flat folder of images given a
labels file (ImageNet's validation layout). A split folder (`val/`) of images without class
folders needs its labels file (`split_folder`)."""

from __future__ import annotations

from collections.abc import Sequence

from tfpipe.convert.kind import Folder, FormatChoice
from tfpipe.errors import DataError
from tfpipe.modalities.images.convert.folders import is_image_name
from tfpipe.modalities.images.convert.labels import SYNSET_RE

EXPECTS = "class folders of images, a flat image folder with --labels"


def class_folders(folder: Folder) -> FormatChoice | None:
    """Class folders: synset-named (labels from 1, as imagenet_to_gcs) or not (from 0).

    Raises:
      DataError: some folders named like synsets and some not: a mix would shift every label.
    """
    dirs = folder.dirs
    if not dirs:
        return None
    synsets = [d for d in dirs if SYNSET_RE.match(d)]
    if len(synsets) == len(dirs):
        return FormatChoice(
            "imagenet",
            f"all {len(dirs)} class folders are named like ImageNet synsets "
            "(n01440764), so labels count from 1 as in imagenet_to_gcs",
        )
    if not synsets:
        return FormatChoice(
            "images", f"{len(dirs)} class folders, not named like ImageNet synsets, so labels count from 0"
        )
    odd = [d for d in dirs if not SYNSET_RE.match(d)]
    raise DataError(
        f"{folder.path}: {len(synsets)} class folders are named like ImageNet synsets (n01440764) but "
        f"{len(odd)} are not: {odd[:5]}. A mix would shift every label, so tfpipe will not guess. "
        "Move the odd folder(s) out of the source, or pass --format imagenet (format='imagenet', "
        "labels from 1) or --format images (format='images', labels from 0)."
    )


def labelled_flat_folder(folder: Folder) -> FormatChoice | None:
    if folder.labels_file and any(is_image_name(n) for n in folder.files):
        return FormatChoice("imagenet", "a flat folder of images with a labels file (ImageNet validation)")
    return None


def split_folder(name: str, entries: Sequence[tuple[str, bool]]) -> tuple[str, str] | None:
    """A split folder holding images, not class folders, needs a labels file."""
    if any(is_dir for _, is_dir in entries) or not any(is_image_name(n) for n, _ in entries):
        return None
    return " --labels FILE", f"{name}/ holds images, not class folders: FILE labels each"

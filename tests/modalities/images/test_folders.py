"""Image folder trees that are not plain `SRC/<class>/<image>`: nested folders, stray files,
empty classes, mixed layouts, later splits, special files and bad names. Nothing is dropped
in silence: each is converted and counted, listed as skipped with a reason, or refused by name."""

import os
import shutil

import pytest

import tfpipe
from tfpipe.convert.detect import detect_format, explain_format
from tfpipe.errors import DataError, DestinationError
from tfpipe.format.manifest import Manifest
from tfpipe.testing import fake_data

import support.cli
from support.cli import as_unprivileged
from support.records import split_records as records

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SIZE = (32, 24)
SYNSETS = fake_data.class_names(3)


def by_filename(manifest, split="train"):
    """{(synset, image/filename): label}."""
    return {
        (r["image/class/synset"][0].decode(), r["image/filename"][0].decode()): int(r["image/class/label"][0])
        for r in records(manifest, split)
    }


def run_cli(*args, prefix=()):
    out = support.cli.run_cli(*args, prefix=prefix)
    return out.returncode, out.stdout, out.stderr


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "src"
    fake_data.write_image_folder(root, classes=3, per_class=[3, 2, 4], size=SIZE)
    return root


# ---- subfolders of class folders, stray files, empty classes ----


def test_a_class_whose_images_are_all_undecodable_is_said_loudly(tree, tmp_path):
    from tfpipe.convert import EmptyClassWarning

    second = sorted(p for p in tree.iterdir())[1]
    for image in second.iterdir():
        image.write_bytes(b"not a jpeg")
    with pytest.warns(
        EmptyClassWarning,
        match=rf"class '{second.name}' has 0 examples in split 'train': "
        r"all 2 of its image files were skipped as undecodable",
    ):
        manifest = tfpipe.convert(str(tree), str(tmp_path / "out"), workers=1)
    assert manifest.class_names[1] == second.name and len(manifest.class_names) == 3
    labels = sorted(int(r["image/class/label"][0]) for r in records(manifest))
    assert labels == [1, 1, 1, 3, 3, 3, 3]  # the other classes keep their labels


@pytest.mark.slow
def test_subfolders_of_a_class_are_converted_and_counted(tree, tmp_path):
    """`scenes/2019/*.jpg` used to be dropped with "0 skipped"; now it is found, as in Keras."""
    nested = tree / SYNSETS[1] / "2019" / "deeper"
    fake_data.write_image_folder(tmp_path / "more", classes=1, per_class=3, size=SIZE, seed=5)
    os.makedirs(nested)
    for i, name in enumerate(sorted(os.listdir(tmp_path / "more" / SYNSETS[0]))):
        shutil.copy(tmp_path / "more" / SYNSETS[0] / name, nested.parent if i == 0 else nested)
    (tree / SYNSETS[1] / "notes.txt").write_text("not an image")
    (tree / "README.md").write_text("about the data")
    (tree / SYNSETS[2] / ".DS_Store").write_bytes(b"hidden")
    m = tfpipe.convert(str(tree), str(tmp_path / "out"), num_shards=2, workers=1)
    got = by_filename(m)
    assert len(got) == 9 + 3 and m.splits["train"].examples == 12
    assert got[(SYNSETS[1], f"2019/{SYNSETS[0]}_0.JPEG")] == 2  # the label of the class folder
    assert got[(SYNSETS[1], f"2019/deeper/{SYNSETS[0]}_1.JPEG")] == 2
    assert got[(SYNSETS[1], f"2019/deeper/{SYNSETS[0]}_2.JPEG")] == 2
    skipped = {s.input: s.reason for s in m.splits["train"].skipped}
    assert skipped == {
        str(tree / "README.md"): "not inside a class folder",
        str(tree / SYNSETS[1] / "notes.txt"): skipped[str(tree / SYNSETS[1] / "notes.txt")],
    }
    assert skipped[str(tree / SYNSETS[1] / "notes.txt")].startswith(
        "not an image file: extension .txt is not one of"
    )
    # The plan does not depend on how the tree was walked: the same bytes every time.
    again = tfpipe.convert(str(tree), str(tmp_path / "again"), num_shards=2, workers=2)
    assert [s.checksum for s in again.splits["train"].shards] == [
        s.checksum for s in m.splits["train"].shards
    ]
    code, out, _ = run_cli("convert", str(tree), str(tmp_path / "cli"), "--num-shards", "2", "--quiet")
    assert code == 0 and "converted 12 examples into 2 shards" in out and "2 skipped" in out
    assert f"skipped {tree / SYNSETS[1] / 'notes.txt'}: not an image file" in out


def test_a_class_folder_without_images_is_an_error_naming_it(tree, tmp_path):
    empty = tree / "n09999999"
    os.makedirs(empty / "sub")
    (empty / "sub" / "readme.txt").write_text("x")
    with pytest.raises(DataError, match=r"n09999999: class folder holds no image files"):
        tfpipe.convert(str(tree), str(tmp_path / "out"), num_shards=2, workers=1)
    assert not os.path.exists(tmp_path / "out")  # the failed run removed the folder it made


# ---- the layout auto-detection ----


def test_one_non_synset_folder_is_refused_by_name(tree, tmp_path):
    """An earlier output folder inside SRC once switched auto to `images` and every label by one."""
    os.makedirs(tree / "old_out")
    (tree / "old_out" / "x.JPEG").write_bytes((tree / SYNSETS[0] / f"{SYNSETS[0]}_0.JPEG").read_bytes())
    with pytest.raises(
        DataError,
        match=r"3 class folders are named like ImageNet synsets .* but 1 are not: "
        r"\['old_out'\].*--format imagenet \(format='imagenet'",
    ):
        tfpipe.convert(str(tree), str(tmp_path / "out"), num_shards=2, workers=1)
    m = tfpipe.convert(str(tree), str(tmp_path / "out"), num_shards=2, workers=1, format="imagenet")
    assert m.class_names == (*SYNSETS, "old_out") and m.label_offset == 1
    assert m.splits["train"].options["format"] == "imagenet"


@pytest.mark.slow
def test_auto_says_which_layout_and_why(tree, tmp_path):
    choice = explain_format(str(tree))
    assert (
        choice.format == "imagenet" and "all 3 class folders are named like ImageNet synsets" in choice.reason
    )
    code, out, _ = run_cli("convert", str(tree), str(tmp_path / "o"), "--num-shards", "2", "--quiet")
    assert code == 0
    assert (
        Manifest.load(str(tmp_path / "o")).splits["train"].options["format_reason"]
        == "auto: " + choice.reason
    )
    assert out.splitlines()[0] == (
        f"{tree}: format imagenet (auto: all 3 class folders are named like ImageNet synsets (n01440764), "
        "so labels count from 1 as in imagenet_to_gcs); 9 images into 2 shards"
    )
    pets = tmp_path / "pets"
    fake_data.write_image_folder(pets, classes=2, per_class=2, size=SIZE, imagenet_names=False)
    assert "not named like ImageNet synsets, so labels count from 0" in explain_format(str(pets)).reason
    code, out, _ = run_cli("convert", str(pets), str(tmp_path / "p"), "--format", "images", "--quiet")
    assert code == 0 and out.startswith(f"{pets}: format images (given); 4 images into 1 shard")


def test_dest_inside_src_is_refused(tree):
    with pytest.raises(DestinationError, match="Expected a destination outside the source"):
        tfpipe.convert(str(tree), str(tree / "out"), num_shards=2)
    assert not os.path.exists(tree / "out") and detect_format(str(tree)) == "imagenet"


# ---- a later split keeps the dataset's class numbering ----


@pytest.mark.parametrize("imagenet_names", [True, False])
def test_later_split_reuses_the_class_list(tmp_path, imagenet_names):
    names = fake_data.class_names(3, imagenet_names=imagenet_names)
    train, val, dest = tmp_path / "train", tmp_path / "val", str(tmp_path / "out")
    fake_data.write_image_folder(
        train, classes=3, per_class=[2, 3, 2], size=SIZE, imagenet_names=imagenet_names
    )
    fake_data.write_image_folder(
        val, classes=3, per_class=[2, 1, 3], size=SIZE, imagenet_names=imagenet_names, seed=9
    )
    shutil.rmtree(val / names[1])  # validation holds 2 of train's 3 classes
    first = tfpipe.convert(str(train), dest, num_shards=2, workers=1)
    m = tfpipe.convert(str(val), dest, split="validation", num_shards=2, workers=1)
    assert m.class_names == first.class_names == tuple(names)
    offset = 1 if imagenet_names else 0
    train_labels = {s: lab for (s, _), lab in by_filename(m, "train").items()}
    val_labels = {s: lab for (s, _), lab in by_filename(m, "validation").items()}
    assert train_labels == {n: offset + i for i, n in enumerate(names)}
    assert val_labels == {names[0]: offset, names[2]: offset + 2}  # not renumbered 0..1
    assert Manifest.load(dest).class_names == tuple(names)


def test_later_split_with_an_unknown_class_is_refused_by_name(tmp_path):
    train, val, dest = tmp_path / "train", tmp_path / "val", str(tmp_path / "out")
    fake_data.write_image_folder(train, classes=2, per_class=2, size=SIZE)
    fake_data.write_image_folder(val, classes=3, per_class=1, size=SIZE)
    tfpipe.convert(str(train), dest, workers=1)
    with pytest.raises(DataError, match=rf"class folder\(s\) \['{SYNSETS[2]}'\] are not among the 2 classes"):
        tfpipe.convert(str(val), dest, split="validation", workers=1)
    assert set(Manifest.load(dest).splits) == {"train"}


# ---- special files, loops and names: one line, never a hang or a traceback ----


@pytest.mark.slow
def test_fifo_among_the_images_is_refused_not_read(tree, tmp_path):
    os.mkfifo(tree / SYNSETS[0] / "pipe.JPEG")
    code, _, err = run_cli("convert", str(tree), str(tmp_path / "o"), "--quiet")
    assert code == 1 and err.count("\n") == 1, err
    assert (
        f"{tree / SYNSETS[0] / 'pipe.JPEG'}: expected files and folders. Received: a FIFO (named pipe)" in err
    )


def test_fifo_swapped_in_after_listing_is_refused_by_the_reader(tmp_path):
    from tfpipe.modalities.images.convert.encode import ImageItem, ImageTask, encode_images
    from tfpipe.storage import StorageError

    os.mkfifo(tmp_path / "late.JPEG")
    with pytest.raises(StorageError, match=r"late.JPEG: expected a regular file. Received: a FIFO"):
        encode_images(ImageTask((ImageItem(str(tmp_path / "late.JPEG"), 1, "n0"),), None, 90))


@pytest.mark.slow
def test_symlink_loops_and_broken_links_are_named(tree, tmp_path):
    os.symlink("..", tree / SYNSETS[0] / "up")  # the class folder's parent: a loop
    with pytest.raises(DataError, match=rf"{SYNSETS[0]}/up: a symlink loop \(it leads back to {tree}\)"):
        tfpipe.convert(str(tree), str(tmp_path / "out"), workers=1)
    os.remove(tree / SYNSETS[0] / "up")
    os.symlink(f"../{SYNSETS[1]}", tree / SYNSETS[0] / "also")  # another class: its images twice
    with pytest.raises(
        DataError, match=rf"{SYNSETS[1]}: the same folder as .*/{SYNSETS[0]}/also, reached twice"
    ):
        tfpipe.convert(str(tree), str(tmp_path / "out"), workers=1)
    os.remove(tree / SYNSETS[0] / "also")
    os.symlink("self.JPEG", tree / SYNSETS[0] / "self.JPEG")
    with pytest.raises(
        DataError, match=r"self.JPEG: .*a symbolic link loop: .*self.JPEG -> self.JPEG, which is where"
    ):
        tfpipe.convert(str(tree), str(tmp_path / "out"), workers=1)
    os.remove(tree / SYNSETS[0] / "self.JPEG")
    os.symlink("gone.JPEG", tree / SYNSETS[0] / "dangling.JPEG")
    code, _, err = run_cli("convert", str(tree), str(tmp_path / "o"), "--quiet")
    assert (
        code == 1
        and "dangling.JPEG: expected files and folders. Received: a broken symbolic link: " in err
        and "dangling.JPEG -> gone.JPEG, which does not exist" in err
        and err.count("\n") == 1
    )


def test_symlinked_class_folders_are_followed(tree, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    shutil.move(str(tree / SYNSETS[2]), elsewhere)
    os.symlink(elsewhere, tree / SYNSETS[2])
    m = tfpipe.convert(str(tree), str(tmp_path / "out"), workers=1)
    assert m.splits["train"].examples == 9


@pytest.mark.slow
def test_file_name_not_utf8_is_one_line(tree, tmp_path):
    bad = os.path.join(os.fsencode(tree / SYNSETS[0]), b"caf\xe9.JPEG")
    with open(bad, "wb") as f:
        f.write((tree / SYNSETS[0] / f"{SYNSETS[0]}_0.JPEG").read_bytes())
    code, _, err = run_cli("convert", str(tree), str(tmp_path / "o"), "--quiet")
    assert code == 1 and err.count("\n") == 1, err
    assert "a file name is not valid UTF-8: b'caf\\xe9.JPEG'" in err


@pytest.mark.slow
def test_unreadable_class_folder_is_one_line(tree, tmp_path):
    locked = tree / SYNSETS[1]
    locked.chmod(0o000)
    try:
        code, _, err = run_cli("convert", str(tree), str(tmp_path / "o"), "--quiet", prefix=as_unprivileged())
    finally:
        locked.chmod(0o755)
    assert code == 1 and err.count("\n") == 1, err
    assert f"{locked}: cannot list the folder: Permission denied" in err

"""Label files of flat validation folders in the forms people have them (ImageNet's, Kaggle's,
comma or whitespace separated, with or without a header, saved with a byte-order mark), and
sources of split folders (train/, val/). Each is converted with every image under its own
label, or refused naming the line or the commands that convert it."""

import os
import shlex

import pytest

from tfpipe.cli import main
from tfpipe.format.manifest import Manifest
from tfpipe.testing import fake_data

from support.records import nothing_written
from support.records import split_records as records

SIZE = (16, 12)


@pytest.fixture(scope="module")
def flat(tmp_path_factory):
    """A flat folder of 12 images of 3 classes, and the truth: {file name: synset}."""
    root = tmp_path_factory.mktemp("flat")
    pairs = fake_data.write_validation_flat(
        root / "val", root / "synsets.txt", classes=3, count=12, size=SIZE
    )
    return root / "val", {os.path.basename(p): s for p, s in pairs}


def convert(capsys, src, dest, *flags):
    code = main(["convert", str(src), str(dest), "--quiet", "--workers", "1", *map(str, flags)])
    out = capsys.readouterr()
    return code, out.out, out.err


def labelled(dest, split="train"):
    """{image/filename: synset}, and the manifest's class names."""
    m = Manifest.load(str(dest))
    recs = records(m, split)
    return {r["image/filename"][0].decode(): r["image/class/synset"][0].decode() for r in recs}, m


def _lines(truth, fmt, order=sorted):
    return "".join(fmt(name, synset) for name, synset in ((n, truth[n]) for n in order(truth)))


FORMS = {
    # the case: comma separated, no header
    "comma": lambda t: _lines(t, lambda n, s: f"{n},{s}\n"),
    "comma_header": lambda t: "filename,synset\n" + _lines(t, lambda n, s: f"{n},{s}\n"),
    "whitespace": lambda t: _lines(t, lambda n, s: f"{n} {s}\n"),
    "tab_crlf": lambda t: _lines(t, lambda n, s: f"{n}\t{s}\r\n"),
    # Kaggle's LOC_val_solution.csv: names without extension, boxes after the synset, any order
    "kaggle": lambda t: (
        "ImageId,PredictionString\n"
        + _lines(
            t,
            lambda n, s: f"{os.path.splitext(n)[0]},{s} 12 3 40 50 {s} 1 2 3 4 \n",
            order=lambda t: sorted(t, reverse=True),
        )
    ),
    # imagenet_2012_validation_synset_labels.txt, with a header line
    "synsets_header": lambda t: "synset\n" + _lines(t, lambda n, s: f"{s}\n"),
    "synsets_bom": lambda t: "\ufeff" + _lines(t, lambda n, s: f"{s}\n"),
    "comma_bom": lambda t: "\ufeff" + _lines(t, lambda n, s: f"{n},{s}\n"),
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_every_label_file_form_labels_every_image_as_the_truth(flat, tmp_path, capsys, form):
    folder, truth = flat
    (tmp_path / "labels.txt").write_text(FORMS[form](truth), encoding="utf-8", newline="")
    code, out, err = convert(capsys, folder, tmp_path / "out", "--labels", tmp_path / "labels.txt")
    assert code == 0, err
    got, m = labelled(tmp_path / "out")
    assert got == truth
    assert m.class_names == tuple(sorted(set(truth.values())))  # no '\ufeffn01440764' class
    if form in ("comma_header", "kaggle", "synsets_header"):
        assert "was read as a header" in out and "was read as a header" in " ".join(m.split("train").notes)


@pytest.mark.parametrize(
    "text,said",
    [
        ("{0} n01440764 extra\n", "line 1: expected 1 or 2 fields"),
        ("{0},n01440764\nn01441764\n", "line 2: expected 2 fields, as line 1"),
        (
            "{0},n01440764 17 n01441764\n",
            "line 1: expected one label per image. Received: 'n01440764 17 n01441764'",
        ),
        (
            "{0},n01440764\n{0},n01441764\n",
            "line 2: '{0}' is labelled 'n01441764', but line 1 labels it 'n01440764'",
        ),
        ("{0},\n", "line 1: expected a label after the file name"),
    ],
)
def test_a_line_that_does_not_parse_is_refused_naming_the_line(flat, tmp_path, capsys, text, said):
    folder, truth = flat
    first = sorted(truth)[0]
    rest = "".join(f"{n},{truth[n]}\n" for n in sorted(truth)[1:])
    body = text.format(first) + (rest if "," in text else rest.replace(",", " "))
    (tmp_path / "labels.txt").write_text(body)
    code, _, err = convert(capsys, folder, tmp_path / "out", "--labels", tmp_path / "labels.txt")
    assert code == 1 and said.format(first) in err, err
    assert nothing_written(tmp_path / "out")


def test_a_labels_file_that_gives_every_image_its_own_label_is_refused(flat, tmp_path, capsys):
    """One file name per line (a listing saved by mistake) reads as one label per image."""
    folder, truth = flat
    (tmp_path / "labels.txt").write_text("".join(f"{n}\n" for n in sorted(truth)))
    code, _, err = convert(capsys, folder, tmp_path / "out", "--labels", tmp_path / "labels.txt")
    assert code == 1 and "every one of the 12 images" in err and "was surely misread" in err
    assert nothing_written(tmp_path / "out")


def test_many_classes_for_few_images_integer_labels_and_unused_lines_are_said(flat, tmp_path, capsys):
    folder, truth = flat
    names = sorted(truth)
    ints = {n: str([2, 10, 3, 4, 5, 6, 7][i % 7]) for i, n in enumerate(names)}  # 7 classes for 12 images
    body = "".join(f"{n} {ints[n]}\n" for n in names) + "ILSVRC2012_val_00099999.JPEG 3\n"
    (tmp_path / "labels.txt").write_text(body)
    code, out, err = convert(capsys, folder, tmp_path / "out", "--labels", tmp_path / "labels.txt")
    assert code == 0, err
    got, m = labelled(tmp_path / "out")
    assert got == ints and m.class_names == ("2", "3", "4", "5", "6", "7", "10")  # numeric order
    notes = " ".join(m.split("train").notes)
    assert "7 classes for 12 images" in notes and "numeric order (2 before 10)" in notes
    assert "1 line(s) name files that are not images" in notes and "ILSVRC2012_val_00099999.JPEG" in notes
    assert "7 classes for 12 images" in out


# ---- split folders ----


@pytest.fixture
def splits(tmp_path):
    root = tmp_path / "data"
    fake_data.write_image_folder(root / "train", classes=3, per_class=[3, 2, 2], size=SIZE)
    pairs = fake_data.write_validation_flat(root / "val", tmp_path / "val.txt", classes=3, count=5, size=SIZE)
    return root, pairs


def test_split_folders_are_refused_with_the_commands_that_convert_them(splits, tmp_path, capsys):
    root, pairs = splits
    dest = tmp_path / "out"
    code, _, err = convert(capsys, root, dest, "--num-shards", "2", "--resize-shorter", "64")
    assert code == 1 and "split folders ['train', 'val']" in err, err
    assert nothing_written(dest)
    commands = [
        line.split("#")[0].strip() for line in err.splitlines() if line.startswith("  tfpipe convert ")
    ]
    flags = "--num-shards 2 --workers 1 --resize-shorter 64"
    assert commands == [
        f"tfpipe convert {root / 'train'} {dest} --split train {flags}",
        f"tfpipe convert {root / 'val'} {dest} --split validation --labels FILE {flags}",
    ]
    for command in commands:  # as a user would run them
        args = [a if a != "FILE" else str(tmp_path / "val.txt") for a in shlex.split(command)[2:]]
        assert main(["convert", *args, "--quiet"]) == 0
    m = Manifest.load(str(dest))
    assert sorted(m.splits) == ["train", "validation"] and m.class_names == tuple(fake_data.class_names(3))
    got, _ = labelled(dest, "validation")
    assert got == {os.path.basename(p): s for p, s in pairs}


def test_split_folders_of_tables_are_refused_too(tmp_path, capsys):
    for split in ("train", "test"):
        (tmp_path / "t" / split).mkdir(parents=True)
        (tmp_path / "t" / split / "a.csv").write_text("x,y\n1,0\n")
    code, _, err = convert(capsys, tmp_path / "t", tmp_path / "out", "--label", "y")
    assert (
        code == 1
        and f"tfpipe convert {tmp_path / 't' / 'test'} {tmp_path / 'out'} --split test --workers 1 --label y"
        in err
    )


def test_a_class_named_like_a_split_beside_other_classes_is_a_class(tmp_path, capsys):
    fake_data.write_image_folder(tmp_path / "src", classes=2, per_class=2, size=SIZE, imagenet_names=False)
    fake_data.write_image_folder(
        tmp_path / "more" / "test", classes=1, per_class=2, size=SIZE, imagenet_names=False
    )
    os.rename(tmp_path / "more" / "test" / "class_000", tmp_path / "src" / "test")
    code, _, err = convert(capsys, tmp_path / "src", tmp_path / "out")
    assert code == 0, err
    assert Manifest.load(str(tmp_path / "out")).class_names == ("class_000", "class_001", "test")


def test_a_labels_file_in_utf16_with_its_mark_reads_and_latin1_is_refused(flat, tmp_path, capsys):
    """Notepad's "Unicode" is UTF-16 with a mark; its "ANSI" is cp1252."""
    folder, truth = flat
    (tmp_path / "u16.txt").write_bytes(FORMS["comma"](truth).encode("utf-16"))
    code, _, err = convert(capsys, folder, tmp_path / "out", "--labels", tmp_path / "u16.txt")
    assert code == 0, err
    assert labelled(tmp_path / "out")[0] == truth
    (tmp_path / "latin.txt").write_bytes(FORMS["comma"](truth).replace("n0", "é0", 1).encode("latin-1"))
    code, _, err = convert(capsys, folder, tmp_path / "out2", "--labels", tmp_path / "latin.txt")
    assert code == 1 and "expected a labels file in UTF-8" in err and "b'\\xe9'" in err

"""--resume refuses inputs that changed since the interrupted run listed them, by name; a table
that changes during a run is never committed. Real runs, stopped and killed with signals."""

import os
import signal
import sys
import time

import pandas as pd
import pytest

import tfpipe
from tfpipe.convert.writer import PAUSE_ENV
from tfpipe.testing import fake_data

from support.cli import start_cli, wait_paused

# Every test here runs `tfpipe convert` as a process it stops, edits under and resumes.
pytestmark = pytest.mark.slow


def convert(src, dest, *extra, pause=None):
    env = {PAUSE_ENV: pause} if pause else {}
    return start_cli("convert", src, dest, "--num-shards", 4, "--workers", 1, "--quiet", *extra, env=env)


def killed_after_one_shard(src, dest):
    proc = convert(src, dest, pause="shard-committed")
    wait_paused(proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert not (dest / "tfpipe.json").exists()


def rewrite_keeping_size_and_mtime(path, old, new):
    st = os.stat(path)
    text = path.read_text()
    assert len(old) == len(new) and text.count(old) == 1
    path.write_text(text.replace(old, new))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # as `cp -p` or `rsync -t` leave it
    assert os.stat(path).st_size == st.st_size


@pytest.fixture
def table(tmp_path):
    path = tmp_path / "t.csv"
    pd.DataFrame({"id": range(1000, 1037), "label": ["cat", "dog"] * 18 + ["cat"]}).to_csv(path, index=False)
    return path


def test_resume_refuses_a_table_whose_row_was_replaced(tmp_path, table):
    dest = tmp_path / "out"
    killed_after_one_shard(table, dest)
    rewrite_keeping_size_and_mtime(table, "1030,cat", "1030,dog")  # same count, size and mtime
    resumed = convert(table, dest, "--resume")
    _, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 1
    assert f"1 input(s) changed: {table} (was size=" in err and "crc32c=" in err
    assert "--overwrite" in err and not (dest / "tfpipe.json").exists()
    done = convert(table, dest, "--overwrite")
    assert done.wait(120) == 0


def test_resume_refuses_an_image_rewritten_under_its_name(tmp_path):
    src = tmp_path / "photos"
    fake_data.write_image_folder(src, classes=2, per_class=[5, 6], size=(32, 24))
    dest = tmp_path / "out"
    killed_after_one_shard(src, dest)
    image = sorted((src / fake_data.class_names(2)[1]).iterdir())[0]
    data = image.read_bytes()
    time.sleep(0.01)
    image.write_bytes(data[:-2] + b"\xff\xd9")  # another version of the file, a new mtime
    resumed = convert(src, dest, "--resume")
    _, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 1 and f"1 input(s) changed: {image} (was size=" in err


def test_resume_of_unchanged_inputs_finishes(tmp_path, table):
    dest = tmp_path / "out"
    killed_after_one_shard(table, dest)
    resumed = convert(table, dest, "--resume")
    assert resumed.wait(120) == 0
    assert tfpipe.Manifest.load(str(dest)).split("train").examples == 37


def test_a_table_changed_during_the_run_is_not_committed(tmp_path, table):
    dest = tmp_path / "out"
    proc = convert(table, dest, pause="shard-committed")
    wait_paused(proc)
    with open(table, "a") as f:  # another writer appends while the run is stopped
        f.write("2000,cat\n")
    proc.send_signal(signal.SIGCONT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and f"{table}: changed during the conversion" in err
    assert not (dest / "tfpipe.json").exists()


@pytest.mark.parametrize(
    "first,second", [("relative", "absolute"), ("absolute", "relative"), ("symlink", "relative")]
)
def test_resume_compares_resolved_paths_not_their_spelling(tmp_path, monkeypatch, capsys, first, second):
    """The source and the labels file named `val` once and `/abs/path/val` the next time are
    the same inputs: the resume continues, and writes what one uninterrupted run writes."""
    import hashlib

    from tfpipe.cli import main
    from tfpipe.convert import writer

    fake_data.write_validation_flat(
        tmp_path / "data" / "val", tmp_path / "data" / "labels.txt", classes=3, count=9, size=(16, 12)
    )
    (tmp_path / "link").symlink_to(tmp_path / "data")
    monkeypatch.chdir(tmp_path / "data")
    spelled = {
        "relative": ("val", "labels.txt"),
        "absolute": (str(tmp_path / "data" / "val"), str(tmp_path / "data" / "labels.txt")),
        "symlink": (str(tmp_path / "link" / "val"), str(tmp_path / "link" / "labels.txt")),
    }

    def run(spelling, dest, *flags):
        src, labels = spelled[spelling]
        return main(
            [
                "convert",
                src,
                str(dest),
                "--labels",
                labels,
                "--num-shards",
                "3",
                "--workers",
                "1",
                "--quiet",
                *flags,
            ]
        )

    real = writer.pause_point

    def stop_after_first_shard(name):
        if name == "shard-committed":
            raise KeyboardInterrupt
        real(name)

    with monkeypatch.context() as patch:
        for name, module in list(sys.modules.items()):
            if name.startswith("tfpipe.convert") and getattr(module, "pause_point", None) is real:
                patch.setattr(module, "pause_point", stop_after_first_shard)
        assert run(first, tmp_path / "out") == 130
    assert not (tmp_path / "out" / "tfpipe.json").exists()
    assert run(second, tmp_path / "out", "--resume") == 0, capsys.readouterr().err
    assert run("absolute", tmp_path / "straight") == 0

    def shards(dest):
        return {
            n: hashlib.sha256((dest / n).read_bytes()).hexdigest()
            for n in os.listdir(dest)
            if n.startswith("train-")
        }

    assert shards(tmp_path / "out") == shards(tmp_path / "straight") and len(shards(tmp_path / "out")) == 3

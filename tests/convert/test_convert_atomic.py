"""Atomic shards, kill -9 and resume, and refusing destinations that already hold data."""

import os
import signal
import time

import numpy as np
import pandas as pd
import pytest

import tfpipe
from tfpipe.errors import DestinationError
from tfpipe.format.decode import decode_example
from tfpipe.format.manifest import Manifest
from tfpipe.format.tfrecord import read_records
from tfpipe.format.verify import verify

from support.cli import run_cli, start_cli

ROWS, SHARDS = 60_000, 24


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    path = tmp_path_factory.mktemp("src") / "t.parquet"
    rng = np.random.default_rng(0)
    pd.DataFrame(
        {
            "id": np.arange(ROWS),
            "f": rng.normal(size=ROWS),
            "s": [f"text {i}" for i in range(ROWS)],
            "y": rng.integers(0, 10, ROWS),
        }
    ).to_parquet(path)
    return str(path)


@pytest.fixture(scope="module")
def reference(table, tmp_path_factory):
    """The same conversion, never interrupted."""
    return tfpipe.convert(
        table, str(tmp_path_factory.mktemp("ref")), num_shards=SHARDS, workers=1, chunk_rows=500
    )


def ids_in(path):
    with open(path, "rb") as f:
        return [decode_example(r)["id"][0] for r in read_records(f, where=path)]


def convert_args(table, dest, *extra):
    """The arguments of a `tfpipe convert` of `table` into SHARDS shards."""
    return ("convert", table, dest, "--num-shards", SHARDS, *extra)


def start_convert(table, dest, *extra):
    return start_cli(*convert_args(table, dest, "--workers", "1", "--quiet", *extra))


def kill_after_done(proc, dest, shard_index, timeout=120):
    marker = os.path.join(dest, f".train-{shard_index:05d}-of-{SHARDS:05d}.done")
    deadline = time.monotonic() + timeout
    while not os.path.exists(marker):
        assert proc.poll() is None, f"convert ended before shard {shard_index} was done: {proc.communicate()}"
        assert time.monotonic() < deadline, "convert made no progress"
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def assert_nothing_wrong_visible(dest):
    """What a reader would see after a crash: no manifest, and every visible shard complete."""
    assert not os.path.exists(os.path.join(dest, "tfpipe.json"))
    visible = sorted(n for n in os.listdir(dest) if not n.startswith("."))
    assert all(n.startswith("train-") for n in visible)
    per_shard = ROWS // SHARDS
    for name in visible:
        index = int(name.split("-")[1])
        assert ids_in(os.path.join(dest, name)) == list(range(index * per_shard, (index + 1) * per_shard))
    return visible


@pytest.mark.slow
def test_kill9_then_resume_gives_every_row_exactly_once(table, reference, tmp_path):
    dest = str(tmp_path / "out")
    proc = start_convert(table, dest, "--chunk-rows", "500")
    kill_after_done(proc, dest, 2)
    assert len(assert_nothing_wrong_visible(dest)) >= 3

    refused = run_cli(*convert_args(table, dest, "--chunk-rows", "500"))
    assert refused.returncode == 1
    assert "interrupted conversion of split 'train'" in refused.stderr and "--resume" in refused.stderr

    proc = start_convert(table, dest, "--chunk-rows", "500", "--resume")
    kill_after_done(proc, dest, 9)
    assert_nothing_wrong_visible(dest)

    manifest = tfpipe.convert(table, dest, num_shards=SHARDS, workers=2, chunk_rows=500, resume=True)
    assert manifest.splits["train"].examples == ROWS
    assert [s.checksum for s in manifest.splits["train"].shards] == [
        s.checksum for s in reference.splits["train"].shards
    ]
    assert verify(dest).ok
    ids = [i for p in manifest.shard_paths("train") for i in ids_in(p)]
    assert sorted(ids) == list(range(ROWS))
    assert sorted(os.listdir(dest)) == sorted(
        ["tfpipe.json"] + [s.name for s in manifest.splits["train"].shards]
    )


@pytest.mark.slow
def test_shard_committed_without_done_record_is_rewritten(table, reference, tmp_path):
    """The window between a shard's rename and its done-record: resume redoes that shard."""
    dest = str(tmp_path / "out")
    proc = start_convert(table, dest, "--chunk-rows", "500")
    kill_after_done(proc, dest, 4)
    os.remove(os.path.join(dest, f".train-00004-of-{SHARDS:05d}.done"))
    with open(os.path.join(dest, f"train-00004-of-{SHARDS:05d}"), "r+b") as f:
        f.truncate(100)  # even a damaged file under the final name is replaced
    manifest = tfpipe.convert(table, dest, num_shards=SHARDS, workers=1, chunk_rows=500, resume=True)
    assert [s.checksum for s in manifest.splits["train"].shards] == [
        s.checksum for s in reference.splits["train"].shards
    ]


@pytest.mark.slow
def test_resume_with_other_options_refused(table, tmp_path):
    dest = str(tmp_path / "out")
    proc = start_convert(table, dest, "--chunk-rows", "500")
    kill_after_done(proc, dest, 0)
    with pytest.raises(DestinationError, match=r"same source and options.*n_shards was 24, now 12"):
        tfpipe.convert(table, dest, num_shards=12, chunk_rows=500, resume=True)
    with pytest.raises(DestinationError, match="interrupted conversion"):
        tfpipe.convert(table, dest, num_shards=SHARDS, chunk_rows=500)
    manifest = tfpipe.convert(table, dest, num_shards=12, chunk_rows=500, overwrite=True)
    assert len(manifest.splits["train"].shards) == 12
    assert sorted(n for n in os.listdir(dest) if not n.startswith(".")) == sorted(
        ["tfpipe.json"] + [s.name for s in manifest.splits["train"].shards]
    )


@pytest.mark.slow
def test_finished_destination_refused_unless_overwrite(tmp_path):
    src = tmp_path / "t.csv"
    pd.DataFrame({"a": range(37)}).to_csv(src, index=False)
    dest = str(tmp_path / "out")
    first = tfpipe.convert(str(src), dest, num_shards=4)
    with pytest.raises(
        DestinationError,
        match=r"already holds a finished dataset with split 'train' \(37 examples\).*--overwrite",
    ):
        tfpipe.convert(str(src), dest, num_shards=4)
    assert Manifest.load(dest) == first
    again = tfpipe.convert(str(src), dest, num_shards=3, overwrite=True)
    assert [s.name for s in again.splits["train"].shards] == [f"train-0000{i}-of-00003" for i in range(3)]
    assert sorted(os.listdir(dest)) == sorted(["tfpipe.json"] + [f"train-0000{i}-of-00003" for i in range(3)])
    cli = run_cli("convert", src, dest)
    assert cli.returncode == 1 and "already holds a finished dataset" in cli.stderr


def test_stray_shards_without_a_plan_are_not_adopted(tmp_path):
    src = tmp_path / "t.csv"
    pd.DataFrame({"a": range(5)}).to_csv(src, index=False)
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "train-00000-of-00001").write_bytes(b"junk")
    with pytest.raises(DestinationError, match="1 shard file"):
        tfpipe.convert(str(src), str(dest))
    assert tfpipe.convert(str(src), str(dest), overwrite=True).splits["train"].examples == 5


def test_gzip_shards_are_named_gz_and_read_by_tf(tmp_path):
    from tfpipe._tf import tf as load

    tf = load()
    src = tmp_path / "t.csv"
    pd.DataFrame({"a": range(37)}).to_csv(src, index=False)
    m = tfpipe.convert(str(src), str(tmp_path / "out"), num_shards=4, compression="gzip")
    assert all(s.name.endswith(".gz") for s in m.splits["train"].shards)
    ds = tf.data.TFRecordDataset(m.shard_paths("train"), compression_type="GZIP")
    parsed = [tf.io.parse_single_example(r, m.schema.parse_spec())["a"].numpy() for r in ds]
    assert sorted(parsed) == list(range(37))
    assert verify(str(tmp_path / "out")).ok

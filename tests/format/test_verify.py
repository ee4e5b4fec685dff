"""`tfpipe inspect --verify` names every mismatch by shard and record index, and exits non-zero."""

import json
import os

import pandas as pd
import pytest

import tfpipe
from tfpipe.format.tfrecord import frame_record
from tfpipe.format.verify import verify

from support.cli import run_cli


@pytest.fixture
def dataset(tmp_path):
    src = tmp_path / "t.csv"
    pd.DataFrame({"a": range(37), "s": [f"v{i}" for i in range(37)]}).to_csv(src, index=False)
    dest = tmp_path / "out"
    m = tfpipe.convert(str(src), str(dest), num_shards=4, workers=1)
    return dest, m


def run_verify(dest):
    return run_cli("inspect", dest, "--verify")


@pytest.mark.slow
def test_clean_dataset_verifies(dataset):
    dest, m = dataset
    report = verify(str(dest))
    assert report.ok and [c.records for c in report.shards] == [10, 9, 9, 9]
    assert all(s.checksum.startswith("crc32c:") for s in m.splits["train"].shards)
    out = run_verify(dest)
    assert out.returncode == 0 and "verify: 4 of 4 shards ok" in out.stdout


@pytest.mark.slow
def test_flipped_byte_names_shard_and_record(dataset):
    dest, _ = dataset
    path = dest / "train-00002-of-00004"
    data = bytearray(path.read_bytes())
    record_len = len(data) // 9
    data[record_len * 4 + 20] ^= 0x40  # inside record 4's payload
    path.write_bytes(bytes(data))
    report = verify(str(dest))
    assert not report.ok
    assert any(
        p.startswith("train-00002-of-00004: record 4 has corrupt data (CRC mismatch)")
        for p in report.problems
    )
    assert any("checksum mismatch" in p for p in report.problems)
    out = run_verify(dest)
    assert out.returncode == 1
    assert (
        "train/train-00002-of-00004: 4 records FAILED" in out.stdout
        and "verify: 3 of 4 shards ok" in out.stdout
    )


def test_truncated_missing_and_miscounted_shards(dataset):
    dest, _ = dataset
    first = dest / "train-00000-of-00004"
    first.write_bytes(first.read_bytes()[:-5])
    os.remove(dest / "train-00001-of-00004")
    extra = dest / "train-00003-of-00004"
    extra.write_bytes(extra.read_bytes() + frame_record(b"\x0a\x00"))
    problems = "\n".join(verify(str(dest)).problems)
    assert "train-00000-of-00004: record 9 is truncated" in problems
    assert "train-00001-of-00004: missing or unreadable" in problems
    assert "train-00003-of-00004: found 10 records, where the manifest says 9" in problems


def test_checksum_only_mismatch(dataset):
    dest, _ = dataset
    obj = json.loads((dest / "tfpipe.json").read_text())
    obj["splits"]["train"]["shards"][3]["checksum"] = "crc32c:00000000"
    (dest / "tfpipe.json").write_text(json.dumps(obj))
    problems = verify(str(dest)).problems
    assert len(problems) == 1 and problems[0].startswith(
        "train-00003-of-00004: checksum mismatch: manifest crc32c:00000000"
    )


@pytest.mark.slow
def test_swapped_shards_with_the_same_count_fail_naming_whose_bytes(dataset):
    dest, _ = dataset
    one, two = dest / "train-00001-of-00004", dest / "train-00002-of-00004"  # 9 records each
    a, b = one.read_bytes(), two.read_bytes()
    one.write_bytes(b)
    two.write_bytes(a)
    report = verify(str(dest))
    assert [c.records for c in report.shards] == [10, 9, 9, 9]
    assert [c.name for c in report.shards if not c.ok] == ["train-00001-of-00004", "train-00002-of-00004"]
    assert any(
        p.startswith("train-00001-of-00004: checksum mismatch")
        and p.endswith("(the file holds the bytes of shard train-00002-of-00004: swapped or copied)")
        for p in report.problems
    )
    out = run_verify(dest)
    assert out.returncode == 1 and "verify: 2 of 4 shards ok" in out.stdout


@pytest.mark.slow
def test_manifest_listing_a_shard_twice_fails_verify(dataset):
    """It once said "4 of 4 shards ok" for a manifest with shard 0 twice and shard 1 dropped."""
    dest, _ = dataset
    obj = json.loads((dest / "tfpipe.json").read_text())
    shards = obj["splits"]["train"]["shards"]
    shards[1] = dict(shards[0])
    obj["splits"]["train"]["examples"] = sum(s["examples"] for s in shards)
    (dest / "tfpipe.json").write_text(json.dumps(obj))
    out = run_verify(dest)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.strip() == (
        f"tfpipe inspect: error: {dest / 'tfpipe.json'}: split 'train' lists shard(s) "
        "['train-00000-of-00004'] more than once; each shard must appear once "
        "(a reader would yield its records twice)"
    )


@pytest.mark.slow
def test_fifo_in_place_of_a_shard_fails_without_hanging(dataset):
    dest, _ = dataset
    os.remove(dest / "train-00001-of-00004")
    os.mkfifo(dest / "train-00001-of-00004")
    out = run_verify(dest)  # it hung, on the FIFO's open
    assert out.returncode == 1
    assert "train-00001-of-00004: expected a regular file. Received: a FIFO (named pipe)" in out.stdout
    assert "verify: 3 of 4 shards ok" in out.stdout

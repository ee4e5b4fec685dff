"""`tfpipe inspect --verify` names every mismatch by shard and record index, and exits non-zero."""

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

import tfpipe
from tfpipe.codec import frame_record
from tfpipe.verify import verify


@pytest.fixture
def dataset(tmp_path):
    src = tmp_path / "t.csv"
    pd.DataFrame({"a": range(37), "s": [f"v{i}" for i in range(37)]}).to_csv(src, index=False)
    dest = tmp_path / "out"
    m = tfpipe.convert(str(src), str(dest), num_shards=4, workers=1)
    return dest, m


def run_verify(dest):
    return subprocess.run([sys.executable, "-m", "tfpipe", "inspect", str(dest), "--verify"],
                          capture_output=True, text=True)


def test_clean_dataset_verifies(dataset):
    dest, m = dataset
    report = verify(str(dest))
    assert report.ok and [c.records for c in report.shards] == [10, 9, 9, 9]
    assert all(s.checksum.startswith("crc32c:") for s in m.splits["train"].shards)
    out = run_verify(dest)
    assert out.returncode == 0 and "verify: 4 of 4 shards ok" in out.stdout


def test_flipped_byte_names_shard_and_record(dataset):
    dest, _ = dataset
    path = dest / "train-00002-of-00004"
    data = bytearray(path.read_bytes())
    record_len = len(data) // 9
    data[record_len * 4 + 20] ^= 0x40  # inside record 4's payload
    path.write_bytes(bytes(data))
    report = verify(str(dest))
    assert not report.ok
    assert any(p.startswith("train-00002-of-00004: record 4 has corrupt data (CRC mismatch)") for p in report.problems)
    assert any("checksum mismatch" in p for p in report.problems)
    out = run_verify(dest)
    assert out.returncode == 1
    assert "train/train-00002-of-00004: 4 records FAILED" in out.stdout and "verify: 3 of 4 shards ok" in out.stdout


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
    assert "train-00003-of-00004: expected 9 records (manifest), found 10" in problems


def test_checksum_only_mismatch(dataset):
    dest, _ = dataset
    obj = json.loads((dest / "tfpipe.json").read_text())
    obj["splits"]["train"]["shards"][3]["checksum"] = "crc32c:00000000"
    (dest / "tfpipe.json").write_text(json.dumps(obj))
    problems = verify(str(dest)).problems
    assert len(problems) == 1 and problems[0].startswith("train-00003-of-00004: checksum mismatch: manifest crc32c:00000000")

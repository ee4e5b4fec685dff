"""The commit a retried or duplicated Beam bundle relies on: storage.commit_file with its
does-not-exist precondition, where the same bytes already there are success and other bytes
an error. Local files and gs:// objects (through the local GCS twin, whose proxy enforces the
upload's precondition). Plus the missing-extra error when Apache Beam is absent.
"""

import os
import pathlib

import pytest

from tfpipe import storage

from support.gcs_faults import lose_commit_reply
from support.without import run_without


def spooled(tmp_path, data, name="attempt"):
    path = tmp_path / f".{name}.tmp"
    path.write_bytes(data)
    return str(path)


def test_local_first_commit_moves_the_file(tmp_path):
    dest = str(tmp_path / "train-00000-of-00001")
    tmp = spooled(tmp_path, b"shard bytes")
    storage.commit_file(tmp, dest)
    assert pathlib.Path(dest).read_bytes() == b"shard bytes" and not os.path.exists(tmp)


def test_local_duplicate_with_same_bytes_is_success_and_leaves_no_temporary(tmp_path):
    dest = str(tmp_path / "train-00000-of-00001")
    storage.commit_file(spooled(tmp_path, b"shard bytes", "a"), dest)
    second = spooled(tmp_path, b"shard bytes", "b")
    storage.commit_file(second, dest)
    assert pathlib.Path(dest).read_bytes() == b"shard bytes"
    assert sorted(os.listdir(tmp_path)) == ["train-00000-of-00001"]


def test_local_duplicate_with_other_bytes_is_an_error_and_keeps_the_first(tmp_path):
    dest = str(tmp_path / "train-00000-of-00001")
    storage.commit_file(spooled(tmp_path, b"shard bytes", "a"), dest)
    with pytest.raises(storage.AlreadyExists, match=r"train-00000-of-00001 already exists, with other bytes"):
        storage.commit_file(spooled(tmp_path, b"other bytes", "b"), dest)
    assert pathlib.Path(dest).read_bytes() == b"shard bytes"
    assert sorted(os.listdir(tmp_path)) == [".b.tmp", "train-00000-of-00001"]  # the caller's file is left


@pytest.mark.gcs
def test_gcs_duplicate_same_bytes_is_success_other_bytes_an_error(gcs_bucket, local_gcs, tmp_path):
    dest = gcs_bucket + "/out/train-00000-of-00001"
    with local_gcs.recording() as requests:
        storage.commit_file(spooled(tmp_path, b"shard bytes", "a"), dest)
        storage.commit_file(spooled(tmp_path, b"shard bytes", "b"), dest)
    uploads = [r for r in requests if r.method == "POST" and "uploadType" in r.path]
    assert len(uploads) == 2 and all("ifGenerationMatch=0" in r.path for r in uploads)
    assert [r.status for r in uploads] == [200, 412]  # the second met the precondition
    with pytest.raises(storage.AlreadyExists, match="already exists"):
        storage.commit_file(spooled(tmp_path, b"other bytes", "c"), dest)
    assert storage.read_bytes(dest) == b"shard bytes"
    assert os.listdir(tmp_path) == [".c.tmp"]


@pytest.mark.gcs
def test_gcs_lost_reply_then_retry_is_success(gcs_bucket, local_gcs, tmp_path):
    dest = gcs_bucket + "/out/train-00000-of-00001"
    with lose_commit_reply(local_gcs) as lost:
        storage.commit_file(spooled(tmp_path, b"shard bytes"), dest)
    assert lost.served == 1 and storage.read_bytes(dest) == b"shard bytes"


@pytest.mark.slow
def test_import_and_the_local_engine_never_load_beam(tmp_path):
    out = run_without(
        "apache_beam",
        f"""
        import tfpipe
        from tfpipe.testing import fake_data
        fake_data.write_image_folder({str(tmp_path / "src")!r}, classes=2, per_class=[2, 3], size=(16, 16))
        m = tfpipe.convert({str(tmp_path / "src")!r}, {str(tmp_path / "out")!r}, num_shards=2, workers=1)
        assert "apache_beam" not in sys.modules
        print("examples", m.splits["train"].examples)
    """,
        tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["examples", "5"]


@pytest.mark.slow
def test_the_beam_engine_without_beam_names_the_extra(tmp_path):
    out = run_without(
        "apache_beam",
        f"""
        import os
        import tfpipe
        from tfpipe.testing import fake_data
        fake_data.write_image_folder({str(tmp_path / "src")!r}, classes=2, per_class=[2, 3], size=(16, 16))
        try:
            tfpipe.convert({str(tmp_path / "src")!r}, {str(tmp_path / "out")!r}, engine="beam")
        except tfpipe.TfpipeError as e:
            print(type(e).__name__, "|", e)
        print("left", os.path.exists({str(tmp_path / "out")!r}))
    """,
        tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("MissingExtraError | engine='beam' (--engine beam) needs Apache Beam")
    assert 'pip install "tfpipe[beam]"' in out.stdout and "No module named 'apache_beam'" in out.stdout
    assert out.stdout.strip().endswith("left False")  # refused before the destination is made

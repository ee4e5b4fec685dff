"""convert and inspect on gs://, end to end through the local GCS emulator (no mocks):
tfpipe.storage writes through google-cloud-storage, TensorFlow's own gs:// code reads."""

import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

import tfpipe
from tfpipe import storage
from tfpipe.errors import DestinationError
from tfpipe.manifest import Manifest
from tfpipe.testing import fake_data
from tfpipe.verify import verify

pytestmark = pytest.mark.gcs


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("gcs_src") / "train"
    fake_data.write_image_folder(root, classes=3, per_class=[4, 3, 5], size=(48, 32))
    odd = fake_data.write_oddities(root, classes=fake_data.class_names(3), generic=False)
    return str(root), odd


@pytest.fixture(scope="module")
def local_reference(tree, tmp_path_factory):
    return tfpipe.convert(tree[0], str(tmp_path_factory.mktemp("local_ref")), num_shards=3, workers=1)


def test_convert_to_gcs_matches_local_and_tf_reads_it(tree, local_reference, gcs_bucket, local_gcs):
    from tfpipe._tf import tf as load

    tf = load()
    dest = gcs_bucket + "/imagenet"
    with local_gcs.recording() as requests:
        m = tfpipe.convert(tree[0], dest, num_shards=3, workers=2)
    assert [s.checksum for s in m.splits["train"].shards] == [s.checksum for s in local_reference.splits["train"].shards]
    assert {s.input.rsplit("/", 1)[1] for s in m.splits["train"].skipped} == \
        {os.path.basename(tree[1][k]) for k in fake_data.UNDECODABLE_ODDITIES}
    uploads = [r for r in requests if r.method == "POST" and "uploadType" in r.path]
    assert uploads and all("ifGenerationMatch=0" in r.path for r in uploads if "train-" in r.path)
    assert storage.listdir(dest) == ["tfpipe.json", "train-00000-of-00003", "train-00001-of-00003", "train-00002-of-00003"]

    loaded = Manifest.load(dest)
    assert loaded == m
    assert tf.io.gfile.glob(dest + "/train-*") == loaded.shard_paths("train")
    via_gcs = [r.numpy() for r in tf.data.TFRecordDataset(loaded.shard_paths("train"))]
    via_disk = [r.numpy() for r in tf.data.TFRecordDataset(local_reference.shard_paths("train"))]
    assert len(via_gcs) == 16 and via_gcs == via_disk
    labels = [int(tf.io.parse_single_example(r, loaded.schema.parse_spec())["image/class/label"]) for r in via_gcs]
    assert set(labels) == {1, 2, 3}
    assert verify(dest).ok
    with pytest.raises(DestinationError, match="already holds a finished dataset"):
        tfpipe.convert(tree[0], dest, num_shards=3)


def test_transient_errors_are_retried(tree, gcs_bucket, local_gcs, local_reference):
    # Object names travel in multipart bodies, so the faults match upload and download paths.
    with local_gcs.inject_faults(503, count=2, methods=("POST",), path_contains="uploadType", route="plain") as up:
        m = tfpipe.convert(tree[0], gcs_bucket + "/retry", num_shards=3, workers=1)
    assert up.served == 2
    assert [s.checksum for s in m.splits["train"].shards] == [s.checksum for s in local_reference.splits["train"].shards]
    with local_gcs.inject_faults(429, count=2, methods=("GET",), path_contains="alt=media", route="plain") as down:
        assert verify(gcs_bucket + "/retry").ok
    assert down.served == 2


def test_lost_upload_reply_is_not_a_conflict(tree, gcs_bucket, local_gcs, local_reference):
    """The shard landed but its reply was lost: the retry meets the precondition (412), finds the
    same bytes there, and goes on."""
    with local_gcs.recording() as requests, \
            local_gcs.inject_faults(503, count=1, methods=("POST",), path_contains="ifGenerationMatch=0",
                                    route="plain", lose_reply=True) as lost:
        m = tfpipe.convert(tree[0], gcs_bucket + "/lost", num_shards=3, workers=1)
    assert lost.served == 1
    assert any(r.status == 412 for r in requests)
    assert [s.checksum for s in m.splits["train"].shards] == [s.checksum for s in local_reference.splits["train"].shards]


def test_kill9_and_resume_on_gcs(gcs_bucket, local_gcs, tmp_path):
    rows, shards = 40_000, 16
    src = tmp_path / "t.parquet"
    pd.DataFrame({"id": range(rows), "s": [f"row {i}" for i in range(rows)]}).to_parquet(src)
    dest = gcs_bucket + "/table"
    proc = subprocess.Popen([sys.executable, "-m", "tfpipe", "convert", str(src), dest, "--num-shards", str(shards),
                             "--workers", "1", "--chunk-rows", "500", "--quiet"],
                            env=os.environ | local_gcs.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    marker = f"{dest}/.train-00001-of-{shards:05d}.done"
    deadline = time.monotonic() + 120
    while not storage.exists(marker):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    visible = [n for n in storage.listdir(dest) if not n.startswith(".")]
    assert "tfpipe.json" not in visible and visible, visible
    m = tfpipe.convert(str(src), dest, num_shards=shards, chunk_rows=500, resume=True)
    assert m.splits["train"].examples == rows and verify(dest).ok
    assert [n for n in storage.listdir(dest) if n.startswith(".")] == []

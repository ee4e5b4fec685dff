"""convert and inspect on gs://, end to end through the local GCS emulator (no mocks):
tfpipe.storage writes through google-cloud-storage, TensorFlow's own gs:// code reads."""

import glob
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time

import pandas as pd
import pytest

import tfpipe
from tfpipe import storage
from tfpipe.convert import spool
from tfpipe.errors import DestinationError
from tfpipe.format import commit_markers
from tfpipe.format.manifest import Manifest
from tfpipe.format.verify import verify
from tfpipe.testing import fake_data

from support.cli import run_cli, start_cli
from support.gcs_faults import lose_commit_reply

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
    assert [s.checksum for s in m.splits["train"].shards] == [
        s.checksum for s in local_reference.splits["train"].shards
    ]
    assert {s.input.rsplit("/", 1)[1] for s in m.splits["train"].skipped} == {
        os.path.basename(tree[1][k]) for k in fake_data.UNDECODABLE_ODDITIES
    }
    uploads = [r for r in requests if r.method == "POST" and "uploadType" in r.path]
    assert uploads and all("ifGenerationMatch=0" in r.path for r in uploads if "train-" in r.path)
    assert storage.listdir(dest) == [
        commit_markers.COMMITS_DIR,  # the committed split's marker (tfpipe/format/commit_markers.py)
        "tfpipe.json",
        "train-00000-of-00003",
        "train-00001-of-00003",
        "train-00002-of-00003",
    ]

    loaded = Manifest.load(dest)
    assert loaded == m
    assert tf.io.gfile.glob(dest + "/train-*") == loaded.shard_paths("train")
    via_gcs = [r.numpy() for r in tf.data.TFRecordDataset(loaded.shard_paths("train"))]
    via_disk = [r.numpy() for r in tf.data.TFRecordDataset(local_reference.shard_paths("train"))]
    assert len(via_gcs) == 16 and via_gcs == via_disk
    labels = [
        int(tf.io.parse_single_example(r, loaded.schema.parse_spec())["image/class/label"]) for r in via_gcs
    ]
    assert set(labels) == {1, 2, 3}
    assert verify(dest).ok
    with pytest.raises(DestinationError, match="already holds a finished dataset"):
        tfpipe.convert(tree[0], dest, num_shards=3)


def test_shard_uploads_overlap_and_the_bytes_stay_the_same(
    tree, gcs_bucket, local_gcs, tmp_path, monkeypatch
):
    # Each request waits 150 ms for its first byte, so uploads made one after another never
    # overlap; the local engine's overlap, and the bytes are a local conversion's.
    from tfpipe.convert import engine

    reference = tfpipe.convert(tree[0], str(tmp_path / "local"), num_shards=6, workers=1)

    def convert_peak(name: str) -> tuple[tfpipe.Manifest, int]:
        local_gcs.peak_in_flight(reset=True)
        with local_gcs.shaped(first_byte_ms=150):
            m = tfpipe.convert(tree[0], f"{gcs_bucket}/{name}", num_shards=6, workers=1)
        return m, local_gcs.peak_in_flight()

    m, peak = convert_peak("overlapped")
    assert [s.checksum for s in m.splits["train"].shards] == [
        s.checksum for s in reference.splits["train"].shards
    ]
    assert [storage.read_bytes(f) for f in m.shard_paths("train")] == [
        pathlib.Path(f).read_bytes() for f in reference.shard_paths("train")
    ]
    most = engine.GCS_UPLOADS_IN_FLIGHT
    monkeypatch.setattr(engine, "GCS_UPLOADS_IN_FLIGHT", 0)
    _, one_at_a_time = convert_peak("one-at-a-time")
    # One at a time, an upload meets at most one other request (google-cloud-storage's own).
    assert one_at_a_time <= 2 < 3 <= peak <= most + 2, (peak, one_at_a_time)


def test_transient_errors_are_retried(tree, gcs_bucket, local_gcs, local_reference):
    # Object names travel in multipart bodies, so the faults match upload and download paths.
    with local_gcs.inject_faults(
        503, count=2, methods=("POST",), path_contains="uploadType", route="plain"
    ) as up:
        m = tfpipe.convert(tree[0], gcs_bucket + "/retry", num_shards=3, workers=1)
    assert up.served == 2
    assert [s.checksum for s in m.splits["train"].shards] == [
        s.checksum for s in local_reference.splits["train"].shards
    ]
    with local_gcs.inject_faults(
        429, count=2, methods=("GET",), path_contains="alt=media", route="plain"
    ) as down:
        assert verify(gcs_bucket + "/retry").ok
    assert down.served == 2


def test_lost_upload_reply_is_not_a_conflict(tree, gcs_bucket, local_gcs, local_reference):
    """The shard landed but its reply was lost: the retry meets the precondition (412), finds the
    same bytes there, and goes on."""
    with (
        local_gcs.recording() as requests,
        lose_commit_reply(local_gcs) as lost,
    ):
        m = tfpipe.convert(tree[0], gcs_bucket + "/lost", num_shards=3, workers=1)
    assert lost.served == 1
    assert any(r.status == 412 for r in requests)
    assert [s.checksum for s in m.splits["train"].shards] == [
        s.checksum for s in local_reference.splits["train"].shards
    ]


@pytest.mark.slow
def test_kill9_and_resume_on_gcs(gcs_bucket, local_gcs, tmp_path):
    rows, shards = 40_000, 16
    src = tmp_path / "t.parquet"
    pd.DataFrame({"id": range(rows), "s": [f"row {i}" for i in range(rows)]}).to_parquet(src)
    dest = gcs_bucket + "/table"
    proc = start_cli(
        "convert",
        src,
        dest,
        "--num-shards",
        shards,
        "--workers",
        1,
        "--chunk-rows",
        500,
        "--quiet",
        env=local_gcs.env,
    )
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
    spools = glob.glob(os.path.join(tempfile.gettempdir(), spool.spool_prefix(dest) + "*"))
    assert spools, "the killed run's spool folder is what --resume must clean up"
    m = tfpipe.convert(str(src), dest, num_shards=shards, chunk_rows=500, resume=True)
    assert m.splits["train"].examples == rows and verify(dest).ok
    assert [n for n in storage.listdir(dest) if n.startswith(".")] == [commit_markers.COMMITS_DIR]
    assert not any(os.path.exists(p) for p in spools)


# ---- gs:// image sources ----


def upload_tree(local_root, url):
    """Copies a local folder tree to gs:// through tfpipe.storage; returns {object url: bytes}."""
    out = {}
    for folder, _, files in os.walk(local_root):
        for name in files:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, local_root).replace(os.sep, "/")
            data = pathlib.Path(path).read_bytes()
            storage.write_atomic(f"{url}/{rel}", data)
            out[f"{url}/{rel}"] = data
    return out


@pytest.fixture(scope="module")
def gcs_image_source(local_gcs, tmp_path_factory):
    """A 3-class tree with distinct images (no oddities) in its own bucket."""
    root = tmp_path_factory.mktemp("gcs_img") / "src"
    fake_data.write_image_folder(root, classes=3, per_class=[9, 8, 10], size=(40, 30))
    bucket = local_gcs.create_bucket(f"tfpipe-imgsrc-{os.getpid()}")
    return str(root), bucket + "/train", upload_tree(root, bucket + "/train")


def test_gcs_image_source_with_two_workers_labels_every_file_right(gcs_image_source, tmp_path):
    """Forked workers once shared the parent's client and read each other's responses."""
    from tfpipe.format.decode import decode_example
    from tfpipe.format.tfrecord import read_records

    _, url, objects = gcs_image_source
    synsets = fake_data.class_names(3)
    for attempt in range(2):  # the old shared-connection bug showed in 6 of 6 runs
        m = tfpipe.convert(url, str(tmp_path / f"out{attempt}"), num_shards=3, workers=2)
        seen = set()
        for path in m.shard_paths("train"):
            with open(path, "rb") as f:
                for record in read_records(f, where=path):
                    ex = decode_example(record)
                    name = ex["image/filename"][0].decode()
                    synset = ex["image/class/synset"][0].decode()
                    assert ex["image/encoded"][0] == objects[f"{url}/{synset}/{name}"], name
                    assert ex["image/class/label"][0] == synsets.index(synset) + 1
                    seen.add(name)
        assert len(seen) == 27 and m.splits["train"].skipped == ()


def test_gcs_outage_fails_the_run_and_resume_finishes_it(gcs_image_source, local_gcs, tmp_path, monkeypatch):
    """After the retries give up, the image is not skipped as 'unreadable': the run fails,
    keeps its committed shards, and --resume finishes with every image."""
    from tfpipe.modalities.images.convert.folders import scan_class_folders

    monkeypatch.setattr(storage.gcs, "RETRY_BASE_DELAY_S", 0.001)  # the schedule, not the logic
    _, url, _ = gcs_image_source
    dest = str(tmp_path / "out")
    last = scan_class_folders(url, "imagenet", 1, 0).items[-1]  # read last, in the last shard
    bucket_path = storage.split_gcs(last.path)[1].replace("/", "%2F")
    with (
        local_gcs.inject_faults(
            503, count=storage.RETRY_ATTEMPTS, path_contains=bucket_path, route="plain"
        ) as fault,
        pytest.raises(storage.StorageError, match=rf"{last.synset}.*gave up after .*--resume"),
    ):
        tfpipe.convert(url, dest, num_shards=3, workers=1)
    assert fault.served == storage.RETRY_ATTEMPTS
    assert not os.path.exists(os.path.join(dest, "tfpipe.json"))
    assert sorted(n for n in os.listdir(dest) if not n.startswith(".")) == [
        "train-00000-of-00003",
        "train-00001-of-00003",
    ]
    m = tfpipe.convert(url, dest, num_shards=3, workers=1, resume=True)
    assert m.splits["train"].examples == 27 and m.splits["train"].skipped == ()
    assert verify(dest).ok


@pytest.mark.slow
def test_cli_outage_exits_1_with_one_line(gcs_image_source, local_gcs, tmp_path):
    _, url, _ = gcs_image_source
    with local_gcs.inject_faults(403, count=1, path_contains="alt=media", route="plain"):
        out = run_cli(
            "convert", url, tmp_path / "o", "--num-shards", 2, "--workers", 1, "--quiet", env=local_gcs.env
        )
    assert out.returncode == 1, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot read it" in lines[0] and "--resume" in lines[0], out.stderr


# ---- destinations: missing buckets, the lock ----


@pytest.mark.slow
def test_missing_bucket_is_one_line_naming_it(tree, tmp_path, local_gcs):
    with pytest.raises(DestinationError, match=r"the bucket 'tfpipe-no-such-bucket' does not exist"):
        tfpipe.convert(tree[0], "gs://tfpipe-no-such-bucket/out", num_shards=2, workers=1)
    out = run_cli("convert", "gs://tfpipe-no-such-src/train", tmp_path / "o", "--quiet", env=local_gcs.env)
    assert out.returncode == 1 and out.stderr.count("\n") == 1, out.stderr
    assert "gs://tfpipe-no-such-src/train: the bucket does not exist" in out.stderr


def write_lock(dest, **fields):
    """Writes a lock as a run of this process, started 30 s ago, would; `fields` override."""
    import dataclasses
    import json

    from tfpipe.convert.lock import LOCK_NAME, Holder

    holder = Holder.me()
    obj = dataclasses.asdict(holder) | {"started": holder.started - 30} | fields
    storage.write_atomic(f"{dest}/{LOCK_NAME}", json.dumps(obj).encode(), overwrite=True)
    return holder.host


@pytest.mark.slow
def test_gcs_lock_refuses_a_live_writer_and_recovers_a_dead_one(tree, gcs_bucket):
    from tfpipe.convert.lock import LOCK_NAME

    dest = gcs_bucket + "/locked"
    host = write_lock(dest)  # held by this very (live) process
    with pytest.raises(
        DestinationError,
        match=rf"being written by another tfpipe convert \(pid {os.getpid()} "
        rf"on host {host}, started .* \(3\d.\d s ago\)",
    ):
        tfpipe.convert(tree[0], dest, num_shards=2, workers=1)
    assert storage.exists(f"{dest}/{LOCK_NAME}")  # the refused run left the holder's lock alone
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    write_lock(dest, pid=int(dead.stdout))  # a run on this host that no longer runs: stale
    m = tfpipe.convert(tree[0], dest, num_shards=2, workers=1)
    assert m.splits["train"].examples == 16
    hidden = [n for n in storage.listdir(dest) if n.startswith(".")]
    assert hidden == [commit_markers.COMMITS_DIR]  # the lock released on success


def test_gcs_lock_of_another_host_needs_break_lock(tree, gcs_bucket):
    dest = gcs_bucket + "/foreign"
    write_lock(dest, host="some-other-host", pid=1)
    with pytest.raises(
        DestinationError, match=r"pid 1 on host some-other-host.*--break-lock \(break_lock=True\)"
    ):
        tfpipe.convert(tree[0], dest, num_shards=2, workers=1)
    m = tfpipe.convert(tree[0], dest, num_shards=2, workers=1, break_lock=True)
    assert m.splits["train"].examples == 16 and not storage.exists(f"{dest}/.tfpipe.lock")

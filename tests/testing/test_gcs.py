"""gs:// through a real local GCS: TensorFlow's own GCS code, tfpipe.storage, and injected faults.

Everything runs against gcp-storage-emulator behind tfpipe.testing.gcs's TLS proxy (see
conftest.py). TensorFlow's requests arrive over TLS (route "tls"), tfpipe.storage's through
STORAGE_EMULATOR_HOST (route "plain").
"""

import gzip
import http.client
import io
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from tfpipe import storage
from tfpipe.format.tfrecord import frame_record, read_records
from tfpipe.testing.gcs import LocalGCS

pytestmark = pytest.mark.gcs

# 37 records over 4 shards; lengths vary and include an empty record.
RECORDS = [bytes([i % 251]) * (i * 13 % 97) + b"rec%02d" % i if i else b"" for i in range(37)]


@pytest.fixture(scope="module")
def tf(local_gcs):
    from tfpipe._tf import tf as load

    return load()


def payload(n: int, seed: int = 0) -> bytes:
    """n bytes covering every byte value (catches any text or framing mangling)."""
    block = bytes((i * 7 + seed) % 256 for i in range(256 * 3 + 1))
    return (block * (n // len(block) + 1))[:n]


def write_tfrecords(tf, path: str, records: list[bytes], compression: str = "") -> None:
    with tf.io.TFRecordWriter(path, options=tf.io.TFRecordOptions(compression_type=compression)) as w:
        for r in records:
            w.write(r)


def read_tfrecords(tf, paths, compression: str = "") -> list[bytes]:
    return [r.numpy() for r in tf.data.TFRecordDataset(paths, compression_type=compression)]


# ---- TensorFlow's own gs:// code, through the TLS proxy ----


def test_tf_gfile_exists_glob_stat_rename_remove(tf, gcs_bucket, local_gcs):
    gfile = tf.io.gfile
    data = payload(1001)
    with local_gcs.recording() as rec:
        with gfile.GFile(f"{gcs_bucket}/dir/a.bin", "wb") as f:
            f.write(data)
        with gfile.GFile(f"{gcs_bucket}/dir/b.txt", "w") as f:
            f.write("hello")
    assert {r.host for r in rec} <= {"www.googleapis.com", "storage.googleapis.com"}
    assert {r.route for r in rec} == {"tls"}

    assert gfile.exists(f"{gcs_bucket}/dir/a.bin")
    assert not gfile.exists(f"{gcs_bucket}/dir/missing")
    assert sorted(gfile.glob(f"{gcs_bucket}/dir/*")) == [f"{gcs_bucket}/dir/a.bin", f"{gcs_bucket}/dir/b.txt"]
    assert gfile.glob(f"{gcs_bucket}/dir/*.txt") == [f"{gcs_bucket}/dir/b.txt"]
    assert gfile.stat(f"{gcs_bucket}/dir/a.bin").length == 1001
    assert sorted(gfile.listdir(f"{gcs_bucket}/dir")) == ["a.bin", "b.txt"]

    gfile.rename(f"{gcs_bucket}/dir/a.bin", f"{gcs_bucket}/dir/c.bin")
    assert not gfile.exists(f"{gcs_bucket}/dir/a.bin")
    with gfile.GFile(f"{gcs_bucket}/dir/c.bin", "rb") as f:
        assert f.read() == data
    gfile.copy(f"{gcs_bucket}/dir/c.bin", f"{gcs_bucket}/dir/d.bin")
    assert storage.read_bytes(f"{gcs_bucket}/dir/d.bin") == data

    gfile.remove(f"{gcs_bucket}/dir/c.bin")
    assert not gfile.exists(f"{gcs_bucket}/dir/c.bin")
    with pytest.raises(tf.errors.NotFoundError):
        gfile.remove(f"{gcs_bucket}/dir/c.bin")


def test_tf_rewrite_shows_new_size_at_once(tf, gcs_bucket):
    # GCS_STAT_CACHE_MAX_AGE=0 (conftest) is what makes this hold.
    path = f"{gcs_bucket}/rewritten"
    for n in (10, 25, 3):
        with tf.io.gfile.GFile(path, "wb") as f:
            f.write(payload(n))
        assert tf.io.gfile.stat(path).length == n
        assert tf.io.gfile.GFile(path, "rb").read() == payload(n)


@pytest.mark.parametrize("compression", ["", "GZIP"])
def test_tf_tfrecord_writer_and_dataset_roundtrip(tf, gcs_bucket, compression):
    path = f"{gcs_bucket}/train-00000-of-00001"
    write_tfrecords(tf, path, RECORDS, compression)

    assert read_tfrecords(tf, path, compression) == RECORDS
    # The bytes TF stored are valid TFRecord framing (CRCs checked by tfpipe's reader): the
    # proxy de-chunked TF's upload instead of storing the chunk framing.
    raw = storage.read_bytes(path)
    if compression == "GZIP":
        raw = gzip.decompress(raw)
    assert raw == b"".join(frame_record(r) for r in RECORDS)
    assert list(read_records(io.BytesIO(raw))) == RECORDS


def test_tf_list_files_interleave_reads_every_record_once(tf, gcs_bucket):
    shards = [RECORDS[i::4] for i in range(4)]  # 10, 9, 9, 9 records
    for i, recs in enumerate(shards):
        write_tfrecords(tf, f"{gcs_bucket}/train-{i:05d}-of-00004", recs)
    # An in-progress (hidden) name must not match the shard glob.
    storage.write_atomic(f"{gcs_bucket}/.train-00004-of-00004.tmp-1-ab", b"partial")

    files = tf.data.Dataset.list_files(f"{gcs_bucket}/train-*", shuffle=False)
    assert [f.numpy().decode() for f in files] == [f"{gcs_bucket}/train-{i:05d}-of-00004" for i in range(4)]
    ds = files.interleave(
        tf.data.TFRecordDataset,
        cycle_length=4,
        block_length=1,
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    got = [r.numpy() for r in ds]
    assert sorted(got) == sorted(RECORDS)
    assert got[:4] == [shards[0][0], shards[1][0], shards[2][0], shards[3][0]]


def test_tf_empty_object(tf, gcs_bucket):
    path = f"{gcs_bucket}/empty.tfrecord"
    write_tfrecords(tf, path, [])
    assert tf.io.gfile.stat(path).length == 0
    assert read_tfrecords(tf, path) == []
    assert storage.size(path) == 0 and storage.read_bytes(path) == b""


def test_tf_parallel_shard_writers(tf, gcs_bucket):
    errors: list[BaseException] = []

    def write(i: int) -> None:
        try:
            write_tfrecords(tf, f"{gcs_bucket}/p-{i}", RECORDS[i::3])
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    assert [read_tfrecords(tf, f"{gcs_bucket}/p-{i}") for i in range(3)] == [RECORDS[i::3] for i in range(3)]


# ---- the same objects through both clients ----


def test_storage_writes_tf_reads_byte_identical(tf, gcs_bucket):
    data = payload(300_001, seed=3)
    storage.write_atomic(f"{gcs_bucket}/from-storage.bin", data)
    with tf.io.gfile.GFile(f"{gcs_bucket}/from-storage.bin", "rb") as f:
        assert f.read() == data
    assert tf.io.gfile.stat(f"{gcs_bucket}/from-storage.bin").length == len(data)


def test_tf_writes_storage_reads_byte_identical(tf, gcs_bucket):
    data = payload(300_001, seed=5)
    with tf.io.gfile.GFile(f"{gcs_bucket}/from-tf.bin", "wb") as f:
        f.write(data[:1000])
        f.write(data[1000:])
    path = f"{gcs_bucket}/from-tf.bin"
    assert storage.read_bytes(path) == data
    assert storage.size(path) == len(data)
    with storage.open_read(path) as f:
        assert f.read(7) == data[:7]
        assert f.read() == data[7:]


# ---- tfpipe.storage on gs:// ----


def test_write_atomic_refuses_existing_unless_overwrite(gcs_bucket):
    path = f"{gcs_bucket}/tfpipe.json"
    storage.write_atomic(path, b'{"v": 1}')
    with pytest.raises(storage.AlreadyExists, match="already exists"):
        storage.write_atomic(path, b'{"v": 2}')
    assert storage.read_bytes(path) == b'{"v": 1}'
    storage.write_atomic(path, b'{"v": 3}', overwrite=True)
    assert storage.read_bytes(path) == b'{"v": 3}'


def test_commit_file_small_and_resumable_sizes(gcs_bucket, tmp_path):
    # 9 MiB is above google-cloud-storage's 8 MiB multipart limit: a resumable upload, whose
    # precondition the proxy checks again when the upload completes.
    for name, n in (("small", 4097), ("big", 9 << 20)):
        local = tmp_path / name
        local.write_bytes(payload(n, seed=n % 13))
        storage.commit_file(str(local), f"{gcs_bucket}/{name}")
        assert not local.exists()
        assert storage.size(f"{gcs_bucket}/{name}") == n
        again = tmp_path / f"{name}-again"
        again.write_bytes(b"different")
        with pytest.raises(storage.AlreadyExists):
            storage.commit_file(str(again), f"{gcs_bucket}/{name}")
        assert again.exists(), "a refused commit leaves the caller's file alone"
        assert storage.read_bytes(f"{gcs_bucket}/{name}") == payload(n, seed=n % 13)


def test_listdir_glob_exists_size_remove(gcs_bucket):
    names = ["train-00000-of-00002", "train-00001-of-00002", ".train-00002-of-00002.tmp-9-ff", "tfpipe.json"]
    for i, name in enumerate(names):
        storage.write_atomic(f"{gcs_bucket}/ds/{name}", payload(10 + i))
    storage.write_atomic(f"{gcs_bucket}/ds/sub/inner", b"x")
    storage.write_atomic(f"{gcs_bucket}/ds-other/file", b"x")  # same prefix, other "directory"

    assert storage.listdir(f"{gcs_bucket}/ds") == sorted([*names, "sub"])
    assert storage.listdir(f"{gcs_bucket}/ds/") == storage.listdir(f"{gcs_bucket}/ds")
    assert storage.listdir(f"{gcs_bucket}/nothing") == []
    assert storage.glob(f"{gcs_bucket}/ds/train-*") == [
        f"{gcs_bucket}/ds/train-00000-of-00002",
        f"{gcs_bucket}/ds/train-00001-of-00002",
    ]
    assert storage.exists(f"{gcs_bucket}/ds/tfpipe.json")
    assert not storage.exists(f"{gcs_bucket}/ds/missing")
    assert storage.size(f"{gcs_bucket}/ds/train-00001-of-00002") == 11

    storage.remove(f"{gcs_bucket}/ds/tfpipe.json")
    assert not storage.exists(f"{gcs_bucket}/ds/tfpipe.json")
    storage.remove(f"{gcs_bucket}/ds/tfpipe.json")  # missing_ok by default
    with pytest.raises(FileNotFoundError):
        storage.remove(f"{gcs_bucket}/ds/tfpipe.json", missing_ok=False)


def test_missing_objects_raise_file_not_found_like_local_paths(gcs_bucket, tmp_path):
    for root in (gcs_bucket, str(tmp_path)):
        for read in (storage.read_bytes, storage.size, storage.open_read):
            with pytest.raises(FileNotFoundError):
                read(storage.join(root, "missing"))


# ---- faults on tfpipe.storage's path (google-cloud-storage client) ----


@pytest.mark.parametrize("status", [503, 429, 500])
def test_storage_retries_transient_errors(local_gcs, gcs_bucket, status):
    path = f"{gcs_bucket}/retried"
    with local_gcs.recording() as rec:
        with local_gcs.inject_faults(status, count=2, methods=("POST",), route="plain") as upload:
            storage.write_atomic(path, b"payload")
        with local_gcs.inject_faults(status, count=2, methods=("GET",), route="plain") as download:
            assert storage.read_bytes(path) == b"payload"
    assert upload.served == 2 and download.served == 2
    uploads = [(r.status, r.injected) for r in rec if r.method == "POST"]
    assert uploads == [(status, True), (status, True), (200, False)]
    gets = [(r.status, r.injected) for r in rec if r.method == "GET" and "alt=media" in r.path]
    assert gets == [(status, True), (status, True), (200, False)]


def test_storage_gives_up_with_storage_error(local_gcs, gcs_bucket, monkeypatch):
    monkeypatch.setattr(storage.gcs, "RETRY_BASE_DELAY_S", 0.001)  # the schedule, not the logic
    path = f"{gcs_bucket}/never"
    with (
        local_gcs.inject_faults(503, count=1000, methods=("POST",), route="plain") as fault,
        pytest.raises(storage.StorageError, match=f"gave up after {storage.RETRY_ATTEMPTS} attempts"),
    ):
        storage.write_atomic(path, b"data")
    assert fault.served == storage.RETRY_ATTEMPTS
    assert not storage.exists(path)


def test_non_transient_error_is_not_retried(local_gcs, gcs_bucket):
    from google.api_core.exceptions import Forbidden

    storage.write_atomic(f"{gcs_bucket}/x", b"x")
    with (
        local_gcs.inject_faults(403, count=5, path_contains="alt=media", route="plain") as fault,
        pytest.raises(Forbidden),
    ):
        storage.read_bytes(f"{gcs_bucket}/x")
    assert fault.served == 1


def test_lost_reply_then_precondition_failure_with_same_bytes_is_success(local_gcs, gcs_bucket):
    path = f"{gcs_bucket}/train-00000-of-00001"
    with (
        local_gcs.recording() as rec,
        local_gcs.inject_faults(503, count=1, methods=("POST",), route="plain", lose_reply=True) as lost,
    ):
        storage.write_atomic(path, b"shard bytes")
    assert lost.served == 1
    uploads = [(r.status, r.injected, r.forwarded) for r in rec if r.method == "POST"]
    # The first upload landed but its reply was lost; the retry met the precondition.
    assert uploads == [(503, True, True), (412, False, True)]
    assert storage.read_bytes(path) == b"shard bytes"


def test_retry_that_finds_other_bytes_raises_already_exists(local_gcs, gcs_bucket):
    path = f"{gcs_bucket}/taken"
    storage.write_atomic(path, b"someone else's")
    with (
        local_gcs.inject_faults(503, count=1, methods=("POST",), route="plain") as fault,
        pytest.raises(storage.AlreadyExists),
    ):
        storage.write_atomic(path, b"mine")
    assert fault.served == 1
    assert storage.read_bytes(path) == b"someone else's"


def test_precondition_is_atomic_under_concurrent_writers(gcs_bucket):
    # gcp-storage-emulator ignores ifGenerationMatch; the proxy enforces it, check and write
    # as one step. Exactly one of several racing writers may win.
    outcomes: list[str] = []

    def write(i: int) -> None:
        try:
            storage.write_atomic(f"{gcs_bucket}/race", b"writer %d" % i)
            outcomes.append(f"won {i}")
        except storage.AlreadyExists:
            outcomes.append("refused")

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    winners = [o for o in outcomes if o.startswith("won")]
    assert len(outcomes) == 4 and len(winners) == 1
    assert storage.read_bytes(f"{gcs_bucket}/race") == b"writer " + winners[0][4:].encode()


# ---- faults on TensorFlow's path ----


# TF sleeps up to 1 s of random jitter before each retry whatever GCS_RETRY_CONFIG_* say,
# so these tests inject as few faults as prove the point.
@pytest.mark.parametrize(("status", "write_method"), [(503, "PUT"), (500, "POST"), (429, "PUT")])
def test_tf_retries_transient_errors_on_reads_and_writes(tf, local_gcs, gcs_bucket, status, write_method):
    path = f"{gcs_bucket}/train-00000-of-00001"
    with local_gcs.recording() as rec:
        with local_gcs.inject_faults(status, count=1, methods=(write_method,), route="tls") as write:
            write_tfrecords(tf, path, RECORDS)
        with local_gcs.inject_faults(
            status, count=1, path_contains=path.split("/")[-1], methods=("GET",), route="tls"
        ) as read:
            assert read_tfrecords(tf, path) == RECORDS
    assert write.served == 1 and read.served == 1
    assert [r.status for r in rec if r.injected] == [status, status]
    assert storage.read_bytes(path) == b"".join(frame_record(r) for r in RECORDS)


def test_tf_lost_upload_reply_does_not_upload_twice(tf, local_gcs, gcs_bucket):
    path = f"{gcs_bucket}/lost"
    with (
        local_gcs.recording() as rec,
        local_gcs.inject_faults(503, count=1, methods=("PUT",), route="tls", lose_reply=True) as lost,
    ):
        write_tfrecords(tf, path, RECORDS[:5])
    assert lost.served == 1
    # TF asks for the upload's status and hears it is complete, as from GCS: no second upload.
    assert [(r.method, r.status) for r in rec] == [("POST", 200), ("PUT", 503), ("PUT", 200)]
    assert read_tfrecords(tf, path) == RECORDS[:5]


def test_tf_gives_up_after_its_retry_limit(tf, local_gcs, gcs_bucket):
    path = f"{gcs_bucket}/a"
    storage.write_atomic(path, b"abc")
    retries = int(os.environ["GCS_RETRY_CONFIG_MAX_RETRIES"])
    with (
        local_gcs.inject_faults(503, count=1000, methods=("GET",), route="tls") as fault,
        pytest.raises(tf.errors.OpError, match="retry"),
    ):
        tf.io.gfile.GFile(path, "rb").read()
    assert fault.served == retries + 1


# ---- the proxy itself ----


def test_proxy_refuses_hosts_other_than_google_storage(local_gcs):
    for host, port in (
        ("example.com", 443),
        ("www.googleapis.com", 80),
        ("127.0.0.1", local_gcs.emulator_port),
    ):
        conn = http.client.HTTPConnection("127.0.0.1", local_gcs.proxy_port, timeout=10)
        conn.set_tunnel(host, port)
        with pytest.raises(OSError, match="403"):
            conn.connect()
        conn.close()
    # Absolute-form (plain-HTTP forward proxy) requests for other hosts are refused too.
    conn = http.client.HTTPConnection("127.0.0.1", local_gcs.proxy_port, timeout=10)
    conn.request("GET", "http://example.com/")
    resp = conn.getresponse()
    assert resp.status == 403 and b"refused example.com" in resp.read()
    conn.close()


def test_inject_faults_validates_its_arguments(local_gcs):
    with pytest.raises(ValueError, match=r"route=.tcp."):
        local_gcs.inject_faults(503, route="tcp")
    with pytest.raises(ValueError, match="status=200"):
        local_gcs.inject_faults(200)


def test_env_points_both_clients_at_the_proxy(local_gcs):
    env = local_gcs.env
    assert env["STORAGE_EMULATOR_HOST"] == env["https_proxy"] == local_gcs.endpoint
    assert env["NO_PROXY"] == "127.0.0.1,localhost"
    assert os.path.exists(env["CURL_CA_BUNDLE"])
    # The session fixture applied it (GCS_* as conftest set them before TF was imported).
    assert {k: os.environ.get(k) for k in env if not k.startswith("GCS_")} == {
        k: v for k, v in env.items() if not k.startswith("GCS_")
    }
    assert os.environ["GCS_STAT_CACHE_MAX_AGE"] == "0"


@pytest.mark.slow
def test_children_exit_with_a_killed_parent(tmp_path):
    # A test process that dies by SIGKILL must not leave the emulator or proxy running.
    script = (
        "import sys, time\n"
        "from tfpipe.testing.gcs import LocalGCS\n"
        "gcs = LocalGCS().start()\n"
        "print(gcs._emulator.pid, gcs._proxy.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": root}
    )
    pids = [int(p) for p in parent.stdout.readline().split()]
    assert len(pids) == 2 and all(_alive(p) for p in pids)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids)


def test_stop_ends_children_and_is_idempotent():
    gcs = LocalGCS().start()
    pids = [gcs._emulator.pid, gcs._proxy.pid]
    bucket = gcs.create_bucket("lifecycle")
    assert bucket == "gs://lifecycle"
    gcs.stop()
    gcs.stop()
    assert not any(_alive(p) for p in pids)


def _alive(pid: int) -> bool:
    """True while `pid` runs (a zombie awaiting its parent's wait() counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


# ---- local files: permissions ----


def test_a_committed_local_file_takes_the_umask_of_the_moment(tmp_path):
    old = os.umask(0o027)
    try:
        assert storage.current_umask() == 0o027
        tmp = tmp_path / ".x.tmp"
        tmp.write_bytes(b"data")
        os.chmod(tmp, 0o600)  # as mkstemp makes it
        storage.commit_file(str(tmp), str(tmp_path / "x"))
        assert (os.stat(tmp_path / "x").st_mode & 0o777) == 0o640
    finally:
        os.umask(old)


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads Linux's /proc/self/status")
def test_reading_the_umask_never_sets_it(monkeypatch):
    expected = os.umask(0o022)
    os.umask(expected)

    def refuse(mask):
        raise AssertionError(f"os.umask({mask:o}) called: another thread's new file would get that mask")

    monkeypatch.setattr(os, "umask", refuse)
    assert storage.current_umask() == expected


def test_only_durable_commits_wait_for_the_disk(tmp_path, monkeypatch):
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real(fd))
    storage.write_atomic(str(tmp_path / "durable"), b"a")
    assert len(synced) == 2  # the file, then its folder
    storage.write_atomic(str(tmp_path / "redoable"), b"b", durable=False)
    assert len(synced) == 2 and (tmp_path / "redoable").read_bytes() == b"b"

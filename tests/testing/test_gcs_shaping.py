"""LocalGCS shaping: latency to the first byte, bandwidth per connection, and 429s above a rate,
each observed through TensorFlow's gs:// code (TLS route) and google-cloud-storage (plain route).

The machine may be loaded, so every timing assertion is a lower bound that load cannot fake
(shaping only ever adds time) plus a loose upper bound.
"""

import contextlib
import dataclasses
import os
import pathlib
import threading
import time

import pytest

from tfpipe import storage
from tfpipe.testing._gcs_proxy import http_request
from tfpipe.testing.gcs import LIKE_GCS, LocalGCS, Shaping

pytestmark = pytest.mark.gcs

FIRST_BYTE_S = 0.2
SLACK_S = 3.0  # the loose upper bound's allowance for a loaded machine


@pytest.fixture(scope="module")
def tf(local_gcs):
    from tfpipe._tf import tf as load

    return load()


def timed(fn):
    start = time.monotonic()
    out = fn()
    return out, time.monotonic() - start


def of(requests, name: str) -> list:
    """The requests for object `name` (google-cloud-storage also makes a background bucket GET)."""
    return [r for r in requests if name in r.path]


# ---- first_byte_ms ----


def test_first_byte_delays_each_small_read_on_the_plain_route(local_gcs, gcs_bucket):
    path = f"{gcs_bucket}/small-plain"
    storage.write_atomic(path, b"seven b")
    with local_gcs.shaped(first_byte_ms=FIRST_BYTE_S * 1000), local_gcs.recording() as rec:
        data, took = timed(lambda: storage.read_bytes(path))
    assert data == b"seven b"
    n = len(of(rec, "small-plain"))  # one after another: each waits for the one before
    assert n >= 1
    assert n * FIRST_BYTE_S <= took < n * FIRST_BYTE_S + SLACK_S


def test_first_byte_delays_each_small_read_through_tf(tf, local_gcs, gcs_bucket):
    path = f"{gcs_bucket}/small-tls"
    storage.write_atomic(path, b"seven b")
    with local_gcs.shaped(first_byte_ms=FIRST_BYTE_S * 1000), local_gcs.recording() as rec:
        data, took = timed(lambda: tf.io.gfile.GFile(path, "rb").read())
    assert data == b"seven b"
    mine = of(rec, "small-tls")
    assert {r.route for r in mine} == {"tls"} and len(mine) >= 1  # a stat, then the read
    assert len(mine) * FIRST_BYTE_S <= took < len(mine) * FIRST_BYTE_S + SLACK_S


def test_control_calls_are_never_shaped(local_gcs, gcs_bucket):
    with local_gcs.shaped(first_byte_ms=5000, mbps_per_stream=0.001, max_requests_per_s=0.001):
        _, took = timed(
            lambda: (local_gcs.requests, local_gcs.inject_faults(503).cancel(), local_gcs.clear_faults())
        )
    assert took < 2.5, f"4 control calls took {took:.2f} s under a 5 s first-byte delay"


# ---- mbps_per_stream ----

MBPS = 10.0
SIZE = 3_000_000  # 0.3 s at 10 MB/s


def test_bandwidth_paces_downloads_and_uploads_on_the_plain_route(local_gcs, gcs_bucket):
    data = os.urandom(SIZE)
    with local_gcs.shaped(mbps_per_stream=MBPS), local_gcs.recording() as rec:
        _, up = timed(lambda: storage.write_atomic(f"{gcs_bucket}/big-plain", data))
        got, down = timed(lambda: storage.read_bytes(f"{gcs_bucket}/big-plain"))
    assert got == data
    for what, took in (("upload", up), ("download", down)):
        mb_per_s = SIZE / 1e6 / took
        assert MBPS / 4 < mb_per_s <= MBPS * 1.01, f"{what}: {mb_per_s:.2f} MB/s at {MBPS} MB/s a stream"
    upload = [r for r in of(rec, "") if r.method == "POST"]
    assert len(upload) == 1 and upload[0].bytes_in >= SIZE  # the body was paced as it came in
    assert [r.bytes_out for r in of(rec, "alt=media")] == [SIZE]


def test_bandwidth_paces_downloads_and_uploads_through_tf(tf, local_gcs, gcs_bucket):
    data = os.urandom(SIZE)
    path = f"{gcs_bucket}/big-tls"

    def write() -> None:
        with tf.io.gfile.GFile(path, "wb") as f:
            f.write(data)

    with local_gcs.shaped(mbps_per_stream=MBPS):
        _, up = timed(write)
        got, down = timed(lambda: tf.io.gfile.GFile(path, "rb").read())
    assert got == data
    for what, took in (("upload", up), ("download", down)):
        mb_per_s = SIZE / 1e6 / took
        assert MBPS / 4 < mb_per_s <= MBPS * 1.01, f"{what}: {mb_per_s:.2f} MB/s at {MBPS} MB/s a stream"


def test_bandwidth_is_per_connection(local_gcs, gcs_bucket):
    # Three downloads at once on three connections each get the full rate: together they take
    # about as long as one, where one shared limit would take three times as long.
    mbps, size = 2.0, 1_000_000
    data = os.urandom(size)
    for i in range(3):
        storage.write_atomic(f"{gcs_bucket}/par-{i}", data)
    results: list[bytes] = []

    def read(i: int) -> None:
        results.append(storage.read_bytes(f"{gcs_bucket}/par-{i}"))

    with local_gcs.shaped(mbps_per_stream=mbps):
        threads = [threading.Thread(target=read, args=(i,)) for i in range(3)]
        start = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        took = time.monotonic() - start
    assert results == [data] * 3
    one = size / 1e6 / mbps  # 0.5 s
    assert one <= took < 2.4 * one, f"3 parallel streams took {took:.2f} s, one alone {one:.2f} s"


# ---- max_requests_per_s, max_writes_per_s ----


def test_requests_above_the_rate_get_429_with_retry_after(local_gcs, gcs_bucket):
    bucket = storage.split_gcs(gcs_bucket)[0]
    rate, n = 5.0, 25
    with local_gcs.shaped(max_requests_per_s=rate), local_gcs.recording() as rec:
        start = time.monotonic()
        replies = [http_request(local_gcs.proxy_port, "GET", f"/storage/v1/b/{bucket}") for _ in range(n)]
        took = time.monotonic() - start
    statuses = [status for status, _, _ in replies]
    admitted = statuses.count(200)
    assert statuses.count(429) == n - admitted
    # A full bucket (one second's worth) plus what refilled while the requests went out.
    assert rate <= admitted <= rate + rate * took + 1, (admitted, took)
    for status, headers, body in replies:
        if status == 429:
            assert int(dict(headers)["Retry-After"]) >= 1
            assert b"rateLimitExceeded" in body
    assert [(r.status, r.throttled, r.forwarded) for r in rec] == [(s, s == 429, s == 200) for s in statuses]


def test_writes_have_their_own_limit(local_gcs, gcs_bucket):
    bucket = storage.split_gcs(gcs_bucket)[0]
    rate, n = 3.0, 12
    with local_gcs.shaped(max_writes_per_s=rate):
        start = time.monotonic()
        deletes = [
            http_request(local_gcs.proxy_port, "DELETE", f"/storage/v1/b/{bucket}/o/missing-{i}")[0]
            for i in range(n)
        ]
        took = time.monotonic() - start
        reads = [http_request(local_gcs.proxy_port, "GET", f"/storage/v1/b/{bucket}")[0] for _ in range(n)]
    admitted = n - deletes.count(429)
    assert set(deletes) == {404, 429}  # the admitted ones reached the emulator: no such object
    assert rate <= admitted <= rate + rate * took + 1, (admitted, took)
    assert reads == [200] * n  # reads are not writes


@contextlib.contextmanager
def lift_limit_once_throttled(gcs: LocalGCS, name: str):
    """Lifts max_requests_per_s as soon as a request for `name` is throttled, from a thread:
    the request under test is refused first, and its retry gets through."""
    seen = len(gcs.requests)
    done = threading.Event()

    def watch() -> None:
        deadline = time.monotonic() + 60
        while not done.is_set() and time.monotonic() < deadline:
            if any(r.throttled and name in r.path for r in gcs.requests[seen:]):
                gcs.shape(max_requests_per_s=None)
                return
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join(timeout=10)


def drain(gcs: LocalGCS, bucket: str) -> None:
    """Spends the request bucket, so the next request is refused (at 0.01/s no token comes back)."""
    while http_request(gcs.proxy_port, "GET", f"/storage/v1/b/{bucket[len('gs://') :]}")[0] != 429:
        pass


def test_tf_retries_a_throttled_read(tf, local_gcs, gcs_bucket):
    path = f"{gcs_bucket}/throttled-tls"
    storage.write_atomic(path, b"payload")
    with local_gcs.shaped(max_requests_per_s=0.01), local_gcs.recording() as rec:
        drain(local_gcs, gcs_bucket)
        with lift_limit_once_throttled(local_gcs, "throttled-tls"):
            assert tf.io.gfile.GFile(path, "rb").read() == b"payload"
    mine = of(rec, "throttled-tls")
    throttled = [r for r in mine if r.throttled]
    assert throttled and all(r.route == "tls" and r.status == 429 for r in throttled)
    assert mine[-1].status in (200, 206) and not mine[-1].throttled  # TF reads a range


def test_storage_retries_a_throttled_read_and_counts_it(local_gcs, gcs_bucket):
    path = f"{gcs_bucket}/throttled-plain"
    storage.write_atomic(path, b"payload")
    before = storage.retries()
    with local_gcs.shaped(max_requests_per_s=0.01), local_gcs.recording() as rec:
        drain(local_gcs, gcs_bucket)
        with lift_limit_once_throttled(local_gcs, "throttled-plain"):
            assert storage.read_bytes(path) == b"payload"
    throttled = [r for r in of(rec, "throttled-plain") if r.throttled]
    assert throttled and all(r.route == "plain" for r in throttled)
    after = storage.retries()
    assert after.get("HTTP 429", 0) - before.get("HTTP 429", 0) == len(throttled)


# ---- the profile, validation, run-time changes ----


def test_like_gcs_is_the_published_profile():
    assert (
        Shaping(first_byte_ms=30.0, mbps_per_stream=150.0, max_requests_per_s=5000.0, max_writes_per_s=1000.0)
        == LIKE_GCS
    )
    assert LocalGCS.like_gcs().shaping == LIKE_GCS
    assert LocalGCS.like_gcs(mbps_per_stream=5).shaping == dataclasses.replace(LIKE_GCS, mbps_per_stream=5)


def test_like_gcs_cites_each_figure_in_its_docstring_and_the_guide():
    guide = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "guides" / "local-gcs.md").read_text()
    for url in (
        "https://cloud.google.com/storage/docs/request-rate",
        "https://cloud.google.com/storage/docs/storage-classes",
        "https://github.com/GoogleCloudPlatform/gcsfuse/blob/master/docs/grpc_benchmarks.md",
    ):
        assert url in LocalGCS.like_gcs.__doc__ and url in guide, url


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"first_byte_ms": -1}, "first_byte_ms between 0 and 60000. Received: first_byte_ms=-1"),
        ({"first_byte_ms": "30"}, "Received: first_byte_ms='30'"),
        ({"mbps_per_stream": 0}, r"mbps_per_stream > 0, or None for no limit. Received: mbps_per_stream=0"),
        ({"max_requests_per_s": True}, "Received: max_requests_per_s=True"),
        ({"max_writes_per_s": float("nan")}, "Received: max_writes_per_s=nan"),
    ],
)
def test_bad_shaping_is_refused_by_name(fields, message):
    with pytest.raises(ValueError, match=message):
        Shaping(**fields)
    with pytest.raises(ValueError, match=message):
        LocalGCS(**fields)


def test_shape_changes_only_the_given_fields_and_shaped_restores(local_gcs):
    assert local_gcs.shaping == Shaping()
    with local_gcs.shaped(first_byte_ms=5) as inner:
        assert inner == local_gcs.shaping == Shaping(first_byte_ms=5)
        local_gcs.shape(mbps_per_stream=50)
        assert local_gcs.shaping == Shaping(first_byte_ms=5, mbps_per_stream=50)
        assert local_gcs._control("GET", "shaping") == local_gcs.shaping.to_json()
        with pytest.raises(ValueError, match=r"Expected fields of Shaping .*Received: \['latency_ms'\]"):
            local_gcs.shape(latency_ms=3)
        assert local_gcs.shaping == Shaping(first_byte_ms=5, mbps_per_stream=50)
    assert local_gcs.shaping == Shaping()
    assert local_gcs._control("GET", "shaping") == Shaping().to_json()


def test_shaping_given_at_start_applies_from_the_first_request():
    with LocalGCS(first_byte_ms=FIRST_BYTE_S * 1000) as gcs:
        gcs.create_bucket("shaped-from-start")  # straight to the emulator: not shaped
        (status, _, _), took = timed(
            lambda: http_request(gcs.proxy_port, "GET", "/storage/v1/b/shaped-from-start")
        )
    assert status == 200
    assert FIRST_BYTE_S <= took < FIRST_BYTE_S + SLACK_S

"""tfpipe.storage counts the transient errors it retries, and convert reports them: in the
manifest (`retries`, up to its commit) and in the CLI summary (the whole run)."""

import json

import pytest
from google.api_core.exceptions import Forbidden

import tfpipe
import tfpipe.cli
from tfpipe import storage
from tfpipe.errors import ManifestError
from tfpipe.format.manifest import Manifest
from tfpipe.testing import fake_data

pytestmark = pytest.mark.gcs


def since(before: dict[str, int]) -> dict[str, int]:
    after = storage.retries()
    return {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0)}


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("retry_src") / "train"
    fake_data.write_image_folder(root, classes=2, per_class=[4, 3], size=(32, 24))
    return str(root)


def test_each_retry_is_counted_by_kind(local_gcs, gcs_bucket, monkeypatch):
    monkeypatch.setattr(storage.gcs, "RETRY_BASE_DELAY_S", 0.001)  # the count, not the schedule
    path = f"{gcs_bucket}/counted"
    before = storage.retries()
    with (
        local_gcs.inject_faults(503, count=2, methods=("POST",), route="plain"),
        local_gcs.inject_faults(429, count=1, methods=("POST",), route="plain"),
    ):
        storage.write_atomic(path, b"data")
    assert since(before) == {"HTTP 503": 2, "HTTP 429": 1}

    before = storage.retries()
    with (
        local_gcs.inject_faults(403, count=1, path_contains="alt=media", route="plain"),
        pytest.raises(Forbidden, match="403"),
    ):
        storage.read_bytes(path)
    assert since(before) == {}, "a refusal is not retried, so not counted"

    before = storage.retries()
    with (
        local_gcs.inject_faults(500, count=1000, path_contains="alt=media", route="plain"),
        pytest.raises(storage.StorageError, match="gave up"),
    ):
        storage.read_bytes(path)
    assert since(before) == {"HTTP 500": storage.RETRY_ATTEMPTS - 1}  # the last attempt is not retried


def test_convert_records_retries_in_the_manifest(tree, local_gcs, gcs_bucket, monkeypatch):
    monkeypatch.setattr(storage.gcs, "RETRY_BASE_DELAY_S", 0.001)
    dest = f"{gcs_bucket}/retried"
    with (
        local_gcs.inject_faults(429, count=2, methods=("POST",), route="plain"),
        local_gcs.inject_faults(
            503, count=1, methods=("POST",), path_contains="ifGenerationMatch=0", route="plain"
        ),
    ):
        m = tfpipe.convert(tree, dest, num_shards=2, workers=1)
    assert m.splits["train"].retries == {"HTTP 429": 2, "HTTP 503": 1}
    assert Manifest.load(dest).splits["train"].retries == {"HTTP 429": 2, "HTTP 503": 1}
    clean = tfpipe.convert(tree, f"{gcs_bucket}/clean", num_shards=2, workers=1)
    assert clean.splits["train"].retries == {}


def test_convert_summary_counts_the_whole_run(tree, local_gcs, gcs_bucket, monkeypatch, capsys):
    monkeypatch.setattr(storage.gcs, "RETRY_BASE_DELAY_S", 0.001)
    dest = f"{gcs_bucket}/cli"
    # The lock's release comes after the manifest's commit: the summary counts it, the manifest cannot.
    with (
        local_gcs.inject_faults(503, count=1, methods=("POST",), route="plain"),
        local_gcs.inject_faults(
            429, count=1, methods=("DELETE",), path_contains=".tfpipe.lock", route="plain"
        ),
    ):
        code = tfpipe.cli.main(["convert", tree, dest, "--num-shards", "2", "--workers", "1", "--quiet"])
    out = capsys.readouterr().out
    assert code == 0
    assert "retried 2 storage requests (HTTP 429: 1, HTTP 503: 1), with backoff" in out
    assert Manifest.load(dest).splits["train"].retries == {"HTTP 503": 1}


def test_a_run_without_retries_says_nothing_about_them(tree, local_gcs, gcs_bucket, capsys):
    code = tfpipe.cli.main(["convert", tree, f"{gcs_bucket}/quiet", "--num-shards", "2", "--quiet"])
    assert code == 0 and "retried" not in capsys.readouterr().out


def test_manifest_retries_round_trip_and_are_checked(tmp_path):
    src = tmp_path / "src" / "train"
    fake_data.write_image_folder(src, classes=2, per_class=[2, 1], size=(16, 16))
    local = tfpipe.convert(str(src), str(tmp_path / "out"), num_shards=1, workers=1)
    assert local.splits["train"].retries == {}
    path = tmp_path / "out" / "tfpipe.json"
    obj = json.loads(path.read_text())
    del obj["splits"]["train"]["retries"]  # a manifest from before the field: not counted
    path.write_text(json.dumps(obj))
    assert Manifest.load(str(tmp_path / "out")).splits["train"].retries is None
    obj["splits"]["train"]["retries"] = {"HTTP 429": -1}
    path.write_text(json.dumps(obj))
    with pytest.raises(
        ManifestError, match=r"Expected retries as \{kind: count\}. Received: \{'HTTP 429': -1\}"
    ):
        Manifest.load(str(tmp_path / "out"))

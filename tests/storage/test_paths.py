"""gs:// path rules through their one home (tfpipe/storage/paths.py, as `storage.*`): the prefix, the
bucket/object split, and the bucket check every split makes."""

import pytest

from tfpipe import storage


@pytest.mark.parametrize(
    ("path", "parts"),
    [
        ("gs://b-1/x/y.tfrecord", ("b-1", "x/y.tfrecord")),
        ("gs://b-1", ("b-1", "")),
        ("gs://b-1/", ("b-1", "")),
    ],
)
def test_a_gs_path_splits_into_bucket_and_object(path, parts):
    assert storage.is_gcs(path) and storage.split_gcs(path) == parts


@pytest.mark.parametrize("path", ["/data/gs://b/x", "gs:/b/x", "data/x", "GS://b/x"])
def test_only_the_prefix_makes_a_gs_path(path):
    assert not storage.is_gcs(path)


@pytest.mark.parametrize(("path", "rule"), [("gs:///x", "names no bucket"), ("gs://Bucket/x", "lowercase")])
def test_the_split_checks_the_bucket_first(path, rule):
    with pytest.raises(storage.InvalidPath, match=rule):
        storage.split_gcs(path)

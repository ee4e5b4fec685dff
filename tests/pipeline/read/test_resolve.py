"""Paths as written: wildcards in any part of a glob, a path that exists taken literally even
with `?` or `[1]` in it, and gs:// paths checked against GCS's bucket rules before any request."""

import os

import pandas as pd
import pytest

import tfpipe
from tfpipe import storage
from tfpipe.pipeline.read import resolve

from support.cli import run_cli


def write_records(path, n):
    from tfpipe._tf import tf

    with tf().io.TFRecordWriter(str(path)) as w:
        for i in range(n):
            w.write(
                tf()
                .train.Example(
                    features=tf().train.Features(
                        feature={"x": tf().train.Feature(int64_list=tf().train.Int64List(value=[i]))}
                    )
                )
                .SerializeToString()
            )


def test_wildcards_in_folder_parts_match(tmp_path):
    for d, names in {"d1": ["train-a", "train-b", "eval-a"], "d2": ["train-c"], "e1": ["train-z"]}.items():
        (tmp_path / d).mkdir()
        for n in names:
            write_records(tmp_path / d / n, 2)
    (tmp_path / "d1" / ".train-hidden").write_bytes(b"")
    found = resolve.resolve(str(tmp_path / "d*" / "train-*"), split=None, training=False)
    assert [os.path.relpath(f, tmp_path) for f in found.files] == ["d1/train-a", "d1/train-b", "d2/train-c"]


def test_a_path_that_exists_is_taken_literally(tmp_path):
    pd.DataFrame({"x": range(7), "y": [0, 1] * 3 + [0]}).to_csv(tmp_path / "t.csv", index=False)
    for name in ("loc[1]", "run?"):
        dest = tmp_path / name
        tfpipe.convert(str(tmp_path / "t.csv"), str(dest), label="y", workers=1)
        found = resolve.resolve(str(dest), split=None, training=False)
        assert found.manifest is not None and found.examples == 7


@pytest.mark.slow
def test_a_gs_path_without_a_bucket_writes_no_local_folder(tmp_path):
    run = run_cli("convert", tmp_path, "gs://", "--quiet", cwd=tmp_path)
    assert (
        run.returncode == 1
        and "Expected gs://BUCKET/PATH. Received: 'gs://', which names no bucket" in run.stderr
    )
    assert not (tmp_path / "gs:").exists()


@pytest.mark.parametrize(
    "url, rule",
    [
        ("gs://Probe/out", "it must be lowercase"),
        ("gs://ab/out", "3 to 63 characters"),
        ("gs://my_bucket-/out", "start and end with a letter or digit"),
        ("gs://10.0.0.1/out", "not be an IP address"),
        ("gs://google-data/out", 'not start with "goog" or hold "google"'),
        ("gs:/bucket/out", "names no bucket"),
    ],
)
def test_bucket_names_are_checked_before_any_request(tmp_path, url, rule):
    pd.DataFrame({"x": [1]}).to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(storage.InvalidPath, match=rule):
        tfpipe.convert(str(tmp_path / "t.csv"), url)
    if storage.is_gcs(url):
        with pytest.raises(storage.InvalidPath, match=rule):
            storage.exists(url)  # every gs:// operation checks the name first


@pytest.mark.gcs
def test_wildcards_in_folder_parts_match_on_gcs(gcs_bucket):
    for name in ("a1/train-0", "a1/train-1", "a2/train-0", "b1/train-0", "a1/.train-x"):
        storage.write_atomic(f"{gcs_bucket}/data/{name}", b"x")
    found = storage.glob(f"{gcs_bucket}/data/a*/train-*")
    assert found == [f"{gcs_bucket}/data/{n}" for n in ("a1/train-0", "a1/train-1", "a2/train-0")]
    assert storage.glob(f"{gcs_bucket}/data/a1/train-?") == found[:2]


def test_what_a_data_path_names_is_decided_in_one_place(tmp_path, table_ds):
    """build() and bench read the same decision: trailing slashes, roots and wildcards alike."""
    dataset = resolve.data_path(table_ds + "//")
    assert (dataset.path, dataset.kind, dataset.manifest.root) == (table_ds, "dataset", table_ds)
    (tmp_path / "run[1]").mkdir()
    write_records(tmp_path / "one.tfrecord", 1)
    folder = str(tmp_path / "run[1]")
    assert resolve.data_path(folder + "/") == resolve.DataPath(folder, "folder")
    assert resolve.data_path(str(tmp_path / "run[2]")).kind == "glob"  # no such path: a pattern
    assert resolve.data_path(str(tmp_path / "one.tfrecord")).kind == "file"
    assert resolve.data_path(str(tmp_path / "gone") + "/").kind == "missing"
    assert resolve.data_path("/").path == "/"
    with pytest.raises(storage.InvalidPath, match="names no bucket"):
        resolve.data_path("gs://")
    with pytest.raises(tfpipe.ManifestError, match=r"run\[1\]/', which has no tfpipe.json"):
        tfpipe.plan(folder + "/", batch_size=1)
    assert tfpipe.BenchConfig(data=table_ds + "/").pipeline == "tabular"

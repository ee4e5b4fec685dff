"""Commit markers: a conversion to gs:// names its committed split in one marker object, gone
before --overwrite rewrites a shard. Real conversions on the local GCS twin."""

import numpy as np
import pandas as pd
import pytest

import tfpipe
from tfpipe import storage
from tfpipe.convert.writer import PAUSE_ENV
from tfpipe.format import commit_markers

from support.cli import start_cli, wait_paused


def write_table(path, flip):
    x = np.arange(101)
    pd.DataFrame({"x": x, "y": (x + flip) % 2}).to_parquet(path)


def markers(dest):
    return storage.listdir(storage.join(dest, commit_markers.COMMITS_DIR))


@pytest.mark.gcs
def test_a_gcs_split_is_marked_with_its_shards_and_unmarked_before_a_rewrite(tmp_path, gcs_bucket):
    src, dest = tmp_path / "t.parquet", gcs_bucket + "/t"
    write_table(src, flip=0)
    first = tfpipe.convert(str(src), dest, label="y", num_shards=3, workers=1)
    mark = commit_markers.marker(dest, "train", first.splits["train"].shards)
    assert markers(dest) == [mark.rsplit("/", 1)[1]] and mark.rsplit("/", 1)[1].startswith("train.")
    assert commit_markers.committed(dest, "train", first.splits["train"].shards) == mark
    # A second split joins: the first keeps its marker.
    tfpipe.convert(str(src), dest, label="y", num_shards=2, workers=1, split="validation")
    assert len(markers(dest)) == 2 and storage.exists(mark)

    write_table(src, flip=1)  # other records under the same shard names
    second = tfpipe.convert(str(src), dest, label="y", num_shards=3, workers=1, overwrite=True)
    assert (
        not storage.exists(mark)
        and commit_markers.committed(dest, "train", first.splits["train"].shards) is None
    )
    new = commit_markers.marker(dest, "train", second.splits["train"].shards)
    assert new != mark and storage.exists(new) and len(markers(dest)) == 2


@pytest.mark.gcs
@pytest.mark.slow
def test_overwrite_removes_the_marker_before_it_uncommits(tmp_path, gcs_bucket, local_gcs):
    # Stopped where --overwrite has un-committed the split (before deleting its shards): the
    # marker is gone already, so a reader of the old split finds none from then on.
    src, dest = tmp_path / "t.parquet", gcs_bucket + "/t"
    write_table(src, flip=0)
    first = tfpipe.convert(str(src), dest, label="y", num_shards=3, workers=1)
    mark = commit_markers.marker(dest, "train", first.splits["train"].shards)
    write_table(src, flip=1)
    proc = start_cli(
        *("convert", src, dest, "--label", "y", "--num-shards", "3", "--workers", "1", "--overwrite"),
        "--quiet",
        env={PAUSE_ENV: "overwrite-uncommitted"},
    )
    try:
        wait_paused(proc, timeout=120)
        assert storage.exists(f"{dest}/train-00000-of-00003")  # the old shards are still there
        assert not storage.exists(mark) and markers(dest) == []
    finally:
        proc.kill()
        proc.wait()

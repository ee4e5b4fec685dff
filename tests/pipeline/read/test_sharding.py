"""How input pipelines share files: `share_files` is a pure function, tested on plain values."""

from __future__ import annotations

import pytest

from tfpipe.pipeline.read.sharding import UNKNOWN, FileShare, shard_files, share_files


def test_one_pipeline_reads_everything():
    assert share_files((100, 200, 300), (3, 4, 5), 1, 0, compressed=False) == FileShare(
        shard_by="none", files=(0, 1, 2), examples=12, at_most=600 // 16, read_records=12, cache_bytes=600
    )


def test_file_sharding_deals_files_round_robin():
    # 37 records in 4 shards over 3 pipelines: pipeline 0 reads shards 0 and 3, 1 reads shard 1.
    sizes, counts = (1000, 900, 900, 900), (10, 9, 9, 9)
    assert share_files(sizes, counts, 3, 0, compressed=False) == FileShare(
        shard_by="file", files=(0, 3), examples=19, at_most=1900 // 16, read_records=19, cache_bytes=1900
    )
    assert share_files(sizes, counts, 3, 1, compressed=False) == FileShare(
        shard_by="file", files=(1,), examples=9, at_most=900 // 16, read_records=9, cache_bytes=900
    )


def test_record_sharding_with_fewer_files_than_pipelines():
    # 2 files, 4 pipelines: every pipeline reads both files (37 records) and keeps every 4th.
    got = share_files((2000, 1700), (20, 17), 4, 3, compressed=False)
    assert got == FileShare(
        shard_by="record", files=(0, 1), examples=9, at_most=57, read_records=37, cache_bytes=3700 // 4
    )
    assert [share_files((2000, 1700), (20, 17), 4, i, compressed=False).examples for i in range(4)] == [
        10,
        9,
        9,
        9,
    ]


def test_unknown_counts_and_sizes_and_compression():
    foreign = share_files((500, 600), (UNKNOWN, UNKNOWN), 1, 0, compressed=True)
    assert (foreign.examples, foreign.read_records, foreign.at_most, foreign.cache_bytes) == (
        None,
        None,
        None,
        1100,
    )
    plain = share_files((500, 600), (UNKNOWN, UNKNOWN), 1, 0, compressed=False)
    assert plain.at_most == 1100 // 16 and plain.examples is None
    unsized = share_files((UNKNOWN, 10), (3, 4), 1, 0, compressed=False)
    assert (unsized.examples, unsized.at_most, unsized.cache_bytes) == (7, None, None)


@pytest.mark.parametrize("files", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("pipelines", [1, 2, 3, 4, 5])
def test_pipelines_together_read_every_record_once(files, pipelines):
    counts = tuple(10 + i for i in range(files))
    shares = [share_files((100,) * files, counts, pipelines, i, compressed=False) for i in range(pipelines)]
    assert sum(s.examples for s in shares) == sum(counts)
    if shares[0].shard_by == "file":
        assert sorted(j for s in shares for j in s.files) == list(range(files))
    assert shard_files(files, pipelines, 0)[0] == (
        "none" if pipelines == 1 else "file" if files >= pipelines else "record"
    )

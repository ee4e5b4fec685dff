"""Shard names through their one home, tfpipe/format/shardnames.py: formatted, parsed and checked as
sets, on names alone (the readers that call it are tested in tests/pipeline and test_manifest)."""

import pytest

from tfpipe.errors import DataError, ManifestError
from tfpipe.format.shardnames import ShardName, check_shard_sets, shard_name


@pytest.mark.parametrize(
    ("name", "parsed", "pattern"),
    [
        ("train-00003-of-01024", ShardName("train", 3, 1024), "train-NNNNN-of-01024"),
        (
            "validation-00000-of-00008.gz",
            ShardName("validation", 0, 8, ".gz"),
            "validation-NNNNN-of-00008.gz",
        ),
        (  # TFDS's names: the stem holds a dot, five digits
            "mnist-train.tfrecord-00000-of-00001",
            ShardName("mnist-train.tfrecord", 0, 1),
            "mnist-train.tfrecord-NNNNN-of-00001",
        ),
        ("gs://b/d/x-1-of-2", ShardName("x", 1, 2, digits=1), "x-N-of-2"),  # the last part of a path
        ("train-00000", None, None),
        ("tfpipe.json", None, None),
    ],
)
def test_names_parse_and_format_back(name, parsed, pattern):
    got = ShardName.parse(name)
    assert got == parsed
    if parsed is not None:
        assert str(got) == name.rsplit("/", 1)[-1] and got.pattern == pattern


def test_tfpipe_names():
    assert shard_name("train", 3, 1024) == str(ShardName.of("train", 3, 1024)) == "train-00003-of-01024"
    assert shard_name("validation", 0, 8, "gzip") == "validation-00000-of-00008.gz"


@pytest.mark.parametrize(
    ("paths", "listed", "says"),
    [
        (
            ["d/t-00000-of-00004", "d/t-00002-of-00004"],
            False,
            "holds 2 of the 4 shards named t-NNNNN-of-00004 in d: missing indices [1, 3]",
        ),
        (
            ["t-00000-of-00002", "t-00001-of-00002", "t-00002-of-00002"],
            False,
            "indices [2] out of range (the names say 2 shards: 0..1)",
        ),
        (["t-00001-of-00002", "t-00000-of-00002"], True, "out of order (indices [1, 0])"),
        (["t-00000-of-00002", "t-00000-of-00002", "t-00001-of-00002"], False, "indices [0] more than once"),
        (["t-0-of-1", "t-0-of-2", "t-1-of-2"], True, "listed beside shards of another set"),
    ],
)
def test_a_set_that_is_not_whole_is_refused_in_one_wording(paths, listed, says):
    with pytest.raises(DataError) as e:
        check_shard_sets(paths, "W", DataError, listed=listed)
    assert says in str(e.value) and "Refused: such a set reads without error" in str(e.value)


def test_whole_sets_and_other_names_pass():
    check_shard_sets(
        ["a/t-00000-of-00002", "a/t-00001-of-00002", "b/t-00000-of-00001", "notes.txt"], "W", DataError
    )
    check_shard_sets(
        ["t-00001-of-00002", "t-00000-of-00002"], "W", ManifestError
    )  # a glob's order is not a list's

"""Manifest JSON: round trip, validation on load, and refusal of unsafe shard names."""

import json

import pytest

from tfpipe.errors import ManifestError
from tfpipe.format.manifest import Manifest, ShardInfo, SkippedInput, Split
from tfpipe.format.manifest_checks import check_relative_name
from tfpipe.format.schema import IMAGE_SCHEMA
from tfpipe.format.shardnames import shard_name


def _manifest(root, name="train-00000-of-00001"):
    return Manifest(
        root=str(root),
        layout="imagenet",
        schema=IMAGE_SCHEMA,
        label_offset=1,
        class_names=("n01", "n02"),
        compression="none",
        splits={
            "train": Split(
                (ShardInfo(name, 3, 120, "sha256:" + "0" * 64),),
                (SkippedInput("a.JPEG", "empty file"),),
                source="/src",
                options={"num_shards": 1},
            )
        },
    )


def test_round_trip(tmp_path):
    m = _manifest(tmp_path)
    m.save()
    loaded = Manifest.load(str(tmp_path))
    assert loaded == m
    obj = json.loads((tmp_path / "tfpipe.json").read_text())
    assert obj["format"] == "tfpipe.manifest" and obj["format_version"] == 1
    assert obj["splits"]["train"]["examples"] == 3
    assert obj["splits"]["train"]["skipped"] == [{"input": "a.JPEG", "reason": "empty file"}]
    assert loaded.shard_paths("train") == [str(tmp_path / "train-00000-of-00001")]


@pytest.mark.parametrize(
    "name", ["../evil", "/etc/passwd", "a/../../b", "..", "gs://other/bucket", "C:\\x", "\\\\server\\x", ""]
)
def test_unsafe_shard_names_refused(name):
    with pytest.raises(ManifestError, match="relative names"):
        check_relative_name(name)


def test_manifest_with_path_traversal_refused_on_load(tmp_path):
    _manifest(tmp_path).save()
    obj = json.loads((tmp_path / "tfpipe.json").read_text())
    obj["splits"]["train"]["shards"][0]["name"] = "../../etc/passwd"
    (tmp_path / "tfpipe.json").write_text(json.dumps(obj))
    with pytest.raises(ManifestError, match=r"tfpipe.json: .*relative names.*'\.\./\.\./etc/passwd'"):
        Manifest.load(str(tmp_path))


def test_safe_nested_name_is_accepted():
    assert check_relative_name("sub/train-00000-of-00001") == "sub/train-00000-of-00001"


def test_missing_manifest_says_what_to_do(tmp_path):
    with pytest.raises(ManifestError, match=r"no tfpipe.json there.*tfpipe convert"):
        Manifest.load(str(tmp_path))


def test_not_json_and_wrong_version(tmp_path):
    (tmp_path / "tfpipe.json").write_text("{not json")
    with pytest.raises(ManifestError, match="not valid JSON"):
        Manifest.load(str(tmp_path))
    obj = _manifest(tmp_path).to_json() | {"format_version": 99}
    (tmp_path / "tfpipe.json").write_text(json.dumps(obj))
    with pytest.raises(ManifestError, match=r"expected format_version 1. Received: 99"):
        Manifest.load(str(tmp_path))
    (tmp_path / "tfpipe.json").write_text(json.dumps({"pickle": "no"}))
    with pytest.raises(ManifestError, match=r"expected a 'tfpipe.manifest' JSON object"):
        Manifest.load(str(tmp_path))


def test_declared_count_must_match_shards(tmp_path):
    obj = _manifest(tmp_path).to_json()
    obj["splits"]["train"]["examples"] = 4
    (tmp_path / "tfpipe.json").write_text(json.dumps(obj))
    with pytest.raises(ManifestError, match="declares 4 examples but its shards hold 3"):
        Manifest.load(str(tmp_path))


def test_unknown_split_named():
    with pytest.raises(ManifestError, match="no split 'validation'; it has \\['train'\\]"):
        _manifest("/x").split("validation")


def test_shard_name_format():
    assert shard_name("train", 3, 1024) == "train-00003-of-01024"
    assert shard_name("validation", 0, 8, "gzip") == "validation-00000-of-00008.gz"


def _four_shards(tmp_path):
    shards = tuple(ShardInfo(shard_name("train", i, 4), 15, 600, "crc32c:0000000" + str(i)) for i in range(4))
    Manifest(root=str(tmp_path), layout="table", schema=IMAGE_SCHEMA, splits={"train": Split(shards)}).save()
    return json.loads((tmp_path / "tfpipe.json").read_text())


def _write(tmp_path, obj):
    (tmp_path / "tfpipe.json").write_text(json.dumps(obj))


def test_shard_listed_twice_is_refused(tmp_path):
    """Shard 0 listed twice (shard 1 dropped) once made build() yield its records twice."""
    obj = _four_shards(tmp_path)
    shards = obj["splits"]["train"]["shards"]
    shards[1] = dict(shards[0])
    _write(tmp_path, obj)
    with pytest.raises(
        ManifestError,
        match=r"tfpipe.json: split 'train' lists shard\(s\) \['train-00000-of-00004'\] "
        r"more than once",
    ):
        Manifest.load(str(tmp_path))


def test_gaps_and_disorder_in_tfpipe_shard_names_are_refused(tmp_path):
    obj = _four_shards(tmp_path)
    del obj["splits"]["train"]["shards"][2]
    obj["splits"]["train"]["examples"] = 45
    _write(tmp_path, obj)
    with pytest.raises(
        ManifestError,
        match=r"split 'train' holds 3 of the 4 shards named train-NNNNN-of-00004: missing indices \[2\]\.",
    ):
        Manifest.load(str(tmp_path))
    obj = _four_shards(tmp_path)
    shards = obj["splits"]["train"]["shards"]
    shards[0], shards[1] = shards[1], shards[0]
    _write(tmp_path, obj)
    with pytest.raises(ManifestError, match=r"indices \[1, 0, 2, 3\]"):
        Manifest.load(str(tmp_path))


def test_same_shard_in_two_splits_is_refused(tmp_path):
    obj = _four_shards(tmp_path)
    obj["splits"]["copy"] = obj["splits"]["train"]
    _write(tmp_path, obj)
    with pytest.raises(ManifestError, match=r"the manifest lists shard\(s\) \['train-00000-of-00004'"):
        Manifest.load(str(tmp_path))


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("examples", 10**30, r"expected examples to be an int in 0..2\*\*63-1. Received: examples=10{30}"),
        ("examples", -5, r"Received: examples=-5"),
        ("bytes", -1, r"Received: bytes=-1"),
        ("examples", 1e30, r"Received: examples=1e\+30"),
        ("examples", "15", r"Received: examples='15'"),
        ("examples", True, r"Received: examples=True"),
        (
            "checksum",
            "crc32c:xyz",
            r"expected a checksum 'crc32c:<8 hex>' or 'sha256:<64 hex>'. Received: 'crc32c:xyz'",
        ),
    ],
)
def test_numbers_out_of_range_are_refused_on_load(tmp_path, field, value, message):
    obj = _four_shards(tmp_path)
    obj["splits"]["train"]["shards"][3][field] = value
    del obj["splits"]["train"]["examples"]
    _write(tmp_path, obj)
    with pytest.raises(ManifestError, match=r"tfpipe.json: shard 'train-00003-of-00004': .*" + message):
        Manifest.load(str(tmp_path))


def test_label_offset_out_of_range_is_refused(tmp_path):
    obj = _four_shards(tmp_path) | {"label_offset": 10**30}
    _write(tmp_path, obj)
    with pytest.raises(ManifestError, match=r"expected label_offset to be a small int. Received: 10{30}"):
        Manifest.load(str(tmp_path))


# ---- a text split's figures


def test_length_bins_are_exact_then_a_128th_of_an_octave():
    from tfpipe.format.manifest_text import bin_width, length_bin

    assert [length_bin(n) for n in (1, 16383, 16384, 16511, 16512, 32767, 32768, 33023)] == [
        1,
        16383,
        16384,
        16384,
        16512,
        32640,
        32768,
        32768,
    ]
    assert [bin_width(n) for n in (5, 16384, 32768, 2**20)] == [1, 128, 256, 8192]


def test_a_histogram_that_does_not_add_up_is_refused():
    from tfpipe.errors import ManifestError
    from tfpipe.format.manifest_text import SplitText

    good = {"lengths": [3, 7, 16384], "counts": [2, 1, 1], "tokens": [6, 7, 16400]}
    text = SplitText(4, 16413, 1, good)
    assert SplitText.from_json(text.to_json()) == text
    assert text.percentiles((0.25, 0.5, 0.75, 1.0)) == [3, 3, 7, 16384]
    for bad, problem in (
        ({**good, "counts": [2, 1]}, "parallel lists"),
        ({**good, "lengths": [7, 3, 16384]}, "increasing bin lower bounds"),
        ({**good, "lengths": [3, 7, 16385]}, "increasing bin lower bounds"),
        ({**good, "tokens": [7, 7, 16400]}, "each bin's tokens within"),
        ({**good, "tokens": [6, 7, 16384 + 128]}, "each bin's tokens within"),
        ({**good, "counts": [2, 1, 2], "tokens": [6, 7, 32800]}, "counts summing to documents=4"),
    ):
        with pytest.raises(ManifestError, match=problem):
            SplitText(4, sum(bad["tokens"]) if "summing" not in problem else 16413, 1, bad)
    with pytest.raises(ManifestError, match="documents"):
        SplitText.from_json({"documents": -1, "tokens": 0})


def test_a_lengths_entry_that_does_not_fit_its_split_is_refused():
    from tfpipe.errors import ManifestError
    from tfpipe.format.manifest_text import LengthsFile, SplitText

    good = {"lengths": [3, 7], "counts": [2, 1], "tokens": [6, 7]}
    entry = LengthsFile("lengths.train.u32", 12, "crc32c:0123abcd")
    text = SplitText(3, 13, 0, good, entry)
    assert SplitText.from_json(text.to_json()) == text
    assert text.to_json()["lengths"]["format"] == "uint32le"
    assert SplitText.from_json({**text.to_json(), "lengths": None}).lengths is None  # converted before
    for bad, problem in (
        ({"bytes": 8}, "4 bytes for each of the 3 documents"),
        ({"bytes": 13}, "a count of 4-byte lengths"),
        ({"format": "uint16le"}, "expected format 'uint32le'"),
        ({"file": "../elsewhere"}, "relative names"),
        ({"checksum": "md5:00"}, "expected a checksum"),
    ):
        with pytest.raises(ManifestError, match=problem):
            SplitText.from_json({**text.to_json(), "lengths": {**text.to_json()["lengths"], **bad}})

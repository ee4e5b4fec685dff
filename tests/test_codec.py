"""The round-trip contract: encode (pure Python) and parse (TensorFlow) are exact inverses."""

import io
import math

import numpy as np
import pytest

from tfpipe.codec import decode_example, encode_columns, encode_example, frame_record, read_records
from tfpipe.convert.config import ShardConfig, parse_size
from tfpipe.convert.writer import shard_bounds
from tfpipe.errors import ConfigError, DataError
from tfpipe.schema import Field, Schema

@pytest.fixture(scope="module")
def tf():
    from tfpipe._tf import tf as load

    return load()


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

SCHEMA = Schema((
    Field("i", "int64"),
    Field("f", "float32"),
    Field("s", "bytes"),
    Field("v", "int64", shape=(3,)),
    Field("m", "float32", shape=(2, 2)),
    Field("x", "float32", has_mask=True),
))

ROWS = [
    {"i": 0, "f": 0.0, "s": b"", "v": [0, 0, 0], "m": [[0.0, 0.0], [0.0, 0.0]], "x": 0.0, "x/missing": 1},
    {"i": INT64_MIN, "f": -0.0, "s": bytes(range(256)), "v": [INT64_MAX, -1, 1], "m": [[1.5, -2.25], [3e38, -3e38]],
     "x": 7.5, "x/missing": 0},
    {"i": INT64_MAX, "f": float("inf"), "s": "héllo wörld ☃", "v": [2**31, -(2**31), 127], "m": [[1e-38, 1e-45], [0.1, 2.0]],
     "x": -1.0, "x/missing": 0},
    {"i": -1, "f": 3.4028234663852886e38, "s": b"\x00\xff", "v": [128, 16383, 16384], "m": [[float("-inf"), 0], [1, 2]],
     "x": 0.0, "x/missing": 1},
]


def _as_bytes(v):
    return v.encode("utf-8") if isinstance(v, str) else v


def test_tf_parse_example_inverts_encode_example(tf):
    serialized = [encode_example(r, SCHEMA) for r in ROWS]
    parsed = tf.io.parse_example(tf.constant(serialized), SCHEMA.parse_spec())
    assert set(parsed) == {"i", "f", "s", "v", "m", "x", "x/missing"}
    for k, row in enumerate(ROWS):
        assert parsed["i"][k].numpy() == row["i"]
        assert parsed["s"][k].numpy() == _as_bytes(row["s"])
        assert parsed["v"][k].numpy().tolist() == row["v"]
        np.testing.assert_array_equal(parsed["m"][k].numpy(), np.float32(row["m"]))
        assert parsed["x/missing"][k].numpy() == row["x/missing"]
        got, want = parsed["f"][k].numpy(), np.float32(row["f"])
        assert got == want and math.copysign(1, got) == math.copysign(1, want)


def test_tf_example_proto_agrees_with_decode_example(tf):
    for row in ROWS:
        data = encode_example(row, SCHEMA)
        proto = tf.train.Example.FromString(data)
        ours = decode_example(data)
        for name, feature in proto.features.feature.items():
            kind = feature.WhichOneof("kind")
            theirs = list(getattr(feature, kind).value)
            assert ours[name] == theirs, name


def test_decode_example_inverts_encode_example():
    row = ROWS[2]
    out = decode_example(encode_example(row, SCHEMA))
    assert out["i"] == [INT64_MAX]
    assert out["s"] == ["héllo wörld ☃".encode()]
    assert out["v"] == [2**31, -(2**31), 127]
    assert out["x/missing"] == [0]


def test_encode_columns_is_byte_identical_to_encode_example():
    rng = np.random.default_rng(7)
    n = 301
    schema = Schema((Field("a", "int64"), Field("b", "float32"), Field("c", "bytes", has_mask=True)))
    cols = {
        "a": np.concatenate([rng.integers(INT64_MIN, INT64_MAX, size=150, dtype=np.int64),
                             rng.integers(-300, 300, size=n - 150)]),
        "b": rng.normal(size=n),
        "c": [("é" * (i % 5)) + str(i) * (i % 200) for i in range(n)],
        "c/missing": rng.integers(0, 2, size=n),
    }
    batch = encode_columns(schema, cols)
    rows = [encode_example({k: v[i] for k, v in cols.items()}, schema) for i in range(n)]
    assert batch == rows


def test_encode_example_names_the_feature_it_lacks():
    with pytest.raises(DataError, match="'s'"):
        encode_example({"i": 1, "f": 1.0}, Schema((Field("i", "int64"), Field("f", "float32"), Field("s", "bytes"))))


def test_tfrecord_framing_reads_in_tf(tf, tmp_path):
    path = tmp_path / "x.tfrecord"
    payloads = [b"", b"a", b"x" * 70000, bytes(range(256))]
    path.write_bytes(b"".join(frame_record(p) for p in payloads))
    assert [t.numpy() for t in tf.data.TFRecordDataset(str(path))] == payloads
    assert list(read_records(io.BytesIO(path.read_bytes()))) == payloads


def test_read_records_names_record_on_corruption_and_truncation():
    data = bytearray(frame_record(b"first") + frame_record(b"second") + frame_record(b"third"))
    corrupt = bytearray(data)
    second_payload = len(frame_record(b"first")) + 12
    corrupt[second_payload] ^= 0x01
    it = read_records(io.BytesIO(bytes(corrupt)), where="train-00001-of-00004")
    assert next(it) == b"first"
    with pytest.raises(DataError, match=r"train-00001-of-00004: record 1 has corrupt data"):
        next(it)
    truncated = bytes(data[:-3])
    with pytest.raises(DataError, match="record 2 is truncated"):
        list(read_records(io.BytesIO(truncated), where="s"))


def test_shard_bounds_balance_within_one():
    assert shard_bounds(37, 4) == [(0, 10), (10, 19), (19, 28), (28, 37)]
    for n in (0, 1, 5, 37, 1000):
        for k in (1, 2, 3, 7):
            bounds = shard_bounds(n, k)
            sizes = [b - a for a, b in bounds]
            assert sum(sizes) == n and max(sizes) - min(sizes) <= 1
            assert all(bounds[i][1] == bounds[i + 1][0] for i in range(k - 1))


def test_shard_count_by_size_or_exact():
    assert ShardConfig(shard_size=100).count_for(n_items=1000, estimated_bytes=1050) == 11
    assert ShardConfig(num_shards=4).count_for(n_items=1000, estimated_bytes=10**12) == 4
    assert ShardConfig(num_shards=8).count_for(n_items=3, estimated_bytes=1) == 3  # never an empty shard
    assert ShardConfig().count_for(n_items=10, estimated_bytes=0) == 1


@pytest.mark.parametrize("text,want", [("128MiB", 128 << 20), ("64MB", 64_000_000), ("1g", 10**9),
                                       ("1000", 1000), ("1.5KiB", 1536), (4096, 4096)])
def test_parse_size(text, want):
    assert parse_size(text) == want


@pytest.mark.parametrize("bad", ["", "12 parsecs", "-5MB", "MB"])
def test_parse_size_rejects(bad):
    with pytest.raises(ConfigError, match="Expected a size"):
        parse_size(bad)


@pytest.mark.parametrize("kwargs,field", [({"num_shards": 0}, "num_shards"), ({"compression": "zstd"}, "compression"),
                                          ({"split": "tr ain"}, "split"), ({"shard_size": 0}, "shard_size")])
def test_shard_config_validates(kwargs, field):
    with pytest.raises(ConfigError, match=f"{field} must be .* Received: {field}="):
        ShardConfig(**kwargs)

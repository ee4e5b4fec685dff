"""The round-trip contract: encode (pure Python) and parse (TensorFlow) are exact inverses."""

import io
import math

import numpy as np
import pytest

from tfpipe.convert.config import ShardConfig, parse_size
from tfpipe.convert.writer import shard_bounds
from tfpipe.errors import ConfigError, DataError, ManifestError
from tfpipe.format.codec import encode_columns, encode_example
from tfpipe.format.decode import decode_example
from tfpipe.format.schema import Field, Schema
from tfpipe.format.tfrecord import frame_record, read_records


@pytest.fixture(scope="module")
def tf():
    from tfpipe._tf import tf as load

    return load()


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

SCHEMA = Schema(
    (
        Field("i", "int64"),
        Field("f", "float32"),
        Field("s", "bytes"),
        Field("v", "int64", shape=(3,)),
        Field("m", "float32", shape=(2, 2)),
        Field("x", "float32", has_mask=True),
    )
)

ROWS = [
    {"i": 0, "f": 0.0, "s": b"", "v": [0, 0, 0], "m": [[0.0, 0.0], [0.0, 0.0]], "x": 0.0, "x/missing": 1},
    {
        "i": INT64_MIN,
        "f": -0.0,
        "s": bytes(range(256)),
        "v": [INT64_MAX, -1, 1],
        "m": [[1.5, -2.25], [3e38, -3e38]],
        "x": 7.5,
        "x/missing": 0,
    },
    {
        "i": INT64_MAX,
        "f": float("inf"),
        "s": "héllo wörld ☃",
        "v": [2**31, -(2**31), 127],
        "m": [[1e-38, 1e-45], [0.1, 2.0]],
        "x": -1.0,
        "x/missing": 0,
    },
    {
        "i": -1,
        "f": 3.4028234663852886e38,
        "s": b"\x00\xff",
        "v": [128, 16383, 16384],
        "m": [[float("-inf"), 0], [1, 2]],
        "x": 0.0,
        "x/missing": 1,
    },
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
        "a": np.concatenate(
            [
                rng.integers(INT64_MIN, INT64_MAX, size=150, dtype=np.int64),
                rng.integers(-300, 300, size=n - 150),
            ]
        ),
        "b": rng.normal(size=n),
        "c": [("é" * (i % 5)) + str(i) * (i % 200) for i in range(n)],
        "c/missing": rng.integers(0, 2, size=n),
    }
    batch = encode_columns(schema, cols)
    rows = [encode_example({k: v[i] for k, v in cols.items()}, schema) for i in range(n)]
    assert batch == rows


OK_VALUE = {"int64": 1, "float32": 1.0, "bytes": b"x"}


@pytest.mark.parametrize(
    "dtype,value,match",
    [
        ("int64", 2.7, r"expected an int64. Received: float '2.7'"),  # never truncated to 2
        ("int64", "7", r"expected an int64. Received: str '7'"),
        ("int64", None, r"expected an int64. Received: NoneType"),
        ("int64", 2**63, r"expected an int64. Received: 9223372036854775808, outside int64's range"),
        ("float32", "1.5", r"expected a float32 number. Received: str '1.5'"),
        ("float32", None, r"expected a float32 number. Received: NoneType"),
        (
            "float32",
            1e300,
            r"expected a number float32 holds .* Received: 1e\+300, which float32 would store as inf",
        ),
        ("bytes", 5, r"expected bytes or str. Received: int '5'"),  # bytes(5) would be five NUL bytes
        ("bytes", 1.5, r"expected bytes or str. Received: float '1.5'"),
    ],
)
def test_both_encoders_refuse_a_value_that_does_not_fit_by_name(dtype, value, match):
    schema = Schema((Field("v", dtype),))
    with pytest.raises(DataError, match=r"Feature 'v': " + match):
        encode_example({"v": value}, schema)
    with pytest.raises(DataError, match=r"Feature 'v', row 1: " + match):
        encode_columns(schema, {"v": [OK_VALUE[dtype], value]})


def test_both_encoders_agree_at_the_edge_of_float32_range():
    schema = Schema((Field("f", "float32"),))
    largest = float(np.float32(3.4028235e38))
    below_inf = float(np.nextafter(largest + (2.0**103), 0))  # rounds down to float32's largest value
    assert encode_columns(schema, {"f": [below_inf, -below_inf]}) == [
        encode_example({"f": below_inf}, schema),
        encode_example({"f": -below_inf}, schema),
    ]
    assert decode_example(encode_example({"f": below_inf}, schema))["f"] == [largest]
    for value in (largest + 2.0**103, float(np.finfo(np.float64).max)):
        with pytest.raises(DataError, match="would store as inf"):
            encode_example({"f": value}, schema)
        with pytest.raises(DataError, match=r"row 0: .*would store as inf"):
            encode_columns(schema, {"f": np.array([value])})
    assert decode_example(encode_example({"f": float("inf")}, schema))["f"] == [float("inf")]  # inf stays inf


def test_encode_columns_refuses_bad_columns_with_library_errors():
    schema = Schema((Field("a", "int64"), Field("b", "float32", has_mask=True)))
    with pytest.raises(DataError, match=r"Feature 'b': expected 3 values, one per row. Received: 2"):
        encode_columns(schema, {"a": [1, 2, 3], "b": [1.0, 2.0], "b/missing": [0, 0, 0]})
    with pytest.raises(DataError, match=r"Columns have no values for feature 'b/missing'"):
        encode_columns(schema, {"a": [1], "b": [1.0]})
    with pytest.raises(ConfigError, match=r"scalar fields only. Received: 'v' with shape \(2,\)"):
        encode_columns(Schema((Field("v", "int64", shape=(2,)),)), {"v": [[1, 2]]})
    with pytest.raises(
        DataError, match=r"Record has no value for feature 'b/missing' \(the null mask of 'b'\)"
    ):
        encode_example({"a": 1, "b": 1.0}, schema)


@pytest.mark.parametrize(
    "data", [b"\x0a\x05\x0a\x03\x0a\x01\xff", b"\x0a\x0c\x0a\x0a\x0a\x01a\x12\x05\x12\x03\x0a\x01\x00"]
)
def test_decode_example_refuses_malformed_bytes_with_a_data_error(data):
    with pytest.raises(DataError, match="Malformed Example bytes"):
        decode_example(data)


def test_encode_example_names_the_feature_it_lacks():
    with pytest.raises(DataError, match="'s'"):
        encode_example(
            {"i": 1, "f": 1.0}, Schema((Field("i", "int64"), Field("f", "float32"), Field("s", "bytes")))
        )


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


@pytest.mark.parametrize(
    "text,want",
    [
        ("128MiB", 128 << 20),
        ("64MB", 64_000_000),
        ("1g", 10**9),
        ("1000", 1000),
        ("1.5KiB", 1536),
        (4096, 4096),
    ],
)
def test_parse_size(text, want):
    assert parse_size(text) == want


@pytest.mark.parametrize("bad", ["", "12 parsecs", "-5MB", "MB"])
def test_parse_size_rejects(bad):
    with pytest.raises(ConfigError, match="Expected a size"):
        parse_size(bad)


@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({"num_shards": 0}, "num_shards"),
        ({"compression": "zstd"}, "compression"),
        ({"split": "tr ain"}, "split"),
        ({"shard_size": 0}, "shard_size"),
    ],
)
def test_shard_config_validates(kwargs, field):
    with pytest.raises(ConfigError, match=f"{field} must be .* Received: {field}="):
        ShardConfig(**kwargs)


# ---- lists of any length (a text document's token ids)

TOKENS = Schema((Field("tokens", "int64", shape=(None,)), Field("label", "int64")), label="label")


def test_a_variable_length_int64_list_round_trips_through_tensorflow(tf):
    from tfpipe.format.codec import varints

    lists = [
        [],
        [0],
        [5, 0, 127, 128, 16383, 16384, 2**21, 2**40],
        list(range(1000)),
        [INT64_MAX, -1, INT64_MIN],
    ]
    for values in lists:  # the numpy fast path writes the bytes of the checked path
        packed = encode_example({"tokens": np.asarray(values, dtype=np.int64), "label": 1}, TOKENS)
        assert packed == encode_example({"tokens": values, "label": 1}, TOKENS)
        assert decode_example(packed)["tokens"] == values
    assert varints(np.array([300, 1], np.uint16)) == b"\xac\x02\x01"
    assert Schema.from_json(TOKENS.to_json()) == TOKENS and TOKENS.to_json()["fields"][0]["shape"] == [None]
    batch = [encode_example({"tokens": v, "label": i}, TOKENS) for i, v in enumerate(lists)]
    parsed = tf.io.parse_example(tf.constant(batch), TOKENS.parse_spec())
    assert parsed["tokens"].to_list() == lists and parsed["label"].numpy().tolist() == [0, 1, 2, 3, 4]
    one = tf.io.parse_single_example(batch[2], TOKENS.parse_spec())
    assert one["tokens"].numpy().tolist() == lists[2]


def test_only_one_unknown_dimension_is_a_shape():
    with pytest.raises(ManifestError, match=r"expected a fixed shape, or \[None\] for a list of any length"):
        Field("x", "int64", shape=(None, 3))
    with pytest.raises(DataError, match="outside int64's range"):
        encode_example({"tokens": np.array([2**64 - 1], np.uint64), "label": 0}, TOKENS)

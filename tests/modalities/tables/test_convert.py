"""CSV and Parquet conversion: schema inference, round trips through TF, nulls, refusals."""

import os

import numpy as np
import pandas as pd
import pytest

import tfpipe
from tfpipe.errors import DataError
from tfpipe.format.manifest import Manifest


@pytest.fixture(scope="module")
def tf():
    from tfpipe._tf import tf as load

    return load()


def read_back(tf, dest, split="train"):
    """All records of a split, parsed by TensorFlow with the manifest's schema, in shard order."""
    m = Manifest.load(str(dest))
    ds = tf.data.TFRecordDataset(m.shard_paths(split), compression_type=m.tf_compression)
    batch = next(iter(ds.batch(10**6)))
    return {k: v.numpy() for k, v in tf.io.parse_example(batch, m.schema.parse_spec()).items()}, m


def every_dtype_frame(n=37):
    rng = np.random.default_rng(3)
    return pd.DataFrame(
        {
            "i8": rng.integers(-128, 127, n).astype("int8"),
            "i16": rng.integers(-30000, 30000, n).astype("int16"),
            "i32": rng.integers(-(2**31), 2**31 - 1, n).astype("int32"),
            "i64": np.r_[
                np.int64(-(2**63)), np.int64(2**63 - 1), rng.integers(-(2**62), 2**62, n - 2)
            ].astype("int64"),
            "u8": rng.integers(0, 255, n).astype("uint8"),
            "u32": rng.integers(0, 2**32 - 1, n).astype("uint32"),
            "f16": rng.normal(size=n).astype("float16"),
            "f32": rng.normal(size=n).astype("float32"),
            "f64": rng.normal(size=n) * 1e6,
            "b": rng.integers(0, 2, n).astype(bool),
            "s": [f"row {i} ✓" if i % 3 else "" for i in range(n)],
            "cat": pd.Categorical(rng.choice(["cat", "dog", "emu"], n)),
            "y": np.arange(n) % 5,
        }
    )


def test_parquet_round_trip_every_dtype(tf, tmp_path):
    df = every_dtype_frame()
    df.to_parquet(tmp_path / "t.parquet")
    m = tfpipe.convert(str(tmp_path / "t.parquet"), str(tmp_path / "out"), num_shards=4, label="y", workers=1)
    assert m.layout == "table" and m.schema.label == "y"
    dtypes = {f.name: f.dtype for f in m.schema.fields}
    assert dtypes == {
        "i8": "int64",
        "i16": "int64",
        "i32": "int64",
        "i64": "int64",
        "u8": "int64",
        "u32": "int64",
        "f16": "float32",
        "f32": "float32",
        "f64": "float32",
        "b": "int64",
        "s": "bytes",
        "cat": "bytes",
        "y": "int64",
    }
    assert [s.examples for s in m.splits["train"].shards] == [10, 9, 9, 9]
    got, _ = read_back(tf, tmp_path / "out")
    for col in ["i8", "i16", "i32", "i64", "u8", "u32", "b", "y"]:
        np.testing.assert_array_equal(got[col], df[col].astype("int64").to_numpy(), err_msg=col)
    for col in ["f16", "f32", "f64"]:
        np.testing.assert_array_equal(got[col], df[col].astype("float32").to_numpy(), err_msg=col)
    assert [v.decode() for v in got["s"]] == df["s"].tolist()
    assert [v.decode() for v in got["cat"]] == df["cat"].astype(str).tolist()


def test_csv_round_trip_and_chunking_does_not_change_bytes(tf, tmp_path):
    df = every_dtype_frame().drop(columns=["cat", "f16"])
    df["s"] = df["s"].replace("", "z")  # an empty CSV field is a null, not an empty string
    df.to_csv(tmp_path / "t.csv", index=False)
    small = tfpipe.convert(
        str(tmp_path / "t.csv"), str(tmp_path / "a"), num_shards=3, chunk_rows=5, workers=1
    )
    large = tfpipe.convert(
        str(tmp_path / "t.csv"), str(tmp_path / "b"), num_shards=3, chunk_rows=1000, workers=1
    )
    assert [s.checksum for s in small.splits["train"].shards] == [
        s.checksum for s in large.splits["train"].shards
    ]
    got, _ = read_back(tf, tmp_path / "a")
    np.testing.assert_array_equal(got["i64"], df["i64"].to_numpy())
    np.testing.assert_allclose(got["f64"], df["f64"].to_numpy(), rtol=1e-6)
    assert [v.decode() for v in got["s"]] == df["s"].tolist()


def test_null_fails_naming_column_and_row_and_leaves_nothing(tmp_path):
    df = pd.DataFrame({"a": range(37), "b": [1.5] * 37})
    df.loc[23, "b"] = np.nan
    df.to_csv(tmp_path / "t.csv", index=False)
    out = tmp_path / "out"
    with pytest.raises(DataError, match=r"t.csv: column 'b', row 23 .* is null.*--missing fill"):
        tfpipe.convert(str(tmp_path / "t.csv"), str(out), num_shards=2)
    assert not out.exists() or os.listdir(out) == []


def test_null_in_a_later_chunk_is_found_before_writing(tmp_path):
    df = pd.DataFrame({"a": np.arange(100), "s": ["x"] * 100})
    df.loc[97, "s"] = None
    df.to_parquet(tmp_path / "t.parquet")
    with pytest.raises(DataError, match=r"column 's', row 97"):
        tfpipe.convert(str(tmp_path / "t.parquet"), str(tmp_path / "out"), num_shards=4, chunk_rows=10)
    assert not (tmp_path / "out" / "tfpipe.json").exists()
    assert not list((tmp_path / "out").glob("train-*")) if (tmp_path / "out").exists() else True


def test_missing_fill_writes_defaults_and_masks(tf, tmp_path):
    df = pd.DataFrame(
        {
            "i": pd.array([1, None, 3, 4, None], dtype="Int64"),
            "f": [0.5, np.nan, 2.5, np.nan, 4.5],
            "s": ["a", "b", None, "d", "e"],
            "b": pd.array([True, None, False, True, True], dtype="boolean"),
            "ok": [1, 2, 3, 4, 5],
        }
    )
    df.to_parquet(tmp_path / "t.parquet")
    m = tfpipe.convert(str(tmp_path / "t.parquet"), str(tmp_path / "out"), missing="fill", num_shards=2)
    assert m.missing == "fill"
    assert {f.name: f.has_mask for f in m.schema.fields} == {
        "i": True,
        "f": True,
        "s": True,
        "b": True,
        "ok": False,
    }
    got, loaded = read_back(tf, tmp_path / "out")
    assert loaded.missing == "fill"
    assert got["i"].tolist() == [1, 0, 3, 4, 0] and got["i/missing"].tolist() == [0, 1, 0, 0, 1]
    assert got["f"].tolist() == [0.5, 0.0, 2.5, 0.0, 4.5] and got["f/missing"].tolist() == [0, 1, 0, 1, 0]
    assert got["s"].tolist() == [b"a", b"b", b"", b"d", b"e"] and got["s/missing"].tolist() == [0, 0, 1, 0, 0]
    assert got["b"].tolist() == [1, 0, 0, 1, 1] and got["b/missing"].tolist() == [0, 1, 0, 0, 0]
    assert "ok/missing" not in got


@pytest.mark.parametrize(
    "column,values,match",
    [
        ("nested", [[1, 2], [3], [4, 5]], r"t.parquet: column 'nested'.*list"),
        (
            "when",
            pd.to_datetime(["2024-01-01", "2024-01-02", "2024-01-03"]),
            r"t.parquet: column 'when'.*datetime",
        ),
        (
            "big",
            np.array([1, 2, 2**63], dtype="uint64"),
            r"column 'big', row 2 holds 9223372036854775808.*fit int64",
        ),
    ],
)
def test_unsupported_columns_refused_by_name(tmp_path, column, values, match):
    pd.DataFrame({"a": [1, 2, 3], column: values}).to_parquet(tmp_path / "t.parquet")
    with pytest.raises(DataError, match=match):
        tfpipe.convert(str(tmp_path / "t.parquet"), str(tmp_path / "out"))
    assert not (tmp_path / "out" / "tfpipe.json").exists()


def test_label_column_must_exist(tmp_path):
    pd.DataFrame({"a": [1, 2]}).to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(DataError, match=r"label column 'target' not found. Received columns: \['a'\]"):
        tfpipe.convert(str(tmp_path / "t.csv"), str(tmp_path / "out"), label="target")


def test_int_then_float_chunks_unify_to_float(tf, tmp_path):
    (tmp_path / "t.csv").write_text("x\n" + "\n".join(["1"] * 10 + ["2.5"]) + "\n")
    m = tfpipe.convert(str(tmp_path / "t.csv"), str(tmp_path / "out"), chunk_rows=4, num_shards=1)
    assert m.schema["x"].dtype == "float32"
    got, _ = read_back(tf, tmp_path / "out")
    assert got["x"].tolist() == [1.0] * 10 + [2.5]


def test_folder_of_parquet_files_in_name_order(tf, tmp_path):
    src = tmp_path / "parts"
    src.mkdir()
    for k in range(3):
        pd.DataFrame({"id": np.arange(k * 10, k * 10 + 10)}).to_parquet(src / f"part-{k}.parquet")
    m = tfpipe.convert(str(src), str(tmp_path / "out"), num_shards=4)
    assert m.splits["train"].examples == 30
    got, _ = read_back(tf, tmp_path / "out")
    assert got["id"].tolist() == list(range(30))


def test_shard_size_picks_the_count(tmp_path):
    pd.DataFrame({"s": ["x" * 1000] * 50}).to_parquet(tmp_path / "t.parquet")
    m = tfpipe.convert(str(tmp_path / "t.parquet"), str(tmp_path / "out"), shard_size="10KB")
    assert len(m.splits["train"].shards) == 6  # ~51 KB of records / 10 KB
    assert all(s.bytes < 12_000 for s in m.splits["train"].shards)

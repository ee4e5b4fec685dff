"""Parquet as pyarrow, Spark and DuckDB read it: a stored pandas index is a column, and a
Hive-partitioned folder (as `pyarrow.parquet.write_to_dataset` writes it) is read whole, its
partition values kept as columns, its files in sorted order."""

import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tfpipe
from tfpipe.errors import ConfigError, DataError

from support.records import column, records


def test_a_named_pandas_index_is_kept_as_the_column_it_is(tmp_path):
    """statecrime's `state`: df.to_parquet() stores the index as a real column."""
    frame = pd.DataFrame(
        {"murder": [7.1, 3.2, 5.5]}, index=pd.Index(["Alabama", "Alaska", "Arizona"], name="state")
    )
    frame.to_parquet(tmp_path / "statecrime.parquet")
    assert "state" in pq.read_schema(tmp_path / "statecrime.parquet").names  # what pyarrow sees
    m = tfpipe.convert(str(tmp_path / "statecrime.parquet"), str(tmp_path / "out"), workers=1)
    recs, _ = records(tmp_path / "out")
    assert m.schema.names == ["murder", "state"]
    assert column(recs, "state") == [b"Alabama", b"Alaska", b"Arizona"]
    assert "column 'state' is the pandas index 'state'" in m.split("train").notes[0]


def test_a_range_index_stored_as_metadata_adds_no_column(tmp_path):
    pd.DataFrame({"a": [1, 2, 3]}).to_parquet(tmp_path / "t.parquet")
    m = tfpipe.convert(str(tmp_path / "t.parquet"), str(tmp_path / "out"), workers=1)
    assert m.schema.names == ["a"] and not m.split("train").notes


@pytest.fixture
def hive(tmp_path):
    """A Hive-partitioned dataset, as write_to_dataset writes it; rows in sorted-path order."""
    rng = np.random.default_rng(3)
    n = 37
    frame = pd.DataFrame(
        {
            "x": np.arange(n),
            "f": rng.normal(size=n),
            "year": rng.choice([2021, 2022, 2023], n),
            "zip": rng.choice(["01234", "00501", "90210"], n),
            "y": rng.integers(0, 2, n),
        }
    )
    root = tmp_path / "hive"
    pq.write_to_dataset(
        pa.Table.from_pandas(frame, preserve_index=False), root, partition_cols=["year", "zip"]
    )
    (root / "_SUCCESS").write_text("")  # as Spark leaves it
    order = sorted(
        os.path.relpath(os.path.join(d, f), root)
        for d, _, fs in os.walk(root)
        for f in fs
        if f.endswith(".parquet")
    )
    expected = pd.concat(
        [
            pq.read_table(root / rel)
            .to_pandas()
            .assign(year=int(rel.split("/")[0][5:]), zip=rel.split("/")[1][4:])
            for rel in order
        ]
    )
    return root, expected


def test_a_hive_partitioned_folder_is_read_whole_with_its_partition_columns(tmp_path, hive):
    root, expected = hive
    m = tfpipe.convert(str(root), str(tmp_path / "out"), label="y", num_shards=4, workers=1, chunk_rows=5)
    recs, _ = records(tmp_path / "out")
    assert m.split("train").examples == 37
    assert m.schema.names == ["x", "f", "y", "year", "zip"]
    assert m.schema["year"].dtype == "int64" and m.schema["zip"].dtype == "bytes"  # 01234 stays text
    assert column(recs, "x") == expected["x"].tolist()  # every file, in sorted path order
    assert column(recs, "year") == expected["year"].tolist()
    assert column(recs, "zip") == [z.encode() for z in expected["zip"]]
    assert "Hive partition folders" in m.split("train").options["format_reason"]


@pytest.mark.slow
def test_a_hive_folder_converts_alike_on_beam(tmp_path, hive):
    pytest.importorskip("apache_beam")
    root, _ = hive
    local = tfpipe.convert(str(root), str(tmp_path / "local"), label="y", num_shards=3, workers=1)
    beam = tfpipe.convert(
        str(root), str(tmp_path / "beam"), label="y", num_shards=3, workers=1, engine="beam"
    )
    assert [s.checksum for s in beam.split("train").shards] == [
        s.checksum for s in local.split("train").shards
    ]


def test_a_file_beside_partition_folders_is_refused_by_name(tmp_path, hive):
    root, _ = hive
    pq.write_table(pa.table({"x": [99], "f": [0.5], "y": [1]}), root / "part-0.parquet")
    with pytest.raises(DataError, match=r"Received: part-0.parquet under no partition folder"):
        tfpipe.convert(str(root), str(tmp_path / "out"), label="y")


def test_a_folder_that_is_no_partition_is_refused(tmp_path):
    root = tmp_path / "t"
    (root / "extra").mkdir(parents=True)
    pq.write_table(pa.table({"x": [1]}), root / "a.parquet")
    pq.write_table(pa.table({"x": [2]}), root / "extra" / "b.parquet")
    with pytest.raises(DataError, match=r"subfolder\(s\) \['extra'\], whose files would be left out"):
        tfpipe.convert(str(root), str(tmp_path / "out"), format="parquet")


def test_csv_options_are_refused_for_parquet_data_columns(tmp_path, hive):
    root, _ = hive
    with pytest.raises(
        ConfigError, match=r"null_values \(--null-values\) applies to CSV files.* for a Parquet table"
    ):
        tfpipe.convert(str(root), str(tmp_path / "a"), null_values=["NA"])
    with pytest.raises(ConfigError, match=r"Received: \['x'\] for the Parquet source"):
        tfpipe.convert(str(root), str(tmp_path / "b"), column_types={"x": "string"})
    m = tfpipe.convert(str(root), str(tmp_path / "c"), label="y", column_types={"zip": "int"}, workers=1)
    assert m.schema["zip"].dtype == "int64"


@pytest.mark.gcs
def test_a_hive_folder_on_gcs_converts_as_the_local_one(tmp_path, hive, gcs_bucket):
    from tfpipe import storage

    root, _ = hive
    for d, _, names in os.walk(root):
        for name in names:
            rel = os.path.relpath(os.path.join(d, name), root).replace(os.sep, "/")
            storage.write_atomic(f"{gcs_bucket}/hive/{rel}", (root / rel).read_bytes())
    local = tfpipe.convert(str(root), str(tmp_path / "local"), label="y", num_shards=2, workers=1)
    remote = tfpipe.convert(f"{gcs_bucket}/hive", str(tmp_path / "gcs"), label="y", num_shards=2, workers=1)
    assert [s.checksum for s in remote.split("train").shards] == [
        s.checksum for s in local.split("train").shards
    ]

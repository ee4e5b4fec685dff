"""A split that joins a dataset: written with the dataset's schema when its records fit it (a
column without nulls still gets the dataset's null mask), refused naming the columns that
differ when they do not, with the way to put a split with nulls beside one without."""

import numpy as np
import pandas as pd
import pytest

from tfpipe.cli import main

from support.records import column, records


def table(path, n=6, columns=300, nulls=(), floats=()):
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({f"c{i}": rng.integers(0, 9, n) for i in range(columns)} | {"y": np.arange(n) % 2})
    for c in floats:
        frame[c] = frame[c] + 0.5
    frame = frame.astype(dict.fromkeys(nulls, "Int64"))
    for c in nulls:
        frame.loc[1, c] = pd.NA
    frame.to_csv(path, index=False)
    return path


def convert(capsys, src, dest, *flags):
    code = main(
        ["convert", str(src), str(dest), "--quiet", "--workers", "1", "--label", "y", *map(str, flags)]
    )
    out = capsys.readouterr()
    return code, out.err


def test_a_split_whose_schema_differs_is_refused_naming_the_columns_briefly(tmp_path, capsys):
    train = table(tmp_path / "train.csv")
    val = table(tmp_path / "val.csv", nulls=("c7", "c8", "c9", "c10"), floats=("c200",))
    assert convert(capsys, train, tmp_path / "out")[0] == 0
    code, err = convert(capsys, val, tmp_path / "out", "--split", "validation", "--missing", "fill")
    assert code == 1
    assert "column 'c7' has nulls in this split (a 'c7/missing' mask), none in the dataset's" in err
    assert "column 'c8' has nulls" in err and "and 2 more" in err  # c9, c10 and c200 past the first 3
    assert len(err) < 1200, len(err)  # not two whole schemas of 300 columns
    assert "convert the split with nulls first, with --missing fill" in err


def test_a_float_column_that_is_int_in_the_dataset_is_named(tmp_path, capsys):
    assert convert(capsys, table(tmp_path / "train.csv", columns=3), tmp_path / "out")[0] == 0
    val = table(tmp_path / "val.csv", columns=3, floats=("c1",))
    code, err = convert(capsys, val, tmp_path / "out", "--split", "validation")
    assert code == 1 and "column 'c1' is int64 in the dataset, float32 in this split" in err


def test_the_advised_order_puts_a_split_with_nulls_beside_one_without(tmp_path, capsys):
    train = table(tmp_path / "train.csv", columns=4)
    val = table(tmp_path / "val.csv", columns=4, nulls=("c2",))
    code, err = convert(capsys, val, tmp_path / "out", "--split", "validation", "--missing", "fill")
    assert code == 0, err
    code, err = convert(capsys, train, tmp_path / "out")
    assert code == 0, err
    recs, m = records(tmp_path / "out", "train")
    assert m.schema["c2"].has_mask and column(recs, "c2/missing") == [0] * 6  # written with the mask
    val_recs, _ = records(tmp_path / "out", "validation")
    assert column(val_recs, "c2/missing") == [0, 1, 0, 0, 0, 0]
    assert [list(r) for r in recs] == [list(r) for r in val_recs]  # the same features in every record


@pytest.mark.parametrize("order", ["parquet_then_csv", "csv_then_parquet"])
def test_a_split_from_another_format_with_the_same_columns_joins(tmp_path, capsys, order):
    """int64 in Parquet and Int64 from CSV are the same int64 feature."""
    frame = pd.DataFrame({"x": [1, 2, 3], "y": [0, 1, 0]})
    frame.to_parquet(tmp_path / "a.parquet", index=False)
    frame.to_csv(tmp_path / "b.csv", index=False)
    first, second = ("a.parquet", "b.csv") if order == "parquet_then_csv" else ("b.csv", "a.parquet")
    assert convert(capsys, tmp_path / first, tmp_path / "out")[0] == 0
    code, err = convert(capsys, tmp_path / second, tmp_path / "out", "--split", "validation")
    assert code == 0, err
    assert column(records(tmp_path / "out", "validation")[0], "x") == [1, 2, 3]

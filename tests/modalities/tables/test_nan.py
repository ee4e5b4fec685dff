"""NaN is a value, not a null, and float32 does not silently flush small values: a float NaN
is kept as NaN in every table format (a NaN label is refused by row), and a value float32
would store as 0.0 or a subnormal is refused with its count, first row and the way out."""

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

from tfpipe.cli import main

from support.records import column, nothing_written, records

NAN = float("nan")


def convert(capsys, src, dest, *flags):
    code = main(["convert", str(src), str(dest), "--quiet", "--workers", "1", *map(str, flags)])
    return code, capsys.readouterr().err


def write(path, table):
    if path.suffix == ".parquet":
        pq.write_table(table, path)
    else:
        feather.write_feather(table, path)


def same(got, want):
    """Float lists equal, NaN equal to NaN, compared as float32 stores them."""
    np.testing.assert_array_equal(np.float32(got), np.float32(want))


@pytest.mark.parametrize("name", ["t.parquet", "t.feather"])
@pytest.mark.parametrize("dtype", [pa.float64(), pa.float32()])
def test_a_nan_in_a_typed_float_column_is_kept_as_nan(tmp_path, capsys, name, dtype):
    write(tmp_path / name, pa.table({"x": pa.array([NAN, 1.5, -NAN], dtype), "y": [0, 1, 0]}))
    code, err = convert(capsys, tmp_path / name, tmp_path / "out", "--label", "y")
    assert code == 0, err  # not "row 0 is null"
    recs, m = records(tmp_path / "out")
    same(column(recs, "x"), [NAN, 1.5, NAN])
    assert not m.schema["x"].has_mask
    assert m.schema["x"].source_dtype == dtype.to_pandas_dtype().__name__  # float32 / float64, as before


@pytest.mark.parametrize("name", ["t.parquet", "t.feather", "t.csv"])
def test_missing_fill_fills_nulls_and_keeps_nan(tmp_path, capsys, name):
    if name == "t.csv":
        (tmp_path / name).write_text("x,y\nnan,0\n,1\n2.5,0\nNaN,1\n")
    else:
        write(tmp_path / name, pa.table({"x": pa.array([NAN, None, 2.5, NAN]), "y": [0, 1, 0, 1]}))
    code, err = convert(capsys, tmp_path / name, tmp_path / "out", "--label", "y", "--missing", "fill")
    assert code == 0, err
    recs, m = records(tmp_path / "out")
    same(column(recs, "x"), [NAN, 0.0, 2.5, NAN])  # NaN stays NaN; only the null is filled
    assert column(recs, "x/missing") == [0, 1, 0, 0]
    assert m.schema["x"].dtype == "float32"


def test_nan_in_csv_is_a_float_as_numpy_and_r_write_it(tmp_path, capsys):
    np.savetxt(
        tmp_path / "t.csv",
        np.array([[NAN, 0], [1.25, 1], [-np.inf, 0]]),
        delimiter=",",
        header="x,y",
        comments="",
    )
    (tmp_path / "d.csv").write_text("x,y\n-nan,0\n 3 ,1\n")
    for name in ("t.csv", "d.csv"):
        code, err = convert(capsys, tmp_path / name, tmp_path / name.replace(".", "_"), "--label", "y")
        assert code == 0, err
        _, m = records(tmp_path / name.replace(".", "_"))
        assert m.schema["x"].dtype == "float32" and not m.schema["x"].has_mask
    same(column(records(tmp_path / "t_csv")[0], "x"), [NAN, 1.25, -np.inf])
    same(column(records(tmp_path / "d_csv")[0], "x"), [NAN, 3.0])
    code, err = convert(capsys, tmp_path / "d.csv", tmp_path / "declared", "--column-type", "x=float")
    assert code == 0, err
    same(column(records(tmp_path / "declared")[0], "x"), [NAN, 3.0])


@pytest.mark.parametrize("name", ["t.parquet", "t.csv"])
@pytest.mark.parametrize("drop", [False, True])
def test_a_nan_label_is_refused_naming_its_row(tmp_path, capsys, name, drop):
    if name == "t.csv":
        (tmp_path / name).write_text("x,y\n1,0.5\n2,1.5\n3,nan\n")
    else:
        write(tmp_path / name, pa.table({"x": [1, 2, 3], "y": pa.array([0.5, 1.5, NAN])}))
    flags = ("--missing-label", "drop") if drop else ()
    code, err = convert(capsys, tmp_path / name, tmp_path / "out", "--label", "y", *flags)
    assert code == 1 and "label column 'y', row 2 (0-based, header excluded) is NaN" in err, err
    assert nothing_written(tmp_path / "out")


def test_nan_named_missing_is_a_null_label_that_drop_leaves_out(tmp_path, capsys):
    (tmp_path / "t.csv").write_text("x,y\n1,0.5\n2,nan\n3,1.5\n")
    code, err = convert(
        capsys,
        tmp_path / "t.csv",
        tmp_path / "out",
        "--label",
        "y",
        "--null-values",
        "nan",
        "--missing-label",
        "drop",
    )
    assert code == 0, err
    recs, m = records(tmp_path / "out")
    assert column(recs, "x") == [1, 3] and m.split("train").dropped_rows == 1


# ---- float32 underflow ----


@pytest.mark.parametrize("name", ["t.parquet", "t.csv"])
def test_values_float32_would_flush_or_make_subnormal_are_refused_with_count_and_first_row(
    tmp_path, capsys, name
):
    values = [0.5, 1e-50, 2.0, 1e-40, -3e-45, 0.0]
    if name == "t.csv":
        (tmp_path / name).write_text("x\n" + "\n".join(map(repr, values)) + "\n")
    else:
        write(tmp_path / name, pa.table({"x": pa.array(values, pa.float64())}))
    code, err = convert(capsys, tmp_path / name, tmp_path / "out")
    assert code == 1
    assert "column 'x' holds 3 values below float32's smallest normal number" in err
    assert "first row 1: 1e-50, which float32" in err and "would store as 0.0" in err
    assert "Scale the column" in err or "scale it" in err
    assert ("--column-type x=string" in err) == (name == "t.csv")
    assert nothing_written(tmp_path / "out")


def test_small_values_float32_holds_as_they_are_are_kept(tmp_path, capsys):
    """A float32 column's own subnormals, and the smallest normal float32, change nothing."""
    tiny = np.finfo(np.float32).tiny
    sub = np.float32(1e-40)
    write(
        tmp_path / "t.parquet",
        pa.table({"a": pa.array([sub, tiny, 0.0], pa.float32()), "b": [float(tiny), 1.0, 0.0]}),
    )
    code, err = convert(capsys, tmp_path / "t.parquet", tmp_path / "out")
    assert code == 0, err
    recs, _ = records(tmp_path / "out")
    assert np.float32(column(recs, "a")).tolist() == [sub, tiny, 0.0]

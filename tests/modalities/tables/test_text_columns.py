"""CSV text is kept as written: only an empty field is missing, codes stay text, and what pandas
would read otherwise is said. Tables are written by pandas, as users write them."""

import os

import numpy as np
import pandas as pd
import pytest

import tfpipe
from tfpipe.errors import DataError

from support.cli import run_cli
from support.records import column, nothing_written, records

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PANDAS_MISSING = ["NA", "None", "N/A", "null", "NULL", "nan", "NaN", "#N/A", "<NA>", "-nan"]


def cli(*args):
    return run_cli("convert", *args, "--quiet", "--workers", "1")


# ---- text pandas takes for missing is kept as written


def test_text_pandas_reads_as_missing_is_kept_quoted_or_not(tmp_path):
    n = len(PANDAS_MISSING)
    frame = pd.DataFrame({"country": PANDAS_MISSING, "code": [f"c{i}" for i in range(n)], "y": range(n)})
    frame.to_csv(tmp_path / "plain.csv", index=False)  # pandas writes NA, None, ... unquoted
    frame.to_csv(tmp_path / "quoted.csv", index=False, quoting=1)
    for name in ("plain", "quoted"):
        tfpipe.convert(str(tmp_path / f"{name}.csv"), str(tmp_path / name), workers=1)
        recs, m = records(tmp_path / name)
        assert column(recs, "country") == [t.encode() for t in PANDAS_MISSING]
        assert not m.schema["country"].has_mask  # no null, so no mask


def test_a_label_class_named_none_is_kept_not_dropped(tmp_path):
    """R's Arthritis: 42 of 84 'Improved' labels are the text None."""
    improved = ["None"] * 42 + ["Some"] * 14 + ["Marked"] * 28
    age = np.random.default_rng(1).integers(23, 75, 84)
    pd.DataFrame({"Age": age, "Improved": improved}).to_csv(tmp_path / "arthritis.csv", index=False)
    m = tfpipe.convert(
        str(tmp_path / "arthritis.csv"),
        str(tmp_path / "out"),
        label="Improved",
        missing_label="drop",
        workers=1,
    )
    recs, _ = records(tmp_path / "out")
    assert (m.split("train").examples, m.split("train").dropped_rows) == (84, 0)
    assert column(recs, "Improved").count(b"None") == 42
    assert any("'Improved' holds 42 values such as 'None'" in n for n in m.split("train").notes)


@pytest.mark.slow
def test_null_values_name_what_is_missing_for_every_column_or_one(tmp_path):
    """R's airquality writes missing Ozone as NA; 'NA' in country is Namibia."""
    src = tmp_path / "air.csv"
    pd.DataFrame(
        {
            "Ozone": ["41", "NA", "12", "NA", "18"],
            "Wind": ["7.4", "8", "-", "11.5", "N/A"],
            "country": ["NA", "DE", "NA", "FR", "-"],
            "Temp": [67, 72, 74, 62, 56],
        }
    ).to_csv(src, index=False)
    run = cli(src, tmp_path / "out", "--null-values", "Ozone=NA", "--null-values=-,N/A", "--missing", "fill")
    assert run.returncode == 0, run.stderr
    recs, m = records(tmp_path / "out")
    assert m.schema["Ozone"].dtype == "int64" and m.schema["Wind"].dtype == "float32"
    assert column(recs, "Ozone") == [41, 0, 12, 0, 18]
    assert column(recs, "Ozone/missing") == [0, 1, 0, 1, 0]
    assert column(recs, "Wind/missing") == [0, 0, 1, 0, 1]
    assert column(recs, "country") == [b"NA", b"DE", b"NA", b"FR", b""]  # '-' is missing everywhere
    assert column(recs, "country/missing") == [0, 0, 0, 0, 1]
    assert m.split("train").options["null_values"] == {"Ozone": ["NA"], "*": ["-", "N/A"]}


@pytest.mark.slow
def test_a_column_of_numbers_with_na_is_text_and_the_summary_says_how_to_read_it(tmp_path):
    src = tmp_path / "air.csv"
    src.write_text("Ozone,Temp\n41,67\nNA,72\n12,74\n")
    run = cli(src, tmp_path / "out")
    assert run.returncode == 0, run.stderr
    assert "note: column 'Ozone' is stored as text: it holds numbers, but 1 value such as 'NA'" in run.stdout
    assert "pass --null-values NA (null_values=['NA']) to store numbers with nulls" in run.stdout
    recs, m = records(tmp_path / "out")
    assert column(recs, "Ozone") == [b"41", b"NA", b"12"] and m.schema["Temp"].dtype == "int64"


# ---- codes stay text


def test_leading_zeros_and_codes_stay_text_and_are_said(tmp_path):
    src = tmp_path / "codes.csv"
    pd.DataFrame(
        {
            "zip": ["01234", "00501", "12345"],
            "id": ["7", "007", "0007"],
            "part": ["1E5", "2E3", "7E1"],
            "x": ["1.50", "1e30", "1E+05"],  # numbers as programs write them
            "n": [1, 2, 3],
        }
    ).to_csv(src, index=False)
    m = tfpipe.convert(str(src), str(tmp_path / "out"), workers=1)
    recs, _ = records(tmp_path / "out")
    assert column(recs, "zip") == [b"01234", b"00501", b"12345"]
    assert column(recs, "id") == [b"7", b"007", b"0007"]  # three distinct IDs, not three 7s
    assert column(recs, "part") == [b"1E5", b"2E3", b"7E1"]
    assert m.schema["x"].dtype == "float32" and m.schema["n"].dtype == "int64"
    notes = " ".join(m.split("train").notes)
    assert "'01234' (" in notes and "has a leading zero, which a number would drop" in notes
    assert "'007' (" in notes and "'1E5' (" in notes and "is a code" in notes
    assert "--column-type zip=int" in notes


@pytest.mark.slow
def test_column_type_declares_a_type(tmp_path):
    src = tmp_path / "codes.csv"
    pd.DataFrame({"zip": ["01234", "00501"], "part": ["1E5", "2E3"], "n": [5, 6]}).to_csv(src, index=False)
    run = cli(
        src,
        tmp_path / "out",
        "--column-type",
        "zip=int",
        "--column-type",
        "part=float",
        "--column-type",
        "n=string",
    )
    assert run.returncode == 0, run.stderr
    recs, m = records(tmp_path / "out")
    assert column(recs, "zip") == [1234, 501] and column(recs, "part") == [100000.0, 2000.0]
    assert column(recs, "n") == [b"5", b"6"] and not m.split("train").notes
    with pytest.raises(DataError, match=r"column 'n', row 1 holds 'x', but the column is declared int"):
        (tmp_path / "bad.csv").write_text("n\n5\nx\n")
        tfpipe.convert(str(tmp_path / "bad.csv"), str(tmp_path / "bad"), column_types={"n": "int"})


def test_a_later_code_in_an_int_column_is_refused_with_the_way_out(tmp_path):
    src = tmp_path / "ids.csv"
    src.write_text("id\n" + "".join(f"{i}\n" for i in range(1, 10)) + "007\n")
    with pytest.raises(
        DataError, match=r"column 'id', row 9 holds '007', but the column holds integers"
    ) as e:
        tfpipe.convert(str(src), str(tmp_path / "out"), chunk_rows=4)
    assert "--column-type id=string" in str(e.value) and nothing_written(tmp_path / "out")


@pytest.mark.parametrize("value", [-(2**63) - 1, 2**64])
def test_an_int_beyond_int64_is_refused_by_row(tmp_path, value):
    pd.DataFrame({"n": [str(1), str(value), "3"]}).to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(
        DataError, match=rf"t.csv: column 'n', row 1 holds {value}. Expected values that fit int64"
    ):
        tfpipe.convert(str(tmp_path / "t.csv"), str(tmp_path / "out"))
    assert nothing_written(tmp_path / "out")


# ---- the header


@pytest.mark.parametrize("sep, name", [("\t", "tab"), (";", "semicolon")])
def test_another_separator_in_a_csv_is_refused(tmp_path, sep, name):
    pd.DataFrame({"id": [1, 2], "label": ["a", "b"]}).to_csv(tmp_path / "t.csv", sep=sep, index=False)
    with pytest.raises(DataError, match=rf"t.csv, line 1: expected comma-separated .* holds 1 {name}\(s\)"):
        tfpipe.convert(str(tmp_path / "t.csv"), str(tmp_path / "out"))


def test_an_unnamed_header_field_is_kept_and_said(tmp_path):
    """pandas' to_csv() with its index, as R's write.csv with row names, leaves the first name empty."""
    pd.DataFrame({"mpg": [21.0, 22.8]}, index=["Mazda RX4", "Datsun 710"]).to_csv(tmp_path / "mtcars.csv")
    m = tfpipe.convert(str(tmp_path / "mtcars.csv"), str(tmp_path / "out"), workers=1)
    recs, _ = records(tmp_path / "out")
    assert column(recs, "Unnamed: 0") == [b"Mazda RX4", b"Datsun 710"]
    assert "column 0 has no name in the header" in m.split("train").notes[0]


# ---- the null mask's name


def test_a_column_named_like_a_null_mask_is_refused_before_anything_is_written(tmp_path):
    frame = pd.DataFrame({"Ozone": [41.0, None, 12.0], "Ozone/missing": [0, 0, 0], "y": [1, 2, 3]})
    frame.to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(
        DataError, match=r"column 'Ozone/missing' has the name of the null mask .* column 'Ozone'"
    ):
        tfpipe.convert(str(tmp_path / "t.csv"), str(tmp_path / "out"), missing="fill")
    assert nothing_written(tmp_path / "out")


# ---- every problem at once


@pytest.mark.slow
def test_the_first_pass_reports_every_problem_at_once(tmp_path):
    src = tmp_path / "t.csv"
    src.write_text("a,b,c,y\n1,x,1.5,0\n2,y,,1\nhello,z,2.5,\n4,w,3.5,1\n")
    run = cli(src, tmp_path / "out", "--label", "y", "--chunk-rows", "2")
    assert run.returncode == 1
    err = run.stderr
    assert "the first pass found 3 problems" in err
    assert "column 'a', row 2 holds 'hello', but the column holds integers" in err
    assert "label column 'y', row 2 (0-based, header excluded) is null" in err
    assert "column 'c', row 1 (0-based, header excluded) is null" in err
    assert nothing_written(tmp_path / "out")


def test_ragged_rows_are_all_listed(tmp_path):
    src = tmp_path / "t.csv"
    src.write_text("a,b\n1,2\n3\n4,5\n6,7,8\n")
    with pytest.raises(DataError, match=r"found 2 problems") as e:
        tfpipe.convert(str(src), str(tmp_path / "out"))
    assert "line 3: expected 2 fields" in str(e.value) and "line 5: expected 2 fields" in str(e.value)


def test_int64_range_is_exact_at_nineteen_digits():
    # The check compares digit strings, not floats: the last unit on each side decides.
    import pandas as pd

    from tfpipe.modalities.tables.convert.values import beyond_int64_text

    fits = [str(2**63 - 1), str(-(2**63)), "+0009223372036854775807", " 42 ", "-0"]
    assert beyond_int64_text(pd.Series(fits, dtype="string")) is None
    for value in (2**63, -(2**63) - 1, 10**19, -(10**25)):
        text = pd.Series([*fits, f" {value:+d} "], dtype="string")
        assert beyond_int64_text(text) == (len(fits), value)

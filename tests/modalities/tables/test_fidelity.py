"""Tables are converted exactly or refused by name: nullable ints, null labels, ragged rows,
float32 precision, type changes, page checksums, encodings and unreadable files."""

import csv
import gzip
import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tfpipe
from tfpipe.errors import ConfigError, DataError
from tfpipe.modalities.tables.convert import scan as tables_scan

from support.cli import main_cli, run_cli
from support.records import column, nothing_written, records


def cli(*args):
    return run_cli("convert", *args, "--quiet")


# ---- nullable ints stay int64, whatever the source

IDS = [16777217, None, 16777219, 2**53 + 1, -(2**63), 2**63 - 1, None]


def test_pyarrow_int64_with_nulls_stays_exact_with_its_mask(tmp_path):
    src = tmp_path / "ids.parquet"
    pq.write_table(
        pa.table(
            {
                "id": pa.array(IDS, pa.int64()),
                "small": pa.array([1, 2, None, 4, 5, 6, 7], pa.int32()),
                "y": [0, 1, 0, 1, 0, 1, 0],
            }
        ),
        src,
    )
    assert pq.read_schema(src).pandas_metadata is None  # as pyarrow, Spark or DuckDB write it
    m = tfpipe.convert(str(src), str(tmp_path / "out"), missing="fill", num_shards=2, workers=1)
    assert (m.schema["id"].dtype, m.schema["id"].has_mask, m.schema["small"].dtype) == (
        "int64",
        True,
        "int64",
    )
    recs, _ = records(tmp_path / "out")
    assert column(recs, "id") == [v or 0 for v in IDS]
    assert column(recs, "id/missing") == [int(v is None) for v in IDS]
    assert column(recs, "small") == [1, 2, 0, 4, 5, 6, 7] and column(recs, "small/missing") == [
        0,
        0,
        1,
        0,
        0,
        0,
        0,
    ]


def test_csv_int64_with_nulls_stays_exact(tmp_path):
    src = tmp_path / "ids.csv"
    src.write_text("id,y\n" + "".join(f"{'' if v is None else v},{k % 2}\n" for k, v in enumerate(IDS)))
    tfpipe.convert(str(src), str(tmp_path / "out"), missing="fill", chunk_rows=3, workers=1)
    recs, m = records(tmp_path / "out")
    assert m.schema["id"].dtype == "int64" and column(recs, "id") == [v or 0 for v in IDS]


def test_uint64_converts_when_it_fits_int64_and_is_refused_by_row_when_not(tmp_path):
    pq.write_table(pa.table({"n": pa.array([1, None, 2**63 - 1], pa.uint64())}), tmp_path / "ok.parquet")
    tfpipe.convert(str(tmp_path / "ok.parquet"), str(tmp_path / "ok"), missing="fill", workers=1)
    assert column(records(tmp_path / "ok")[0], "n") == [1, 0, 2**63 - 1]
    pq.write_table(pa.table({"n": pa.array([1, 2, 2**64 - 1], pa.uint64())}), tmp_path / "big.parquet")
    with pytest.raises(
        DataError,
        match=r"big.parquet: column 'n', row 2 holds 18446744073709551615. Expected "
        r"values that fit int64",
    ):
        tfpipe.convert(str(tmp_path / "big.parquet"), str(tmp_path / "big"))


# ---- a label is never made up

PENGUINS = [  # (body mass, sex); the label is null in rows 3, 4 and 9
    (3750, "male"),
    (3800, "female"),
    (3250, "female"),
    (None, None),
    (3450, None),
    (3650, "male"),
    (3625, "female"),
    (4675, "male"),
    (3475, "female"),
    (4250, None),
    (3300, "female"),
    (3700, "male"),
    (3200, "female"),
]


@pytest.fixture
def penguins(tmp_path):
    path = tmp_path / "penguins.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["body_mass_g", "sex"])
        w.writerows(["" if v is None else v for v in row] for row in PENGUINS)
    return path


@pytest.mark.parametrize("missing", ["error", "fill"])
def test_null_label_is_refused_by_name_even_with_fill(penguins, tmp_path, missing):
    with pytest.raises(
        DataError,
        match=r"penguins.csv: label column 'sex', row 3 \(0-based, header excluded\) "
        r"is null.*--missing fill \(missing='fill'\).*--missing-label drop "
        r"\(missing_label='drop'\)",
    ):
        tfpipe.convert(str(penguins), str(tmp_path / "out"), label="sex", missing=missing)
    assert nothing_written(tmp_path / "out")


def test_null_label_rows_are_dropped_counted_and_listed(penguins, tmp_path):
    m = tfpipe.convert(
        str(penguins),
        str(tmp_path / "out"),
        label="sex",
        missing="fill",
        missing_label="drop",
        num_shards=3,
        chunk_rows=4,
        workers=1,
    )
    recs, loaded = records(tmp_path / "out")
    kept = [row for row in PENGUINS if row[1] is not None]
    assert column(recs, "sex") == [s.encode() for _, s in kept]
    assert column(recs, "body_mass_g") == [b for b, _ in kept]  # the mass null was in a dropped row
    for manifest in (m, loaded):
        split = manifest.splits["train"]
        assert (split.examples, split.dropped_rows) == (10, 3)
        assert [s.examples for s in split.shards] == [4, 3, 3]  # shards cut over the kept rows
        assert [s.input for s in split.skipped] == [str(penguins)]
        assert "3 rows with a null label 'sex' left out" in split.skipped[0].reason
        assert "rows 3, 4, 9 (0-based, header excluded)" in split.skipped[0].reason
    assert not m.schema["sex"].has_mask and not m.schema["body_mass_g"].has_mask


def test_dropping_rows_resumes_exactly(tmp_path):
    n = 301
    df = pd.DataFrame(
        {"x": np.arange(n), "y": pd.array([None if i % 7 == 3 else i % 5 for i in range(n)], "Int64")}
    )
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), tmp_path / "t.parquet")
    options = {"label": "y", "missing_label": "drop", "num_shards": 5, "chunk_rows": 16, "workers": 1}
    ref = tfpipe.convert(str(tmp_path / "t.parquet"), str(tmp_path / "ref"), **options)

    def stop(tick):
        if tick.shards_done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        tfpipe.convert(str(tmp_path / "t.parquet"), str(tmp_path / "out"), progress=stop, **options)
    done = tfpipe.convert(str(tmp_path / "t.parquet"), str(tmp_path / "out"), resume=True, **options)
    assert [s.checksum for s in done.splits["train"].shards] == [
        s.checksum for s in ref.splits["train"].shards
    ]
    assert done.splits["train"].dropped_rows == ref.splits["train"].dropped_rows == 43
    assert column(records(tmp_path / "out")[0], "x") == [i for i in range(n) if i % 7 != 3]


@pytest.mark.slow
def test_cli_summary_counts_dropped_rows(penguins, tmp_path):
    out = cli(penguins, tmp_path / "out", "--label", "sex", "--missing", "fill", "--missing-label", "drop")
    assert out.returncode == 0, out.stderr
    assert "converted 10 examples into 1 shard," in out.stdout and "3 rows dropped" in out.stdout
    assert "rows 3, 4, 9" in out.stdout


def test_drop_needs_a_label_column():
    with pytest.raises(ConfigError, match=r"missing_label='drop' \(--missing-label drop\).*label=None"):
        tfpipe.convert("x.csv", "out", missing_label="drop")


# ---- CSV rows as wide as the header, ragged rows refused by line


def write_sklearn_like(path, n_rows, n_features, classes):
    """scikit-learn's bundled CSVs: line 1 is `n_samples,n_features,<class names>`, not a header."""
    rng = np.random.default_rng(0)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow([n_rows, n_features, *classes])
        for i in range(n_rows):
            w.writerow([*np.round(rng.uniform(0, 100, n_features), 2), i % len(classes)])


@pytest.mark.parametrize(
    "name,features,classes",
    [
        ("wine_data.csv", 13, ["class_0", "class_1", "class_2"]),
        ("breast_cancer.csv", 30, ["malignant", "benign"]),
    ],
)
def test_rows_longer_than_the_header_are_refused_by_line(tmp_path, name, features, classes):
    write_sklearn_like(tmp_path / name, 7, features, classes)
    header, width = 2 + len(classes), features + 1
    with pytest.raises(
        DataError,
        match=rf"{name}, line 2: expected {header} fields, as many as the header "
        rf"\(line 1\) names. Received: {width} fields.*naming all {width} columns",
    ):
        tfpipe.convert(str(tmp_path / name), str(tmp_path / "out"))
    assert nothing_written(tmp_path / "out")


def test_a_short_row_is_refused_by_line_not_reported_as_a_null(tmp_path):
    (tmp_path / "t.csv").write_text("a,b,c\n1,2,3\n4,5,\n6,7\n8,9,10\n")
    with pytest.raises(DataError, match=r"t.csv, line 4: expected 3 fields.*Received: 2 fields"):
        tfpipe.convert(str(tmp_path / "t.csv"), str(tmp_path / "out"), missing="fill")


def test_line_numbers_count_quoted_newlines_and_blank_lines(tmp_path):
    good = 'a,b\n1,"two\nlines"\n\n2,z\n'
    (tmp_path / "good.csv").write_text(good)
    tfpipe.convert(str(tmp_path / "good.csv"), str(tmp_path / "out"), workers=1)
    assert column(records(tmp_path / "out")[0], "b") == [b"two\nlines", b"z"]
    (tmp_path / "bad.csv").write_text(good + '3,"x\ny",extra\n')
    with pytest.raises(
        DataError, match=r"bad.csv, line 6 \(a quoted field spans 2 lines\): expected 2 fields"
    ):
        tfpipe.convert(str(tmp_path / "bad.csv"), str(tmp_path / "bad"))


def test_gzipped_csv_is_read_and_checked_through_the_decompression(tmp_path):
    with gzip.open(tmp_path / "t.csv.gz", "wt") as f:
        f.write("a,b\n1,x\n2,y\n3,z\n")
    tfpipe.convert(str(tmp_path / "t.csv.gz"), str(tmp_path / "out"), workers=1)
    assert column(records(tmp_path / "out")[0], "a") == [1, 2, 3]
    with gzip.open(tmp_path / "bad.csv.gz", "wt") as f:
        f.write("a,b\n1,x\n2\n")
    with pytest.raises(DataError, match=r"bad.csv.gz, line 3: expected 2 fields"):
        tfpipe.convert(str(tmp_path / "bad.csv.gz"), str(tmp_path / "bad"))
    folder = tmp_path / "parts"  # a gzipped part is one of the folder's CSVs, not skipped
    folder.mkdir()
    (folder / "a.csv").write_text("a,b\n0,w\n")
    os.replace(tmp_path / "t.csv.gz", folder / "b.csv.gz")
    tfpipe.convert(str(folder), str(tmp_path / "folder"), format="csv", workers=1)
    assert column(records(tmp_path / "folder")[0], "a") == [0, 1, 2, 3]


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_duplicate_column_names_are_refused(tmp_path, fmt):
    src = tmp_path / f"t.{fmt}"
    if fmt == "csv":
        src.write_text("a,b,a\n1,2,3\n")
        match = r"t.csv, line 1: expected unique column names in the header. Received: \['a'\] more than once"
    else:
        pq.write_table(pa.table([pa.array([1]), pa.array([2]), pa.array([3])], names=["a", "b", "a"]), src)
        match = r"t.parquet: expected unique column names. Received: \['a'\] more than once"
    with pytest.raises(DataError, match=match):
        tfpipe.convert(str(src), str(tmp_path / "out"))


# ---- float32 changes no value beyond its precision; types do not change mid-file


@pytest.mark.parametrize("chunk_rows", [16, 1000])
def test_a_stray_fraction_in_an_id_column_is_refused(tmp_path, chunk_rows):
    ids = [str(123456789 + i) for i in range(41)]
    ids[37] = "0.5"
    (tmp_path / "ids.csv").write_text("id\n" + "\n".join(ids) + "\n")
    with pytest.raises(
        DataError,
        match=r"ids.csv: column 'id', row 0 holds the whole number 123456789, which "
        r"float32 .* cannot hold exactly: it would be written as 123456792.*It is float because "
        r"\S*ids.csv row 37 holds 0.5",
    ):
        tfpipe.convert(str(tmp_path / "ids.csv"), str(tmp_path / "out"), chunk_rows=chunk_rows)
    assert nothing_written(tmp_path / "out")


def test_nullable_ints_saved_as_float64_are_refused_when_float32_would_change_them(tmp_path):
    pd.DataFrame({"id": [16777217, np.nan, 3.0]}).to_parquet(tmp_path / "big.parquet")  # pandas' int-with-NaN
    with pytest.raises(
        DataError,
        match=r"column 'id', row 0 holds the whole number 16777217.*written as 16777216.*"
        r"float in the source.*integer type",
    ):
        tfpipe.convert(str(tmp_path / "big.parquet"), str(tmp_path / "out"), missing="fill")
    pd.DataFrame({"id": [16777216, np.nan, 3.0]}).to_parquet(tmp_path / "small.parquet")
    tfpipe.convert(str(tmp_path / "small.parquet"), str(tmp_path / "ok"), missing="fill", workers=1)
    assert column(records(tmp_path / "ok")[0], "id") == [16777216.0, 0.0, 3.0]


def test_a_value_beyond_float32_range_is_refused(tmp_path):
    (tmp_path / "t.csv").write_text("x\n1.5\n-2.25\n1e300\n")
    with pytest.raises(
        DataError,
        match=r"t.csv: column 'x', row 2 holds 1e\+300. Expected values within float32's range.*written as inf",
    ):
        tfpipe.convert(str(tmp_path / "t.csv"), str(tmp_path / "out"))


def test_floats_round_to_float32_as_documented(tmp_path):
    values = [0.1, 3.14159265358979, -2.5e-3, 1.2e-38, 16777216.0, 123456789.5, 3.4e38]
    pq.write_table(pa.table({"x": pa.array(values, pa.float64())}), tmp_path / "t.parquet")
    tfpipe.convert(str(tmp_path / "t.parquet"), str(tmp_path / "out"), workers=1)
    np.testing.assert_array_equal(np.float32(column(records(tmp_path / "out")[0], "x")), np.float32(values))


def test_a_type_change_after_the_first_chunk_is_refused_with_row_and_value(tmp_path):
    values = [str(i) for i in range(20_005)]
    values[20_000] = "hello"
    (tmp_path / "t.csv").write_text("x\n" + "\n".join(values) + "\n")
    with pytest.raises(
        DataError,
        match=r"t.csv: column 'x', row 20000 holds 'hello', but the column holds integers "
        r"\(as read from \S*t.csv row 0 on\).*--chunk-rows \(chunk_rows=\)",
    ):
        tfpipe.convert(str(tmp_path / "t.csv"), str(tmp_path / "out"))
    assert nothing_written(tmp_path / "out")


def test_a_column_with_text_in_its_first_chunk_is_text(tmp_path):
    (tmp_path / "t.csv").write_text("x\n" + "\n".join(["007", "12", "hello", "3"]) + "\n")
    m = tfpipe.convert(str(tmp_path / "t.csv"), str(tmp_path / "out"), workers=1)
    assert m.schema["x"].dtype == "bytes"
    assert column(records(tmp_path / "out")[0], "x") == [b"007", b"12", b"hello", b"3"]  # the text, unchanged


def test_parquet_files_that_disagree_on_a_type_are_refused(tmp_path):
    src = tmp_path / "parts"
    src.mkdir()
    pq.write_table(pa.table({"id": pa.array([1, 2, 3], pa.int64())}), src / "part-0.parquet")
    pq.write_table(pa.table({"id": pa.array(["4", "x5", "6"])}), src / "part-1.parquet")
    with pytest.raises(
        DataError, match=r"part-1.parquet: column 'id', row 1 holds 'x5', but the column holds integers"
    ):
        tfpipe.convert(str(src), str(tmp_path / "out"))


def test_the_second_pass_refuses_a_table_that_changed(tmp_path):
    (tmp_path / "t.csv").write_text("a\n1\n2\n3\n")
    scan = tables_scan.scan(str(tmp_path / "t.csv"), "csv", tables_scan.TableOptions(chunk_rows=2))
    with open(tmp_path / "t.csv", "a") as f:
        f.write("4\n")
    with pytest.raises(DataError, match=r"t.csv: expected the 3 rows the first pass read. Received: more"):
        list(scan.chunks(2))


# ---- Parquet page checksums


def test_parquet_page_checksums_are_verified(tmp_path):
    rng = np.random.default_rng(1)
    table = pa.table({"x": np.arange(5001, dtype="int64"), "f": rng.normal(size=5001)})
    pq.write_table(table, tmp_path / "crc.parquet", write_page_checksum=True, compression="none")
    pq.write_table(table, tmp_path / "plain.parquet")  # no checksums: still read
    for name in ("crc", "plain"):
        tfpipe.convert(str(tmp_path / f"{name}.parquet"), str(tmp_path / name), workers=1)
        assert column(records(tmp_path / name)[0], "x") == list(range(5001))
    data = bytearray((tmp_path / "crc.parquet").read_bytes())
    start = len(data) // 3
    data[start : start + 500] = bytes(b ^ 0xFF for b in data[start : start + 500])
    (tmp_path / "flipped.parquet").write_bytes(bytes(data))
    with pytest.raises(
        DataError,
        match=r"flipped.parquet: expected Parquet data whose pages pass their checksums. "
        r"Received: .*CRC checksum verification failed",
    ):
        tfpipe.convert(str(tmp_path / "flipped.parquet"), str(tmp_path / "out"))
    assert nothing_written(tmp_path / "out")


# ---- unreadable inputs: one line naming the input, from the library and the CLI

NAMES = ["plain", "héllo", "ça"]


def _utf16(path):
    pd.DataFrame({"name": NAMES, "v": [1, 2, 3]}).to_csv(path, index=False, encoding="utf-16")


def _latin1(path):
    pd.DataFrame({"name": NAMES, "v": [1, 2, 3]}).to_csv(path, index=False, encoding="latin-1")


def _parquet_bytes():
    import io

    buf = io.BytesIO()
    pq.write_table(pa.table({"a": list(range(100))}), buf)
    return buf.getvalue()


BAD_INPUTS = [
    (
        "empty.csv",
        lambda p: p.write_bytes(b""),
        r"empty.csv: expected a CSV header line and rows. Received: an empty file",
    ),
    (
        "u16.csv",
        _utf16,
        r"u16.csv: expected utf-8 text \(encoding='utf-8'\). Received: a UTF-16 \(little-endian\) "
        r"byte-order mark. Pass the file's encoding: --encoding utf-16 \(encoding='utf-16'\)",
    ),
    (
        "latin.csv",
        _latin1,
        r"latin.csv: expected utf-8 text \(encoding='utf-8'\). Received: bytes b'\\xe9' on line 3 "
        r"that are not utf-8.*--encoding latin-1 \(encoding='latin-1'\)",
    ),
    (
        "cut.parquet",
        lambda p: p.write_bytes(_parquet_bytes()[:300]),
        r"cut.parquet: expected a Parquet file. Received",
    ),
    (
        "fake.parquet",
        lambda p: p.write_text("a,b\n1,2\n"),
        r"fake.parquet: expected a Parquet file. Received",
    ),
    (
        "empty.parquet",
        lambda p: p.write_bytes(b""),
        r"empty.parquet: expected a Parquet file. Received.*0 bytes",
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize("name,make,match", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_unreadable_tables_fail_with_one_line_naming_the_input(tmp_path, name, make, match):
    make(tmp_path / name)
    with pytest.raises(DataError, match=match):
        tfpipe.convert(str(tmp_path / name), str(tmp_path / "out"))
    assert nothing_written(tmp_path / "out")
    out = cli(tmp_path / name, tmp_path / "cli")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.count("\n") == 1 and out.stderr.startswith(f"tfpipe convert: error: {tmp_path / name}")


# A first pass that cannot read a file's header or text has no columns: the checks after it
# (the label's NaN, nulls, masks) must report the file's own problem, never a KeyError.
UNREADABLE_WITH_LABEL = [
    (
        "latin.csv",
        lambda p: p.write_bytes(b"a,label\ncaf\xe9,1\nx,0\n"),
        r"latin.csv: expected utf-8 text \(encoding='utf-8'\). Received: bytes b'\\xe9' on line 2.*"
        r"--encoding latin-1",
    ),
    (
        "dup.csv",
        lambda p: p.write_text("a,a,label\n1,2,1\n3,4,0\n"),
        r"dup.csv, line 1: expected unique column names in the header. Received: \['a'\] more than once",
    ),
    (
        "u16le.csv",
        lambda p: p.write_bytes("a,label\nx,1\ny,0\n".encode("utf-16-le")),
        r"u16le.csv: expected utf-8 text.*NUL bytes where UTF-16-LE text without a byte-order mark "
        r"has them.*--encoding utf-16-le",
    ),
]


@pytest.mark.parametrize("name,make,match", UNREADABLE_WITH_LABEL, ids=[u[0] for u in UNREADABLE_WITH_LABEL])
def test_an_unreadable_csv_with_a_label_is_refused_by_its_problem(tmp_path, capsys, name, make, match):
    make(tmp_path / name)
    with pytest.raises(DataError, match=match):
        tfpipe.convert(str(tmp_path / name), str(tmp_path / "out"), label="label")
    assert nothing_written(tmp_path / "out")
    code, _, err = main_cli(
        capsys, "convert", tmp_path / name, tmp_path / "cli", "--label", "label", "--quiet"
    )
    assert code == 1 and "Traceback" not in err and "KeyError" not in err
    assert err.count("\n") == 1 and err.startswith(f"tfpipe convert: error: {tmp_path / name}")


def test_a_second_file_that_cannot_be_read_is_named_beside_the_first_files_columns(tmp_path):
    folder = tmp_path / "parts"
    folder.mkdir()
    (folder / "a.csv").write_text("a,label\nx,1\n")
    (folder / "b.csv").write_bytes(b"a,label\ncaf\xe9,1\n")
    with pytest.raises(DataError, match=r"b.csv: expected utf-8 text.*--encoding latin-1"):
        tfpipe.convert(str(folder), str(tmp_path / "out"), format="csv", label="label")
    assert nothing_written(tmp_path / "out")


@pytest.mark.parametrize("encoding,write", [("utf-16", _utf16), ("latin-1", _latin1)])
def test_other_encodings_convert_when_named(tmp_path, encoding, write):
    write(tmp_path / "t.csv")
    tfpipe.convert(str(tmp_path / "t.csv"), str(tmp_path / "out"), encoding=encoding, workers=1)
    assert column(records(tmp_path / "out")[0], "name") == [n.encode() for n in NAMES]


@pytest.mark.slow
def test_cli_encoding_flag(tmp_path):
    _latin1(tmp_path / "t.csv")
    out = cli(tmp_path / "t.csv", tmp_path / "out", "--encoding", "latin-1")
    assert out.returncode == 0, out.stderr
    assert column(records(tmp_path / "out")[0], "name") == [n.encode() for n in NAMES]


def test_an_unknown_encoding_is_a_config_error():
    with pytest.raises(
        ConfigError, match=r"encoding must be a text encoding Python knows.*Received: encoding='klingon'"
    ):
        tfpipe.convert("t.csv", "out", encoding="klingon")


@pytest.mark.gcs
def test_tables_on_gcs_are_read_and_checked_alike(tmp_path, gcs_bucket):
    from tfpipe import storage

    body = "a,b\n1,x\n2,y\n3,z\n"
    storage.write_atomic(gcs_bucket + "/src/t.csv.gz", gzip.compress(body.encode()))
    storage.write_atomic(gcs_bucket + "/src/bad.csv", (body + "4\n").encode())
    pq.write_table(pa.table({"id": pa.array([16777217, None, 3], pa.int64())}), tmp_path / "ids.parquet")
    storage.write_atomic(gcs_bucket + "/src/ids.parquet", (tmp_path / "ids.parquet").read_bytes())
    tfpipe.convert(gcs_bucket + "/src/t.csv.gz", str(tmp_path / "csv"), format="csv", workers=1)
    assert column(records(tmp_path / "csv")[0], "b") == [b"x", b"y", b"z"]
    tfpipe.convert(gcs_bucket + "/src/ids.parquet", str(tmp_path / "pq"), missing="fill", workers=1)
    assert column(records(tmp_path / "pq")[0], "id") == [16777217, 0, 3]
    with pytest.raises(DataError, match=rf"{gcs_bucket}/src/bad.csv, line 5: expected 2 fields"):
        tfpipe.convert(gcs_bucket + "/src/bad.csv", str(tmp_path / "bad"))


@pytest.mark.parametrize("fmt", ["csv", "auto"])
def test_a_fifo_given_as_a_table_is_refused_by_kind(tmp_path, fmt):
    os.mkfifo(tmp_path / "t.csv")
    with pytest.raises(DataError, match=r"t\.csv: expected .*Received: a FIFO \(named pipe\)"):
        tfpipe.convert(str(tmp_path / "t.csv"), str(tmp_path / "out"), label="y", format=fmt)


def test_a_fifo_in_a_csv_folder_is_refused_by_name(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.csv").write_text("x,y\n1,0\n")
    os.mkfifo(tmp_path / "src" / "b.csv")
    with pytest.raises(DataError, match=r"b\.csv: expected a regular csv file\. Received: a FIFO"):
        tfpipe.convert(str(tmp_path / "src"), str(tmp_path / "out"), label="y", format="csv")


def test_a_symlink_loop_in_a_table_folder_is_named_with_its_links(tmp_path, capsys):
    src = tmp_path / "tables"
    src.mkdir()
    (src / "x.csv").write_text("a,label\n1,0\n2,1\n")
    (src / "y.csv").symlink_to("y.csv")
    code, _, err = main_cli(capsys, "convert", src, tmp_path / "out", "--label", "label", "--quiet")
    assert code == 1 and nothing_written(tmp_path / "out")
    assert f"{src}/y.csv: expected files and folders. Received: a symbolic link loop: " in err
    assert f"{src}/y.csv -> y.csv, which is where it started" in err

"""Text files as tfpipe reads them: byte-order marks, UTF-16/32 without one, compressed text
under any name, and files that are not text at all, named by their magic bytes. Through the
real CLI (`tfpipe.cli.main`) and API, on files written as the tools that make them write them."""

import bz2
import codecs
import gzip
import lzma
import zipfile

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

import tfpipe
from tfpipe.cli import main
from tfpipe.errors import ConfigError, DataError

from support.records import column, nothing_written, records

CSV = "name,score\nanna,1.5\nbo,2\n"


def convert(capsys, src, dest, *flags):
    """(exit code, stderr) of `tfpipe convert SRC DEST --quiet FLAGS...`."""
    code = main(["convert", str(src), str(dest), "--quiet", "--workers", "1", *map(str, flags)])
    return code, capsys.readouterr().err


def assert_table(dest, names=("name", "score")):
    recs, m = records(dest)
    assert m.schema.names == list(names)
    assert column(recs, "name") == [b"anna", b"bo"] and column(recs, "score") == [1.5, 2.0]


# ---- byte-order marks: never part of the text ----


@pytest.mark.parametrize(
    "name,data,flags",
    [
        ("bom.csv", codecs.BOM_UTF8 + CSV.encode(), ()),
        ("bom.tsv", codecs.BOM_UTF8 + CSV.replace(",", "\t").encode(), ()),
        ("bom.csv.gz", gzip.compress(mtime=0, data=codecs.BOM_UTF8 + CSV.encode()), ()),
        ("sig.csv", codecs.BOM_UTF8 + CSV.encode(), ("--encoding", "utf-8-sig")),
        ("u16le.csv", CSV.encode("utf-16"), ("--encoding", "utf-16")),
        ("u16bom_le.csv", codecs.BOM_UTF16_LE + CSV.encode("utf-16-le"), ("--encoding", "utf-16-le")),
        ("u32.csv", CSV.encode("utf-32"), ("--encoding", "utf-32")),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_a_byte_order_mark_is_never_part_of_a_column_name(tmp_path, capsys, name, data, flags):
    (tmp_path / name).write_bytes(data)
    code, err = convert(capsys, tmp_path / name, tmp_path / "out", *flags)
    assert code == 0, err
    assert_table(tmp_path / "out")


def test_a_utf8_mark_read_as_latin1_is_refused_naming_both(tmp_path, capsys):
    """Read as latin-1, the mark would be the text 'ï»¿' at the start of the first column name."""
    (tmp_path / "t.csv").write_bytes(codecs.BOM_UTF8 + CSV.encode())
    code, err = convert(capsys, tmp_path / "t.csv", tmp_path / "out", "--encoding", "latin-1")
    assert code == 1
    assert "expected latin-1 text (encoding='latin-1'). Received: a UTF-8 byte-order mark" in err
    assert "--encoding utf-8" in err and nothing_written(tmp_path / "out")


def test_one_home_strips_a_mark_for_every_text_reader(tmp_path):
    """JSON Lines and plain-text corpora read through `textfile.open_text` as CSV and labels do."""
    from tfpipe.convert.formats import textfile

    (tmp_path / "d.jsonl").write_bytes(codecs.BOM_UTF8 + b'{"text": "a"}\n{"text": "b"}\n')
    (tmp_path / "d.txt.gz").write_bytes(
        gzip.compress(mtime=0, data=codecs.BOM_UTF16_LE + "one\ntwo\n".encode("utf-16-le"))
    )
    with textfile.open_text(str(tmp_path / "d.jsonl")) as f:
        assert f.read().splitlines() == ['{"text": "a"}', '{"text": "b"}']
    with textfile.open_text(str(tmp_path / "d.txt.gz"), "utf-16") as f:
        assert f.read() == "one\ntwo\n"
    assert textfile.strip_bom("\ufeffname") == "name" and textfile.strip_bom("name") == "name"
    assert textfile.strip_bom(codecs.BOM_UTF8 + b"name") == b"name"


# ---- UTF-16 and UTF-32 without a byte-order mark ----


@pytest.mark.parametrize(
    "codec,given",
    [("utf-16-le", "utf-16"), ("utf-16-be", "utf-16"), ("utf-32-le", "utf-32"), ("utf-16-le", "utf-16-le")],
)
def test_utf16_and_utf32_without_a_mark_read_in_the_byte_order_their_bytes_show(
    tmp_path, capsys, codec, given
):
    (tmp_path / "t.csv").write_bytes(CSV.encode(codec))
    code, err = convert(capsys, tmp_path / "t.csv", tmp_path / "out", "--encoding", given)
    assert code == 0, err
    assert_table(tmp_path / "out")


def test_the_encoding_tfpipe_advises_for_utf16_without_a_mark_works(tmp_path, capsys):
    """The advice of the first message is followed, as a user would, and converts."""
    (tmp_path / "t.csv").write_bytes(CSV.encode("utf-16-le"))
    code, err = convert(capsys, tmp_path / "t.csv", tmp_path / "out")
    assert code == 1 and "NUL bytes where UTF-16-LE text without a byte-order mark has them" in err
    advised = err.split("--encoding ")[1].split()[0]
    assert advised == "utf-16-le"
    code, err = convert(capsys, tmp_path / "t.csv", tmp_path / "out", "--encoding", advised)
    assert code == 0, err
    assert_table(tmp_path / "out")


def test_a_byte_order_the_bytes_contradict_is_refused(tmp_path, capsys):
    (tmp_path / "t.csv").write_bytes(CSV.encode("utf-16-le"))
    code, err = convert(capsys, tmp_path / "t.csv", tmp_path / "out", "--encoding", "utf-16-be")
    assert code == 1 and "the bytes look like UTF-16-LE" in err and "Traceback" not in err
    (tmp_path / "cjk.csv").write_bytes("名前,点\n花子,1\n".encode("utf-16-le"))  # no NUL to tell the order
    code, err = convert(capsys, tmp_path / "cjk.csv", tmp_path / "out", "--encoding", "utf-16")
    assert code == 1 and "the bytes do not show it" in err and "--encoding utf-16-le or utf-16-be" in err


# ---- compressed text, whatever its name ----


def _zip(data):
    def write(path):
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("inner.csv", data)

    return write


@pytest.mark.parametrize(
    "name,make",
    [
        ("gz.csv", lambda p: p.write_bytes(gzip.compress(mtime=0, data=CSV.encode()))),
        ("bz.csv", lambda p: p.write_bytes(bz2.compress(CSV.encode()))),
        ("xz.csv", lambda p: p.write_bytes(lzma.compress(CSV.encode()))),
        ("zipped.csv", _zip(CSV)),
        ("plain.csv.gz", lambda p: p.write_text(CSV)),  # named compressed, but plain text
    ],
)
def test_compressed_csv_is_read_by_its_content_whatever_its_name(tmp_path, capsys, name, make):
    make(tmp_path / name)
    code, err = convert(capsys, tmp_path / name, tmp_path / "out")
    assert code == 0, err
    assert_table(tmp_path / "out")


def test_a_gzipped_file_in_a_csv_folder_is_read(tmp_path, capsys):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.csv").write_text("name,score\nanna,1.5\n")
    (tmp_path / "src" / "b.csv").write_bytes(gzip.compress(mtime=0, data=b"name,score\nbo,2\n"))
    code, err = convert(capsys, tmp_path / "src", tmp_path / "out")
    assert code == 0, err
    assert_table(tmp_path / "out")


# ---- not text: named by the magic bytes ----


def _xlsx(path):
    with zipfile.ZipFile(path, "w") as z:  # the parts every workbook has
        z.writestr("[Content_Types].xml", "<Types/>")
        z.writestr("xl/workbook.xml", "<workbook/>")


@pytest.mark.parametrize(
    "name,make,flags,said",
    [
        ("book.xlsx", _xlsx, (), "an Excel workbook"),
        ("book.csv", _xlsx, (), "an Excel workbook"),
        ("t.csv", lambda p: pq.write_table(pa.table({"x": [1]}), p), ("--format", "csv"), "Parquet data"),
        (
            "f.csv",
            lambda p: feather.write_feather(pa.table({"x": [1]}), p),
            ("--format", "csv"),
            "Arrow IPC file",
        ),
        ("z.csv", lambda p: p.write_bytes(b"\x28\xb5\x2f\xfd" + bytes(20)), (), "zstd-compressed"),
        (
            "old.xls",
            lambda p: p.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(50)),
            (),
            "Excel .xls",
        ),
    ],
)
def test_a_file_that_is_not_text_is_named_by_its_format(tmp_path, capsys, name, make, flags, said):
    make(tmp_path / name)
    code, err = convert(capsys, tmp_path / name, tmp_path / "out", *flags)
    assert code == 1 and said in err, err
    assert "NUL bytes" not in err and "UTF-16" not in err and "Traceback" not in err
    assert nothing_written(tmp_path / "out")


def test_parquet_named_csv_in_a_csv_folder_is_named(tmp_path, capsys):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.csv").write_text("x\n1\n")
    pq.write_table(pa.table({"x": [2]}), tmp_path / "src" / "b.csv")
    code, err = convert(capsys, tmp_path / "src", tmp_path / "out")
    assert code == 1 and "b.csv: expected CSV text. Received: Parquet data" in err


# ---- Feather and Arrow IPC convert as tables ----


def test_feather_and_arrow_ipc_convert_as_typed_tables(tmp_path, capsys):
    table = pa.table(
        {
            "id": pa.array([1, 2, None], pa.int64()),
            "x": pa.array([0.5, float("nan"), 2.0]),
            "s": pa.array(["a", "b", "c"]),
            "y": pa.array([0, 1, 1]),
        }
    )
    feather.write_feather(table, tmp_path / "v2.feather")
    feather.write_feather(table, tmp_path / "v1.feather", version=1)
    with pa.OSFile(str(tmp_path / "t.arrows"), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    feather.write_feather(table, tmp_path / "named.csv")  # the magic bytes decide
    for name in ("v2.feather", "v1.feather", "t.arrows", "named.csv"):
        code, err = convert(
            capsys, tmp_path / name, tmp_path / name.replace(".", "_"), "--label", "y", "--missing", "fill"
        )
        assert code == 0, (name, err)
        recs, m = records(tmp_path / name.replace(".", "_"))
        assert m.split("train").options["format"] == "arrow"
        assert column(recs, "id") == [1, 2, 0] and column(recs, "id/missing") == [0, 0, 1]
        x = column(recs, "x")
        assert x[0] == 0.5 and np.isnan(x[1]) and x[2] == 2.0
        assert not m.schema["x"].has_mask  # a NaN is a value, not a null: no mask
        assert column(recs, "s") == [b"a", b"b", b"c"]


def test_csv_options_are_refused_for_arrow(tmp_path):
    feather.write_feather(pa.table({"x": [1.0]}), tmp_path / "t.feather")
    with pytest.raises(ConfigError, match=r"encoding \(--encoding\) applies to CSV files"):
        tfpipe.convert(str(tmp_path / "t.feather"), str(tmp_path / "out"), encoding="latin-1")
    frame = pd.DataFrame({"x": [1.0]})
    frame.to_feather(tmp_path / "p.feather")
    with pytest.raises(DataError, match=r"p.feather: expected CSV text. Received: an Arrow IPC file"):
        tfpipe.convert(str(tmp_path / "p.feather"), str(tmp_path / "out2"), format="csv")

"""JSON Lines as a table, through the real CLI on what pandas writes
(`to_json(orient="records", lines=True)`): every field a column typed by JSON, never parsed as
CSV; a file whose records hold text is a corpus without its tokenizer, refused with both ways
out; what a column cannot hold is refused by line."""

import gzip
import json
import math

import numpy as np
import pandas as pd
import pytest

from support.cli import main_cli
from support.records import column, nothing_written, records


@pytest.fixture
def frame():
    rng = np.random.default_rng(7)
    n = 37
    return pd.DataFrame(
        {
            "id": np.arange(n) * 1_000_003,
            "score": rng.normal(size=n).round(3),
            "ok": rng.random(n) > 0.5,
            "code": [f"{i:05d}" for i in range(n)],  # text that looks like numbers stays text
            "label": rng.integers(0, 3, n),
        }
    )


def convert(capsys, src, dest, *args):
    return main_cli(capsys, "convert", src, dest, "--quiet", *args)


def test_a_pandas_json_lines_table_converts_with_its_json_types(tmp_path, capsys, frame):
    src = tmp_path / "t.jsonl"
    frame.to_json(src, orient="records", lines=True)
    code, out, err = convert(capsys, src, tmp_path / "out", "--label", "label", "--num-shards", "2")
    assert code == 0, err
    assert "format jsonl (auto: a JSON Lines file (t.jsonl))" in out
    recs, m = records(tmp_path / "out")
    assert [f.name for f in m.schema.fields] == ["id", "score", "ok", "code", "label"]
    assert m.schema.label == "label" and m.split("train").examples == 37
    assert column(recs, "id") == frame["id"].tolist()
    assert np.allclose(column(recs, "score"), frame["score"], atol=1e-6)
    assert column(recs, "ok") == frame["ok"].astype(int).tolist()
    assert column(recs, "code") == [c.encode() for c in frame["code"]]
    assert column(recs, "label") == frame["label"].tolist()


def test_nulls_and_nan_are_kept_apart_and_gzip_is_read_by_content(tmp_path, capsys):
    src = tmp_path / "t.jsonl.gz"
    lines = ['{"x": 1.5, "y": 1}', '{"x": NaN, "y": null}', '{"x": null}', '{"x": 2, "y": 3}']
    src.write_bytes(gzip.compress("\n".join(lines).encode()))
    code, _, err = convert(capsys, src, tmp_path / "out", "--missing", "fill")
    assert code == 0, err
    recs, _ = records(tmp_path / "out")
    xs = column(recs, "x")
    assert xs[0] == 1.5 and math.isnan(xs[1]) and xs[3] == 2.0
    assert column(recs, "x/missing") == [0, 0, 1, 0]  # NaN is a value, null is missing
    assert column(recs, "y/missing") == [0, 1, 1, 0]  # a field a line leaves out is null


def test_json_lines_with_text_need_a_tokenizer_or_format_jsonl(tmp_path, capsys):
    src = tmp_path / "reviews.jsonl"
    pd.DataFrame({"text": ["good film", "bad film"], "label": [1, 0]}).to_json(
        src, orient="records", lines=True
    )
    code, _, err = convert(capsys, src, tmp_path / "a", "--label", "label")
    assert code == 1 and nothing_written(tmp_path / "a")
    assert f"{src} holds JSON Lines whose records have text in field 'text': a text corpus" in err
    assert "--tokenizer PATH" in err and "pass --format jsonl" in err
    code, _, err = convert(capsys, src, tmp_path / "b", "--label", "label", "--format", "jsonl")
    assert code == 0, err
    assert column(records(tmp_path / "b")[0], "text") == [b"good film", b"bad film"]


def test_json_is_never_parsed_as_csv(tmp_path, capsys, frame):
    src = tmp_path / "t.json"  # a name that says nothing: the content does
    frame.to_json(src, orient="records", lines=True)
    code, out, err = convert(capsys, src, tmp_path / "a", "--label", "label")
    assert code == 0, err
    assert "format jsonl (auto: its first line is a JSON object (JSON Lines))" in out
    code, _, err = convert(capsys, src, tmp_path / "b", "--label", "label", "--format", "csv")
    assert code == 1 and nothing_written(tmp_path / "b")
    assert f"{src}: expected CSV text. Received: JSON Lines (its first line is a JSON object)" in err


@pytest.mark.parametrize(
    "lines,message",
    [
        (
            ['{"a": 1}', '{"a": "two"}'],
            "line 2: field 'a' holds 'two', but the lines before it hold integers",
        ),
        (['{"a": 1, "b": {"c": 2}}'], "line 1: field 'b' holds dict {'c': 2}. Expected a string, number"),
        (['{"a": 1, "a": 2}'], "line 1: expected each key once in a JSON object. Received: key(s) ['a']"),
        (['{"a": 18446744073709551615}'], "line 1: field 'a' holds 18446744073709551615. Expected integers"),
        (
            ['{"a": 1}', "", '{"a": true}'],
            "line 3: field 'a' holds True, but the lines before it hold integers",
        ),
        (['{"a": 1}', '{"a": 2, "b": 3}'], None),  # chunk of one row: see below
    ],
)
def test_what_a_column_cannot_hold_is_refused_by_line(tmp_path, capsys, lines, message):
    src = tmp_path / "t.jsonl"
    src.write_text("\n".join(lines) + "\n")
    if message is None:
        message = "line 2: field(s) ['b'] are not among the fields of the records before it ['a']"
        code, _, err = convert(capsys, src, tmp_path / "out", "--chunk-rows", "1")
    else:
        code, _, err = convert(capsys, src, tmp_path / "out")
    assert code == 1 and nothing_written(tmp_path / "out")
    assert f"{src}: {message}" in err


def test_a_folder_of_json_lines_tables(tmp_path, capsys, frame):
    src = tmp_path / "parts"
    src.mkdir()
    frame[:20].to_json(src / "a.jsonl", orient="records", lines=True)
    frame[20:].to_json(src / "b.jsonl.gz", orient="records", lines=True, compression="gzip")
    code, out, err = convert(capsys, src, tmp_path / "out", "--label", "label")
    assert code == 0, err
    assert "format jsonl (auto: a folder of jsonl files)" in out
    assert column(records(tmp_path / "out")[0], "id") == frame["id"].tolist()
    assert (
        json.loads((tmp_path / "out" / "tfpipe.json").read_text())["splits"]["train"]["options"]["format"]
        == "jsonl"
    )

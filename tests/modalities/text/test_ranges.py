"""Workers read their own documents: the first pass in segments of plain files, checkpoints for
the second; what they write is what a reading in order writes, to the byte, and what the first
pass reports names the lines a reading in order names."""

import gzip
import json
import os

import pytest

from tfpipe.convert.config import ConvertConfig
from tfpipe.modalities.text.convert import ranges as text_ranges
from tfpipe.modalities.text.convert import scan as text_scan
from tfpipe.modalities.text.convert.reader import Reading
from tfpipe.modalities.text.convert.source import open_text

from support.records import nothing_written
from support.text_data import convert, docs, tokenizer_path


@pytest.fixture
def small_ranges(monkeypatch):
    """Segments of 2 KB and pieces of 7 documents, so a small corpus has many of each."""
    monkeypatch.setattr(text_ranges, "SEGMENT_BYTES", 2048)
    monkeypatch.setattr(text_ranges, "DOCS_PER_TASK", 7)


def lines(texts, blank_every=0, crlf=False):
    end = "\r\n" if crlf else "\n"
    out = []
    for i, t in enumerate(texts):
        out.append(json.dumps({"text": t, "label": i % 3}) + end)
        if blank_every and i % blank_every == 0:
            out.append(end)
    return "".join(out)


def shards(dest):
    return {
        n: (dest / n).read_bytes()
        for n in sorted(os.listdir(dest))
        if not n.startswith(".") and n != "tfpipe.json"
    }


@pytest.mark.parametrize("workers", ["1", "2"])
def test_ranges_read_by_workers_write_what_a_reading_in_order_writes(tmp_path, small_ranges, workers):
    """The same corpus plain (read in segments and from checkpoints by the workers) and gzipped
    (read in order by the converting process) gives the same shards, byte for byte; blank lines
    and CRLF line ends included, counted alike."""
    body = lines(docs()[:120], blank_every=9, crlf=True).encode()
    (tmp_path / "plain").mkdir()
    (tmp_path / "packed").mkdir()
    (tmp_path / "plain" / "c.jsonl").write_bytes(body)
    (tmp_path / "packed" / "c.jsonl").write_bytes(gzip.compress(body, mtime=0))
    tok = tokenizer_path(tmp_path)
    for name in ("plain", "packed"):
        args = ("--tokenizer", tok, "--label", "label", "--num-shards", "3", "--workers", workers)
        code, _, err = convert(tmp_path / name, tmp_path / f"out-{name}", *args)
        assert code == 0, err
    assert shards(tmp_path / "out-plain") == shards(tmp_path / "out-packed")
    manifest = json.loads((tmp_path / "out-plain" / "tfpipe.json").read_text())["splits"]["train"]
    assert manifest["text"]["documents"] == 120 and "14 blank line(s)" in manifest["notes"][0]


def test_a_plain_file_is_read_by_its_workers_a_compressed_one_here(tmp_path, small_ranges):
    (tmp_path / "src").mkdir()
    body = lines(docs()[:60]).encode()
    (tmp_path / "src" / "a.jsonl").write_bytes(body)
    (tmp_path / "src" / "b.jsonl.gz").write_bytes(gzip.compress(body, mtime=0))
    cfg = ConvertConfig(tokenizer=tokenizer_path(tmp_path), workers=1)
    source = open_text(str(tmp_path / "src"), cfg, None, str(tmp_path / "out"))
    plain, packed = (text_ranges.unpacked(p) for p in source.scan.checkpoints)
    assert packed == [] and len(plain) > 60 // 7  # every 7 documents, and where each segment starts
    assert [p.doc for p in plain] == sorted({p.doc for p in plain}) and plain[0] == (0, 0, 1)
    assert len(list(text_ranges.segments(source.scan.files, Reading()))) > 2  # a.jsonl in 2 KB segments
    task = type("Task", (), {"index": 0, "first": 0, "count": 120})
    pieces = list(source.pieces([task]))
    assert all(
        p.work.raws == () and p.work.start is not None for p in pieces if p.work.path.endswith("a.jsonl")
    )
    assert all(p.work.raws and p.work.start is None for p in pieces if p.work.path.endswith(".gz"))
    assert [p.first for p in pieces] == sorted(p.first for p in pieces)


def test_problems_in_later_segments_name_their_lines_and_byte_offsets(tmp_path, small_ranges):
    texts = docs()[:80]
    rows = lines(texts).splitlines(keepends=True)
    rows[61] = '{"text": "no end\n'
    rows[70] = b'{"text": "caf\xe9"}\n'.decode("latin-1")
    src = tmp_path / "c.jsonl"
    src.write_bytes("".join(rows[:70]).encode() + b'{"text": "caf\xe9"}\n' + "".join(rows[71:]).encode())
    offset = len("".join(rows[:70]).encode()) + len(b'{"text": "caf')
    code, _, err = convert(src, tmp_path / "out", "--tokenizer", tokenizer_path(tmp_path), "--workers", "2")
    assert code == 1 and nothing_written(tmp_path / "out")
    assert f"{src}: line 62: expected one JSON object" in err
    assert f"{src}: line 71, byte offset {offset}: expected UTF-8 text" in err
    assert "the first pass found 2 problems" in err


def test_segments_start_at_lines_whatever_their_ends(tmp_path):
    """\\r\\n split by a segment's end, lone \\r (old Mac) lines: each segment starts at a line,
    and its number is the line's."""
    src = tmp_path / "c.txt"
    src.write_bytes(b"a\r\nb\rc\n" * 400 + b"last")
    segs = list(text_ranges.segments([str(src)], Reading(lines=True), size=101))
    assert len(segs) > 5 and segs[-1].end == os.path.getsize(src)
    for seg in segs:
        data = src.read_bytes()
        assert seg.offset == 0 or data[seg.offset - 1 : seg.offset] == b"\n"
        assert seg.line == 1 + data[: seg.offset].count(b"\n") + data[: seg.offset].count(b"\r") - data[
            : seg.offset
        ].count(b"\r\n")
    found = text_scan.scan(str(src), Reading(lines=True))
    assert found.file_docs == (1201,)

"""Text corpora on gs:// (through the local GCS twin, no mocks), and a real run killed with
SIGKILL and resumed: the same shards as a local run without interruption."""

import os
import pathlib
import signal

import pytest

import tfpipe
from tfpipe import storage
from tfpipe.convert.writer import PAUSE_ENV
from tfpipe.format.manifest import Manifest
from tfpipe.synthetic.text import write_corpus

from support.cli import run_cli, start_cli, wait_paused
from support.text_data import docs, tokenizer_path


def shard_bytes(m):
    return [storage.read_bytes(p) for p in m.shard_paths("train")]


@pytest.mark.gcs
def test_a_corpus_and_tokenizer_on_gcs_convert_to_gcs_as_locally(gcs_bucket, local_gcs, tmp_path):
    texts = docs()[:60]
    for where in (str(tmp_path / "src"), f"{gcs_bucket}/src"):
        write_corpus(where, texts[:40], "jsonl.gz", files=2)
        write_corpus(where + "/more", texts[40:], "parquet")
    tok = tokenizer_path(tmp_path)
    storage.write_atomic(f"{gcs_bucket}/tok/tokenizer.json", pathlib.Path(tok).read_bytes())
    options = {"num_shards": 3, "workers": 2}
    local = tfpipe.convert(str(tmp_path / "src") + "/*", str(tmp_path / "out"), tokenizer=tok, **options)
    assert local.split("train").text.documents == 40  # the glob's files, not its subfolder
    dest = f"{gcs_bucket}/dataset"
    m = tfpipe.convert(
        f"{gcs_bucket}/src/*.gz", dest, tokenizer=f"{gcs_bucket}/tok/tokenizer.json", **options
    )
    assert shard_bytes(m) == shard_bytes(local)
    assert Manifest.load(dest).split("train").text == local.split("train").text  # the lengths entry too
    lengths = "lengths.train.u32"
    assert storage.read_bytes(f"{dest}/{lengths}") == pathlib.Path(tmp_path, "out", lengths).read_bytes()
    assert storage.read_bytes(f"{dest}/tokenizer.json") == pathlib.Path(tok).read_bytes()
    more = tfpipe.convert(f"{gcs_bucket}/src/more", dest, split="extra", workers=1)
    assert more.split("extra").text.documents == 20 and more.tokenizer == m.tokenizer


@pytest.mark.slow
def test_killed_after_a_shard_and_resumed_writes_what_an_uninterrupted_run_does(tmp_path):
    write_corpus(tmp_path / "src", docs(), "jsonl", files=3)
    args = [str(tmp_path / "src"), "--train-tokenizer", "sentencepiece", "--vocab-size", "500"]
    args += ["--num-shards", "4", "--workers", "2", "--quiet"]
    whole = tfpipe.convert(
        str(tmp_path / "src"),
        str(tmp_path / "whole"),
        train_tokenizer="sentencepiece",
        vocab_size=500,
        num_shards=4,
    )
    cmd = ["convert", args[0], tmp_path / "out", *args[1:]]
    proc = start_cli(*cmd, env={PAUSE_ENV: "shard-committed"})
    wait_paused(proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / "out" / "tfpipe.json").exists()
    assert [n for n in os.listdir(tmp_path / "out") if n.startswith("train-")] == ["train-00000-of-00004"]
    done = run_cli(*cmd, "--resume")
    assert done.returncode == 0, done.stderr
    resumed = Manifest.load(str(tmp_path / "out"))
    assert shard_bytes(resumed) == shard_bytes(whole)
    assert resumed.split("train").text == whole.split("train").text
    lengths = "lengths.train.u32"
    assert (
        pathlib.Path(tmp_path, "out", lengths).read_bytes()
        == pathlib.Path(tmp_path, "whole", lengths).read_bytes()
    )
    assert resumed.tokenizer == whole.tokenizer

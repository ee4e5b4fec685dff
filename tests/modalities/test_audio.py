"""A fifth modality, added without touching tfpipe: audio clips (support/audio.py), registered
as the built-in modalities are, converted by the real engine (its plan, writer, journal and
manifest), found by `--format auto`, and refused where it refuses. The whole path (build, bench)
is the conformance suite's (test_conformance.py)."""

from __future__ import annotations

import json

import pytest

import tfpipe
from tfpipe.convert.detect import explain_format
from tfpipe.errors import ConfigError, DataError
from tfpipe.format.manifest import Manifest
from tfpipe.modalities import modality_of_format, modality_of_layout

from support.audio import SCHEMA, clips, registered


@pytest.fixture
def audio():
    with registered() as modality:
        yield modality


def test_a_new_modality_is_converted_by_the_real_engine(tmp_path, audio):
    src = clips(tmp_path / "src", [5, 0, 300, 17, 64])
    m = tfpipe.convert(str(src), str(tmp_path / "out"), format="wav", num_shards=2, workers=1)
    assert (m.layout, m.splits["train"].examples) == ("wav", 5)
    assert m.splits["train"].notes == ("5 clips of 386 bytes",)
    assert json.loads((tmp_path / "out" / "train.clips.json").read_text()) == {"clips": 5, "bytes": 386}
    assert (
        tmp_path / "out" / "clips.txt"
    ).read_text() == "clip0.wav\nclip1.wav\nclip2.wav\nclip3.wav\nclip4.wav"
    again = Manifest.load(str(tmp_path / "out"))
    assert again.schema == SCHEMA and again.split("train").options["format"] == "wav"
    assert modality_of_layout(again.layout) is audio
    import tensorflow as tf

    got = []
    for path in again.shard_paths("train"):
        for raw in tf.data.TFRecordDataset(path):
            ex = tf.io.parse_single_example(
                raw,
                {
                    "audio/bytes": tf.io.FixedLenFeature([], tf.string),
                    "audio/length": tf.io.FixedLenFeature([], tf.int64),
                },
            )
            got.append((ex["audio/bytes"].numpy(), int(ex["audio/length"])))
    assert got == [((src / f"clip{i}.wav").read_bytes(), n) for i, n in enumerate([5, 0, 300, 17, 64])]


def test_a_new_modalitys_refusal_stops_the_commit(tmp_path, audio):
    src = clips(tmp_path / "src", [0, 0])
    with pytest.raises(DataError, match=r"expected clips that hold sound\. Received: 2 empty clips"):
        tfpipe.convert(str(src), str(tmp_path / "out"), format="wav", workers=1)
    assert not (tmp_path / "out" / "tfpipe.json").exists()


def test_format_auto_weighs_a_new_modalitys_signs(tmp_path, audio):
    src = clips(tmp_path / "src", [3, 4])
    assert explain_format(str(src)).format == "wav"
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.md").write_text("x")
    with pytest.raises(DataError, match=r"Expected .*CSV/Parquet files, or a folder of \.wav clips\."):
        explain_format(str(empty))


def test_a_format_no_modality_reads_is_refused_by_name(tmp_path):
    with pytest.raises(ConfigError, match=r"format must be one of \[.*'text'.*\]. Received: 'wav'"):
        modality_of_format("wav")
    with pytest.raises(ConfigError, match="format must be one of"):
        tfpipe.convert(str(tmp_path), str(tmp_path / "out"), format="wav")
    assert not (tmp_path / "out").exists()

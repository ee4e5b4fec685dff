"""tfpipe.beam.WriteDataset at the end of a user's own Beam pipeline (real Beam, FnApiRunner)."""

import json
import os

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("apache_beam")

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

import tfpipe.beam
from tfpipe.errors import DataError, DestinationError
from tfpipe.format.manifest import Manifest
from tfpipe.format.verify import verify

from support.records import split_records as records

# Every test here runs a Beam pipeline (the DirectRunner's worker processes).
pytestmark = pytest.mark.slow

RUNNER = ["--runner=FnApiRunner"]


def rows(n=37):
    return [{"id": i, "score": i / 8, "word": f"w{i % 5}", "ok": i % 3 == 0} for i in range(n)]


def write(dest, elements, options=RUNNER, **kwargs):
    with beam.Pipeline(options=PipelineOptions(options)) as p:
        _ = p | beam.Create(elements, reshuffle=False) | tfpipe.beam.WriteDataset(str(dest), **kwargs)
    return Manifest.load(str(dest))


def test_dicts_become_a_normal_dataset_with_every_record_once(tmp_path):
    m = write(tmp_path / "out", rows(), num_shards=4, label="id")
    assert [s.name for s in m.splits["train"].shards] == [f"train-0000{i}-of-00004" for i in range(4)]
    assert m.splits["train"].examples == 37 and verify(str(tmp_path / "out")).ok
    assert [(f.name, f.dtype) for f in m.schema.fields] == [
        ("id", "int64"),
        ("ok", "int64"),
        ("score", "float32"),
        ("word", "bytes"),
    ]
    got = sorted((r["id"][0], r["ok"][0], r["score"][0], r["word"][0]) for r in records(m))
    assert got == [(i, int(i % 3 == 0), pytest.approx(i / 8), f"w{i % 5}".encode()) for i in range(37)]
    shards = [s.name for s in m.splits["train"].shards]
    assert sorted(os.listdir(tmp_path / "out")) == ["tfpipe.json", *shards]
    written = json.loads((tmp_path / "out" / "tfpipe.json").read_text())
    assert written["splits"]["train"]["options"]["engine"] == "beam"


def test_dataframes_and_dicts_in_other_bundles_give_the_same_bytes(tmp_path):
    """The output depends on the records only: not on how they arrive or are bundled."""
    a = write(tmp_path / "a", rows(), num_shards=3)
    frames = [pd.DataFrame(rows()[i : i + 10]) for i in range(30, -1, -10)]
    b = write(tmp_path / "b", frames, options=[*RUNNER, "--direct_runner_bundle_repeat=1"], num_shards=3)
    assert a.splits["train"].shards == b.splits["train"].shards
    for s in a.splits["train"].shards:
        assert (tmp_path / "a" / s.name).read_bytes() == (tmp_path / "b" / s.name).read_bytes()


def test_nulls_are_refused_or_filled_with_a_mask(tmp_path):
    data = rows(9)
    data[4]["score"] = float("nan")
    del data[6]["word"]
    with pytest.raises(DataError, match=r"column 'score' holds nulls.*missing='fill'"):
        write(tmp_path / "err", data, num_shards=2)
    m = write(tmp_path / "fill", data, num_shards=2, missing="fill")
    by_id = {r["id"][0]: r for r in records(m)}
    assert by_id[4]["score/missing"] == [1] and by_id[4]["score"] == [0.0]
    assert by_id[5]["score/missing"] == [0]
    assert by_id[6]["word/missing"] == [1] and by_id[6]["word"] == [b""]


def test_arrays_keep_their_shape_and_a_type_conflict_names_the_column(tmp_path):
    data = [{"v": np.arange(3, dtype=np.float32) + i, "k": i} for i in range(5)]
    m = write(tmp_path / "arr", data, num_shards=1)
    assert m.schema["v"].shape == (3,) and sorted(r["v"][0] for r in records(m)) == [0, 1, 2, 3, 4]
    with pytest.raises(DataError, match=r"column 'k': expected one type and shape per column"):
        write(tmp_path / "bad", [{"k": 1}, {"k": "one"}], num_shards=1)


def test_a_destination_with_a_manifest_is_refused(tmp_path):
    write(tmp_path / "out", rows(5), num_shards=1)
    with pytest.raises(DestinationError, match="expected a new destination"):
        write(tmp_path / "out", rows(5), num_shards=1)


def test_anything_but_dicts_and_frames_is_refused(tmp_path):
    with pytest.raises(DataError, match=r"expected dicts or pandas DataFrames\. Received: tuple"):
        write(tmp_path / "out", [(1, 2)], num_shards=1)

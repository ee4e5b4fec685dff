"""`tfpipe convert --engine beam` on real Beam: the same bytes and manifest as the local engine,
through retried, duplicated and killed runs, to local and gs:// destinations.

Runners: FnApiRunner in this process; the DirectRunner in multi_processing mode with 2 worker
processes; the BundleBasedDirectRunner where a failed bundle must be retried (it retries a
bundle up to 4 times; the FnApiRunner never does).
"""

import os
import signal
import time

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from support.cli import run_cli, start_cli
from support.gcs_faults import lose_commit_reply
from support.records import same_output

pytest.importorskip("apache_beam")

import tfpipe
from tfpipe import storage
from tfpipe.beam.engine import PipelineFailed
from tfpipe.beam.shards import FAULT_ENV
from tfpipe.errors import ConfigError
from tfpipe.format import commit_markers
from tfpipe.format.verify import verify
from tfpipe.testing import fake_data

# Every test here runs a Beam pipeline (the DirectRunner's worker processes).
pytestmark = pytest.mark.slow

IN_PROCESS = "--runner=FnApiRunner"
TWO_WORKERS = "--runner=DirectRunner --direct_running_mode=multi_processing --direct_num_workers=2"
RETRYING = "--runner=BundleBasedDirectRunner"


def beam(src, dest, options=IN_PROCESS, **kwargs):
    return tfpipe.convert(str(src), str(dest), engine="beam", pipeline_options=options, **kwargs)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("beam_src") / "train"
    fake_data.write_image_folder(root, classes=3, per_class=[7, 5, 6], size=(64, 48), seed=3)
    fake_data.write_oddities(root, classes=fake_data.class_names(3), generic=True)
    return str(root)


@pytest.fixture(scope="module")
def local_images(tree, tmp_path_factory):
    dest = tmp_path_factory.mktemp("local") / "img"
    tfpipe.convert(tree, str(dest), num_shards=4, workers=1)
    return dest


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """A CSV folder (nulls to fill, null labels to drop) and a Parquet file of 3 row groups."""
    root = tmp_path_factory.mktemp("tables")
    rng = np.random.default_rng(7)
    (root / "csv").mkdir()
    for i, n in enumerate([23, 1, 17]):
        frame = pd.DataFrame(
            {
                "x": rng.normal(size=n).round(4),
                "k": rng.integers(-50, 50, n),
                "word": [f"w{j % 5}" for j in range(n)],
                "y": rng.integers(0, 3, n).astype(float),
            }
        )
        if n > 5:
            frame.loc[3, "x"] = np.nan
            frame.loc[4 + i, "y"] = np.nan
        frame.to_csv(root / "csv" / f"part-{i}.csv", index=False)
    n = 41
    table = pa.table(
        {
            "id": np.arange(n),
            "f": rng.normal(size=n).astype(np.float32),
            "s": [f"row {i}" for i in range(n)],
            "label": rng.integers(0, 2, n),
        }
    )
    pq.write_table(table, root / "t.parquet", row_group_size=15)
    return root


def test_images_match_the_local_engine_in_process(tree, local_images, tmp_path):
    m = beam(tree, tmp_path / "beam", num_shards=4)
    same_output(local_images, tmp_path / "beam")
    assert m.splits["train"].options["engine"] == "beam" and verify(str(tmp_path / "beam")).ok
    assert m.splits["train"].retries is None  # Beam's workers retry in their own processes, uncounted
    assert {os.path.basename(s.input) for s in m.splits["train"].skipped} >= {"truncated.JPEG"} or len(
        m.splits["train"].skipped
    ) >= len(fake_data.UNDECODABLE_ODDITIES)


def test_resized_images_match_on_two_worker_processes(tree, tmp_path):
    tfpipe.convert(tree, str(tmp_path / "local"), num_shards=3, workers=1, resize_shorter=40, check="header")
    beam(tree, tmp_path / "beam", TWO_WORKERS, num_shards=3, resize_shorter=40, check="header")
    same_output(tmp_path / "local", tmp_path / "beam")


@pytest.mark.parametrize(
    "source, options",
    [
        ("csv", {"label": "y", "missing": "fill", "missing_label": "drop", "chunk_rows": 7, "num_shards": 4}),
        ("t.parquet", {"label": "label", "chunk_rows": 6, "num_shards": 3, "compression": "gzip"}),
    ],
)
def test_tables_match_the_local_engine(tables, tmp_path, source, options):
    local = tfpipe.convert(str(tables / source), str(tmp_path / "local"), workers=1, **options)
    m = beam(tables / source, tmp_path / "beam", **options)
    same_output(tmp_path / "local", tmp_path / "beam")
    assert m.splits["train"].dropped_rows == local.splits["train"].dropped_rows


def test_a_table_error_is_the_local_engines(tables, tmp_path):
    with pytest.raises(tfpipe.TfpipeError) as local:
        tfpipe.convert(str(tables / "csv"), str(tmp_path / "local"), label="y", workers=1)
    with pytest.raises(tfpipe.TfpipeError) as on_beam:
        beam(tables / "csv", tmp_path / "beam", label="y")
    assert str(on_beam.value) == str(local.value) and "is null" in str(local.value)


def test_failed_bundles_are_retried_to_the_same_bytes(tree, local_images, tmp_path, monkeypatch):
    """The first attempt at shard 1 fails before writing it, at shard 2 after committing it."""
    markers = tmp_path / "faults"
    markers.mkdir()
    monkeypatch.setenv(FAULT_ENV, f"{markers};started:train-00001-of-00004,committed:train-00002-of-00004")
    m = beam(tree, tmp_path / "beam", RETRYING, num_shards=4)
    assert sorted(os.listdir(markers)) == ["committed-train-00002-of-00004", "started-train-00001-of-00004"]
    same_output(local_images, tmp_path / "beam")
    names = [r["image/filename"] for r in records(m)]
    assert len(names) == len(set(names)) == m.splits["train"].examples


def test_duplicate_bundles_change_nothing(tree, local_images, tmp_path):
    beam(tree, tmp_path / "beam", f"{IN_PROCESS} --direct_runner_bundle_repeat=1", num_shards=4)
    same_output(local_images, tmp_path / "beam")


def records(manifest):
    from tfpipe.format.decode import decode_example
    from tfpipe.format.tfrecord import read_records

    out = []
    for path in manifest.shard_paths("train"):
        with open(path, "rb") as f:
            out += [{k: v[0] for k, v in decode_example(r).items()} for r in read_records(f, where=path)]
    return out


def stopped(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


def run_until_paused(args, at):
    proc = start_cli(*args, env={"TFPIPE_TEST_PAUSE_AT": at})
    deadline = time.monotonic() + 120
    while not stopped(proc.pid):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def test_killed_run_resumes_to_the_same_bytes(tree, local_images, tmp_path):
    """Killed after its first shard, refused without --resume, resumed and killed again right
    after its manifest: the next run's sweep removes what is left, and the output is the local
    engine's."""
    from tfpipe.convert.writer import sweep

    dest = tmp_path / "beam"
    args = [
        "convert",
        tree,
        str(dest),
        "--num-shards",
        "4",
        "--quiet",
        "--engine",
        "beam",
        f"--beam-options={IN_PROCESS}",
    ]
    run_until_paused(args, "shard-committed")
    shards = [n for n in os.listdir(dest) if n.startswith("train-")]
    assert len(shards) == 1 and not (dest / "tfpipe.json").exists()
    refused = run_cli(*args)
    assert refused.returncode == 1 and "--resume" in refused.stderr
    run_until_paused([*args, "--resume"], "manifest-committed")
    assert ".tfpipe-train.plan.json" in os.listdir(dest)
    sweep(str(dest), tfpipe.Manifest.load(str(dest)))
    same_output(local_images, dest)
    assert [n for n in os.listdir(dest) if n.startswith(".") and n != ".tfpipe.lock"] == []


@pytest.mark.gcs
def test_gcs_destination_with_faults(tree, local_images, gcs_bucket, local_gcs, tmp_path):
    dest = gcs_bucket + "/beam"
    with (
        local_gcs.recording() as requests,
        local_gcs.inject_faults(503, count=2, methods=("POST",), path_contains="uploadType", route="plain"),
        lose_commit_reply(local_gcs) as lost,
    ):
        m = beam(tree, dest, num_shards=4)
    assert lost.served == 1
    assert [s.checksum for s in m.splits["train"].shards] == [
        s.checksum for s in tfpipe.Manifest.load(str(local_images)).splits["train"].shards
    ]
    assert any(r.status == 412 for r in requests)  # the lost reply's retry found its own bytes
    bucket, prefix = storage.split_gcs(dest)
    blobs = storage.gcs.client().list_blobs(bucket, prefix=prefix)
    created = {b.name.rsplit("/", 1)[1]: b.time_created for b in blobs}
    assert created["tfpipe.json"] >= max(t for n, t in created.items() if n.startswith("train-"))  # last
    assert verify(dest).ok
    hidden = [n for n in storage.listdir(dest) if n.startswith(".") and n != ".tfpipe.lock"]
    assert hidden == [commit_markers.COMMITS_DIR]


def test_options_are_checked(tree, tmp_path):
    with pytest.raises(ConfigError, match=r"Expected Beam pipeline options such as --runner"):
        beam(tree, tmp_path / "o", "runner=FnApiRunner", num_shards=2)
    with pytest.raises(ConfigError, match=r"engine must be one of"):
        tfpipe.convert(tree, str(tmp_path / "o"), engine="spark")
    with pytest.raises(ConfigError, match=r"pipeline_options apply to engine='beam'"):
        tfpipe.convert(tree, str(tmp_path / "o"), pipeline_options=IN_PROCESS)


def test_a_failed_beam_run_resumes_on_the_local_engine(tree, local_images, tmp_path, monkeypatch):
    """The FnApiRunner never retries: the injected fault fails the run, leaving its plan and the
    shards committed so far; the local engine's --resume finishes the same plan."""
    markers = tmp_path / "faults"
    markers.mkdir()
    monkeypatch.setenv(FAULT_ENV, f"{markers};started:train-00002-of-00004")
    with pytest.raises(
        PipelineFailed,
        match=r"pipeline 'shards' failed: injected fault at started of "
        r"train-00002-of-00004.*--resume",
    ):
        beam(tree, tmp_path / "beam", num_shards=4)
    assert not (tmp_path / "beam" / "tfpipe.json").exists()
    with pytest.raises(tfpipe.TfpipeError, match="interrupted conversion"):
        tfpipe.convert(tree, str(tmp_path / "beam"), num_shards=4, workers=1)
    tfpipe.convert(tree, str(tmp_path / "beam"), num_shards=4, workers=1, resume=True)
    same_output(local_images, tmp_path / "beam")


def test_a_worker_error_in_another_process_is_one_clear_error(tree, tmp_path):
    """--strict fails on the first undecodable image, inside a worker process: the runner
    reports a traceback as text, which comes out as one TfpipeError ending with the cause."""
    expected = r"pipeline 'shards' failed: .*DataError: .*\.JPEG: .*--strict.*--resume"
    with pytest.raises(PipelineFailed, match=expected):
        beam(tree, tmp_path / "beam", TWO_WORKERS, num_shards=2, strict=True)
    assert not (tmp_path / "beam" / "tfpipe.json").exists()

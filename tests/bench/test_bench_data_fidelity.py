"""`tfpipe bench` reads what it is given: a table dataset with the tabular pipeline its manifest
calls for, and a --profile folder it cannot write is refused before anything is timed."""

import json
import os
import time

import numpy as np
import pandas as pd
import pytest
from _cli import run_cli

import tfpipe
from tfpipe.errors import ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def bench(*args):
    return run_cli("bench", "--quiet", *args, env={"COLUMNS": "200"})


@pytest.fixture(scope="module")
def table_ds(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench_table")
    x = np.arange(1001)
    pd.DataFrame({"x": x * 0.5, "k": x % 7, "y": x % 3}).to_csv(root / "t.csv", index=False)
    tfpipe.convert(str(root / "t.csv"), str(root / "ds"), label="y", num_shards=3, workers=1)
    return root / "ds"


@pytest.mark.slow
def test_a_table_dataset_is_benched_with_the_pipeline_its_manifest_calls_for(table_ds, tmp_path):
    report = tmp_path / "report.json"
    run = bench(
        "--data", table_ds, "--step-time-ms", 10, "--batch-size", 64, "--seconds", 0.2, "--warmup", 0,
        "--cache", "none", "--max-cores", 1, "--json", report,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert json.loads(report.read_text())["pipeline"] == "tabular"


def test_from_python_too_the_manifest_picks_the_pipeline(table_ds):
    assert tfpipe.BenchConfig(data=str(table_ds)).pipeline == "tabular"
    assert tfpipe.BenchConfig(data=str(table_ds) + "/").pipeline == "tabular"
    assert tfpipe.BenchConfig().pipeline == "imagenet"  # generated ImageNet-like data
    assert tfpipe.BenchConfig(data=str(table_ds), pipeline="tabular").global_batch == 1024


@pytest.mark.slow
def test_an_image_pipeline_on_a_table_dataset_is_refused_by_name(table_ds):
    with pytest.raises(
        ConfigError, match=r"is a table, which the tabular pipeline reads. Received: pipeline='imagenet'"
    ):
        tfpipe.bench(data=str(table_ds), pipeline="imagenet", step_time_ms=10, batch_size=64)


@pytest.mark.slow
@pytest.mark.parametrize("where", ["proc", "read-only"])
def test_a_profile_folder_that_cannot_be_written_is_refused_before_timing(table_ds, tmp_path, where):
    if where == "proc":
        profile = "/proc/self/tfpipe-profile"  # no folder can be made there, even by root
    else:
        if os.geteuid() == 0:
            pytest.skip("root writes in a read-only folder")
        folder = tmp_path / "ro"
        folder.mkdir()
        folder.chmod(0o555)
        profile = folder / "trace"
    started = time.monotonic()
    run = bench(
        "--data", table_ds, "--step-time-ms", 10, "--batch-size", 64, "--profile", profile, "--seconds", 5
    )
    assert run.returncode == 1 and "profile (--profile) must be a folder tfpipe can write in" in run.stderr
    assert "Traceback" not in run.stderr and time.monotonic() - started < 30

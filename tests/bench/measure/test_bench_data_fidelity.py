"""`tfpipe bench` reads what it is given: a table dataset with the tabular pipeline its manifest
calls for, and a --profile folder it cannot write is refused before anything is measured."""

import json
import os

import numpy as np
import pandas as pd
import pytest

import tfpipe
from tfpipe.errors import ConfigError

from support.bench_once import handing
from support.cli import main_cli

# `bench_once` lists every measurement a bench of this module asked for: a refusal adds none.
pytestmark = pytest.mark.usefixtures("bench_once")


@pytest.fixture(autouse=True)
def wide(monkeypatch) -> None:
    """Wide enough that rich does not wrap the report's sentences apart."""
    monkeypatch.setenv("COLUMNS", "200")


def bench(capsys, *args):
    """`tfpipe bench --quiet ARGS` through its entry point, in this process."""
    return main_cli(capsys, "bench", "--quiet", *args)


@pytest.fixture(scope="module")
def table_ds(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench_table")
    x = np.arange(1001)
    pd.DataFrame({"x": x * 0.5, "k": x % 7, "y": x % 3}).to_csv(root / "t.csv", index=False)
    tfpipe.convert(str(root / "t.csv"), str(root / "ds"), label="y", num_shards=3, workers=1)
    return root / "ds"


def test_a_table_dataset_is_benched_with_the_pipeline_its_manifest_calls_for(table_ds, tmp_path, capsys):
    # The pipeline is chosen before anything is timed: the bench runs whole on rates given for
    # its plan (tests/bench/test_bench_run.py times a table's pipeline for real).
    report = tmp_path / "report.json"
    with handing():
        code, _, err = bench(
            capsys, "--data", table_ds, "--step-time-ms", 10, "--batch-size", 64, "--seconds", 0.2,
            "--warmup", 0, "--cache", "none", "--max-cores", 1, "--json", report,
        )  # fmt: skip
    assert code == 0, err
    assert json.loads(report.read_text())["pipeline"] == "tabular"


def test_from_python_too_the_manifest_picks_the_pipeline(table_ds):
    assert tfpipe.BenchConfig(data=str(table_ds)).pipeline == "tabular"
    assert tfpipe.BenchConfig(data=str(table_ds) + "/").pipeline == "tabular"
    assert tfpipe.BenchConfig().pipeline == "imagenet"  # generated ImageNet-like data
    assert tfpipe.BenchConfig(data=str(table_ds), pipeline="tabular").global_batch == 1024


def test_an_image_pipeline_on_a_table_dataset_is_refused_by_name(table_ds, bench_once):
    asked = len(bench_once)
    with pytest.raises(
        ConfigError, match=r"is a table, which the tabular pipeline reads. Received: pipeline='imagenet'"
    ):
        tfpipe.bench(data=str(table_ds), pipeline="imagenet", step_time_ms=10, batch_size=64)
    assert len(bench_once) == asked  # refused before anything was measured


@pytest.mark.parametrize("where", ["proc", "read-only"])
def test_a_profile_folder_that_cannot_be_written_is_refused_before_timing(
    table_ds, tmp_path, where, capsys, bench_once
):
    if where == "proc":
        profile = "/proc/self/tfpipe-profile"  # no folder can be made there, even by root
    else:
        if os.geteuid() == 0:
            pytest.skip("root writes in a read-only folder")
        folder = tmp_path / "ro"
        folder.mkdir()
        folder.chmod(0o555)
        profile = folder / "trace"
    asked = len(bench_once)
    code, _, err = bench(
        capsys,
        "--data",
        table_ds,
        "--step-time-ms",
        10,
        "--batch-size",
        64,
        "--profile",
        profile,
        "--seconds",
        5,
    )
    assert code == 1 and "profile (--profile) must be a folder tfpipe can write in" in err
    assert "Traceback" not in err and len(bench_once) == asked  # refused before anything was measured

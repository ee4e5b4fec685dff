"""`tfpipe bench` through its real entry points, on tiny settings."""

from __future__ import annotations

import json
import os

import pytest

from tfpipe.bench.measure.synthetic import EXAMPLES_ENV
from tfpipe.cli import main

from support.bench_once import handing, run_cli_handed

TINY = "24"  # generated ImageNet-like JPEGs: enough for 8 shards, quick to make
BATCH = "16"  # at most TINY: a bench refuses a batch larger than its data


@pytest.fixture(scope="module")
def cache_home(tmp_path_factory):
    return str(tmp_path_factory.mktemp("xdg_cache"))


@pytest.fixture(scope="module")
def first_run(cache_home):
    """`tfpipe bench` with no flags but a short window, on a fresh cache, in a process of its
    own: it generates data. Its windows are given (what these check is the data made and
    reused and what the report says; an image pipeline is timed for real through the same entry
    point in test_bench_profile.py and test_bench_storage.py)."""
    # COLUMNS: wide enough that rich does not wrap the data line's phrases apart.
    env = {"XDG_CACHE_HOME": cache_home, "COLUMNS": "200", EXAMPLES_ENV: TINY}
    return run_cli_handed("bench", "--seconds", "0.5", "--warmup", "0.25", "--batch-size", BATCH, env=env)


@pytest.mark.slow
def test_no_flags_generates_data_and_prints_the_verdict(first_run, cache_home) -> None:
    assert first_run.returncode == 0, first_run.stderr
    out = first_run.stdout
    for needle in (
        "tfpipe bench",
        "Producer",
        "Consumer",
        "Verdict",
        "INPUT-BOUND",
        "Bottleneck",
        "Cores needed",
        "Stage prefixes",
        "Scaling with cores",
        "Recommendations",
        "synthetic",
        "generated in",
        "(approximate)",
        "on Cloud TPU v4-8 (4 chips, 1 host)",  # the default consumer is a TPU host
    ):
        assert needle in out, needle
    datasets = os.listdir(os.path.join(cache_home, "tfpipe", "datasets"))
    assert len(datasets) == 1 and datasets[0].startswith(f"imagenet-{TINY}-")
    assert "TensorFlow" not in first_run.stderr and "cuda" not in first_run.stderr.lower()


@pytest.mark.slow
def test_second_run_reuses_the_cache_and_writes_json_plot(
    first_run, cache_home, tmp_path, monkeypatch, capsys
) -> None:
    """On rates given for its plan (what it checks, the data reused, the reference row, the
    JSON, the plot and the exit code, does not depend on them)."""
    from support.report_schema import validate

    assert first_run.returncode == 0
    monkeypatch.setenv("XDG_CACHE_HOME", cache_home)
    monkeypatch.setenv(EXAMPLES_ENV, TINY)
    report, png = tmp_path / "r.json", tmp_path / "r.png"
    with handing():
        rc = main(
            [
                "bench",
                "--seconds",
                "0.3",
                "--warmup",
                "0.2",
                "--max-cores",
                "1",
                "--batch-size",
                BATCH,
                "--json",
                str(report),
                "--plot",
                str(png),
                "--accelerator",
                "resnet50-tpu-v4",
                "--fail-if-input-bound",
                "--quiet",
            ]
        )
    # 400 images/s given against a TPU v4 host's 13,800 (2 CPU cores cannot feed one): exit 3.
    assert rc == 3
    obj = json.loads(report.read_text())
    validate(obj)
    assert obj["dataset"]["synthetic"] is True and obj["dataset"]["generated_sec"] == 0.0
    assert obj["dataset"]["examples"] == int(TINY) and obj["dataset"]["shards"] == 8
    assert obj["consumer"]["source"] == "reference" and obj["consumer"]["examples_per_sec"] == 13800
    assert obj["verdict"] == "highly_input_bound"
    assert [p["cores"] for p in obj["scaling"]] == [1]
    assert obj["stages"][-1]["examples_per_sec"] == obj["producer"]["examples_per_sec"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    err = capsys.readouterr().err
    assert "highly_input_bound (--fail-if-input-bound)" in err


@pytest.mark.parametrize("bad", ["0", "-5", "abc", "nan", "inf", "1e-300", "0.0099"])
def test_step_time_ms_must_be_a_plausible_step(bad, capsys) -> None:
    with pytest.raises(SystemExit) as e:
        main(["bench", "--step-time-ms", bad])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert (
        "argument --step-time-ms: must be a number of milliseconds >= 0.01 (one training step; "
        f"no accelerator step is shorter). Received: '{bad}'"
    ) in err


def test_missing_data_is_a_clear_error(tmp_path, capsys) -> None:
    missing = tmp_path / "no" / "such" / "dataset"
    assert main(["bench", "--data", str(missing)]) == 1
    err = capsys.readouterr().err
    assert f"data='{missing}' (--data) does not exist" in err
    assert "tfpipe convert" in err and "Traceback" not in err


def test_conflicting_consumers_are_refused(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "--step-time-ms", "50", "--accelerator", "resnet50-a100"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_list_accelerators_shows_sources(capsys) -> None:
    assert main(["bench", "--list-accelerators"]) == 0
    out = capsys.readouterr().out
    assert "resnet50-tpu-v4" in out and "mlcommons" in out and "approximate" in out

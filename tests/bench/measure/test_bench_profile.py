"""`tfpipe bench --from-profile` on real accelerator profiles (tests/data/profiles, see its
README.md): every profile gives the Profiler's own figures through a real bench run, and every
profile that cannot give a training step time is refused in one line, before anything is timed.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import pathlib
import shutil
import sys

import pytest

import tfpipe
from tfpipe.bench import profiles
from tfpipe.bench.profiles import xprof_tool
from tfpipe.bench.wait import band
from tfpipe.cli import main

from support.bench_once import handing
from support.cli import main_cli

PROFILES = pathlib.Path(__file__).parents[2] / "data" / "profiles"
XPROF = xprof_tool.version()
# Raw .xplane.pb and .pb files are read with xprof; without the `profile` extra those tests skip,
# naming it (the converter's JSON needs no xprof).
needs_xprof = pytest.mark.skipif(
    XPROF is None, reason='needs the profile extra: pip install "tfpipe[profile]"'
)


def by_xprof(names):
    """`names` as parameters, those xprof must read (not JSON) marked `needs_xprof`."""
    return [pytest.param(n, marks=() if ".json" in n else needs_xprof) for n in names]


# What these check is how bench reads a profile and words it, not the producer's figures. Each
# runs on rates given for its plan (fast lane); those on the module's one measured plan (a batch
# of 32 on one host) also run on its real measurement (slow: ~15 CPU-s, made once and shared by
# them through support.bench_once). The TPU v2-8 profile's batch of 1,024 and the two-host run are plans
# of their own: given rates only, rather than a measurement each that nothing here reads.
PRODUCERS = [pytest.param("measured", marks=pytest.mark.slow), pytest.param("given")]
pytestmark = pytest.mark.usefixtures("bench_once")


def profile_cases(names):
    """(profile, producer) parameters: both producers for a profile that records no batch (the
    measured plan's 32 is given), given rates only for one that records its own."""
    return [
        pytest.param(p.values[0], q.values[0], marks=[*p.marks, *q.marks])
        for p in by_xprof(names)
        for q in (PRODUCERS if EXPECTED[p.values[0]][5] is None else PRODUCERS[1:])
    ]


# Tiny settings. No cache: the storage and first-epoch runs a caching pipeline adds are not what
# these test.
FAST = ["--seconds", "0.1", "--warmup", "0.05", "--max-cores", "1", "--quiet", "--cache", "none"]

# The Profiler's own figures, from tests/data/profiles/README.md: device, cores, steps analysed,
# mean step time (ms), input share (0..1), the global batch it records, partial steps dropped.
EXPECTED = {
    "gpu-input-bound.overview_page.pb": ("GPU", 8, 11, 1114.5, 0.8137, None, []),
    "gpu-compute-bound.overview_page.pb": ("GPU", 8, 11, 1805.1, 0.00019, None, []),
    "gpu-multi-worker-v100x8.xplane.pb": ("GPU", 8, 1, 21.3, 0.0, None, []),
    "cloud-tpu-v2-8.overview_page.json": ("TPU v2", 8, 3, 313.8, 0.0, 1024, []),
    "tpu-v5-training.overview_page.json.gz": ("TPU v5", 8, 4, 120.3, 0.0, None, ["4"]),
}
# The same runs' input-pipeline files: the same step figures, without the run environment.
SAME_RUN = {
    "gpu-input-bound.input_pipeline.pb": "gpu-input-bound.overview_page.pb",
    "gpu-compute-bound.input_pipeline.pb": "gpu-compute-bound.overview_page.pb",
    "cloud-tpu-v2-8.input_pipeline.json": "cloud-tpu-v2-8.overview_page.json",
    "tpu-v5-training.input_pipeline_analyzer.json.gz": "tpu-v5-training.overview_page.json.gz",
}


@pytest.fixture(autouse=True)
def wide(monkeypatch) -> None:
    """Wide enough that rich does not wrap the report's sentences apart."""
    monkeypatch.setenv("COLUMNS", "250")


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> str:
    """A tfpipe imagenet dataset of 1,031 tiny images: room for the TPU v2-8 run's batch of 1,024."""
    from tfpipe.testing import fake_data

    root = tmp_path_factory.mktemp("profile_bench")
    fake_data.write_image_folder(root / "src", classes=3, per_class=[344, 344, 343], size=(32, 24))
    dest = str(root / "ds")
    tfpipe.convert(str(root / "src"), dest, format="imagenet", num_shards=4, workers=1)
    return dest


def bench(args: list[str], tmp_path: pathlib.Path, capsys) -> tuple[int, dict | None, str, str]:
    """A real `tfpipe bench` through its entry point: exit code, JSON report, stdout, stderr."""
    report = tmp_path / "report.json"
    rc, out, err = main_cli(capsys, "bench", *args, *FAST, "--json", report)
    return rc, json.loads(report.read_text()) if report.exists() else None, out, err


def producing(producer: str):
    """Where a bench runs: on its own measurement (shared by the module's benches of its plan), or
    handed rates given for its plan."""
    return handing() if producer == "given" else contextlib.nullcontext()


def refused(args: list[str], capsys) -> str:
    """Runs `tfpipe bench` expecting a refusal: exit 1 and one line on stderr, which it returns."""
    rc, _, err = main_cli(capsys, "bench", *args, "--quiet")
    assert rc == 1
    assert err.startswith("tfpipe bench: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


def hide_xprof(monkeypatch) -> None:
    """Makes xprof unimportable, as on an install without the `profile` extra."""
    for name in [n for n in sys.modules if n == "xprof" or n.startswith("xprof.")] + ["xprof"]:
        monkeypatch.setitem(sys.modules, name, None)


@pytest.mark.parametrize(("name", "producer"), profile_cases(sorted(EXPECTED)))
def test_bench_reads_the_profilers_own_figures(name, producer, data, tmp_path, capsys, monkeypatch) -> None:
    from support.report_schema import validate

    device, cores, steps, step_ms, wait, recorded, dropped = EXPECTED[name]
    if name.endswith(".json"):
        hide_xprof(monkeypatch)  # the converter's JSON needs no xprof
    batch = [] if recorded else ["--batch-size", "32"]
    args = ["--data", data, "--from-profile", str(PROFILES / name), *batch]
    with producing(producer):
        rc, obj, out, _ = bench(args, tmp_path, capsys)
    assert rc == 0
    validate(obj)
    p = obj["profile"]
    assert (p["device"], p["cores"], p["steps"]) == (device, cores, steps)
    assert p["step_time_ms"] == pytest.approx(step_ms, rel=0.01)
    assert abs(p["input_wait"] - wait) * 100 <= 0.5
    assert p["verdict"] == band(wait)
    assert [d["step"] for d in p["dropped_partial_steps"]] == dropped
    assert p["batch_size"] == recorded and obj["batch_size"] == (recorded or 32)
    assert p["conclusion"].startswith("Your program is")
    consumer = obj["consumer"]
    fed = p["step_time_ms"] * (1 - p["input_wait"])
    assert consumer["source"] == "profile" and consumer["step_time_ms"] == pytest.approx(fed, rel=1e-5)
    assert consumer["examples_per_sec"] == pytest.approx(obj["batch_size"] / (fed / 1000), rel=1e-5)
    assert "Your profiled run waited" in out and "(measured by the Profiler)." in out
    assert "tfpipe's pipeline on this host makes" in out and "the accelerator takes when fed" in out
    if dropped:
        assert "Dropped step 4 of tpu-v5-training (3.05 ms): a partial last step" in out


@pytest.mark.parametrize("name", by_xprof(sorted(SAME_RUN)))
def test_input_pipeline_files_give_the_same_figures(name) -> None:
    a, b = profiles.read(str(PROFILES / name)), profiles.read(str(PROFILES / SAME_RUN[name]))
    assert (a.steps, a.step_time_ms, a.input_wait, a.dropped) == (
        b.steps,
        b.step_time_ms,
        b.input_wait,
        b.dropped,
    )


@needs_xprof
@pytest.mark.parametrize("producer", PRODUCERS)
def test_the_input_bound_run_side_by_side_in_text_plot_and_json(producer, data, tmp_path, capsys) -> None:
    png = tmp_path / "r.png"
    profile = str(PROFILES / "gpu-input-bound.overview_page.pb")
    with producing(producer):
        rc, obj, out, _ = bench(
            ["--data", data, "--from-profile", profile, "--batch-size", "32", "--plot", str(png)],
            tmp_path,
            capsys,
        )
    assert rc == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Your profiled run waited 81% of each step for input (measured by the Profiler)." in out
    # 32 images per (1114.5 ms x (1 - 0.8137)) = 207.6 ms fed: 154 images/s.
    assert obj["consumer"]["examples_per_sec"] == pytest.approx(154.1, rel=0.01)
    assert f"against the {obj['consumer']['examples_per_sec']:,.0f}/s the accelerator takes when fed" in out
    kinds = [r["kind"] for r in obj["recommendations"]]
    if obj["predicted_input_wait"] < 0.8137:
        assert kinds[0] == "pipeline_would_help"


@needs_xprof
@pytest.mark.parametrize("producer", PRODUCERS)
def test_newest_run_by_default_and_profile_run_picks_one(producer, data, tmp_path, capsys) -> None:
    logs = tmp_path / "logs"
    for run, source in (
        ("2020_05_01_10_00_00", "gpu-compute-bound.overview_page.pb"),
        ("2020_05_02_09_30_00", "gpu-input-bound.overview_page.pb"),
    ):
        (logs / "plugins" / "profile" / run).mkdir(parents=True)
        shutil.copy(PROFILES / source, logs / "plugins" / "profile" / run / "worker0.overview_page.pb")
    with producing(producer):
        rc, obj, out, _ = bench(
            ["--data", data, "--from-profile", str(logs), "--batch-size", "32"], tmp_path, capsys
        )
    assert rc == 0
    p = obj["profile"]
    assert p["run"] == "2020_05_02_09_30_00" and p["runs"] == ["2020_05_01_10_00_00", "2020_05_02_09_30_00"]
    assert p["input_wait"] == pytest.approx(0.8137, abs=0.005) and "(newest of 2)" in out
    older = profiles.read(str(logs), "2020_05_01_10_00_00")
    assert older.step_time_ms == pytest.approx(1805.1, rel=0.01)
    err = refused(
        ["--data", data, "--from-profile", str(logs), "--profile-run", "2019_01_01_00_00_00"], capsys
    )
    assert "profile_run must be one of the runs in" in err and "2020_05_01_10_00_00" in err


@needs_xprof
def test_every_host_of_a_multi_host_run(data, tmp_path, capsys) -> None:
    """Two hosts' pre-converted files: both read, the slowest host's step and the largest input
    share taken. (Two real hosts' files of different runs, to tell the rule's two halves apart.)"""
    run = tmp_path / "logs" / "plugins" / "profile" / "2021_01_01_00_00_00"
    run.mkdir(parents=True)
    shutil.copy(PROFILES / "gpu-input-bound.overview_page.pb", run / "host-a.overview_page.pb")
    shutil.copy(PROFILES / "gpu-compute-bound.input_pipeline.pb", run / "host-b.input_pipeline.pb")
    args = ["--data", data, "--from-profile", str(tmp_path / "logs"), "--batch-size", "32"]
    err = refused(args, capsys)
    assert "holds 2 hosts (host-a, host-b), but hosts=1 (--hosts)" in err
    with handing():  # a plan of its own (one host's half): given rates (see PRODUCERS)
        rc, obj, _, _ = bench([*args, "--hosts", "2"], tmp_path, capsys)
    assert rc == 0
    p = obj["profile"]
    assert p["hosts"] == ["host-a", "host-b"] and len(p["files"]) == 2
    assert p["step_time_ms"] == pytest.approx(1805.1, rel=0.01)
    assert p["input_wait"] == pytest.approx(0.8137, abs=0.005)
    # Each host feeds 16 of the 32: 16 / (1805.1 ms x (1 - 0.8137)).
    assert obj["consumer"]["examples_per_sec"] == pytest.approx(16 / (1.8051 * (1 - 0.81372)), rel=0.01)


@needs_xprof
def test_raw_xplanes_of_every_host_go_to_xprof_together(tmp_path) -> None:
    run = tmp_path / "plugins" / "profile" / "2021_02_03_04_05_06"
    run.mkdir(parents=True)
    for host in ("10.0.0.2_6003", "10.0.0.3_6003"):
        (run / f"{host}.xplane.pb").symlink_to(PROFILES / "gpu-multi-worker-v100x8.xplane.pb")
    p = profiles.read(str(tmp_path))
    assert p.hosts[0].files == tuple(str(run / f"{h}.xplane.pb") for h in ("10.0.0.2_6003", "10.0.0.3_6003"))
    assert p.cores == 16 and p.host_count == 2 and p.step_time_ms == pytest.approx(21.3, rel=0.01)
    assert p.xprof_version == XPROF and p.format == f"xplane, analysed by xprof {XPROF}"
    assert len(list(run.iterdir())) == 2  # xprof's cache file went to a temporary folder, not here


@needs_xprof
@pytest.mark.gcs
def test_a_gcs_log_dir(data, gcs_bucket, tmp_path, capsys) -> None:
    from tfpipe import storage

    run = f"{gcs_bucket}/logs/plugins/profile/2022_03_04_05_06_07"
    storage.write_atomic(
        f"{run}/t1v-n-0.xplane.pb", (PROFILES / "gpu-multi-worker-v100x8.xplane.pb").read_bytes()
    )
    rc, obj, _, _ = bench(
        ["--data", data, "--from-profile", f"{gcs_bucket}/logs", "--batch-size", "32"], tmp_path, capsys
    )
    assert rc == 0
    p = obj["profile"]
    assert p["files"] == [f"{run}/t1v-n-0.xplane.pb"] and p["step_time_ms"] == pytest.approx(21.3, rel=0.01)


# ---- refused by name, one line, exit 1, before anything is timed ----


@needs_xprof
def test_an_inference_profile_has_no_training_steps(capsys) -> None:
    err = refused(
        ["--from-profile", str(PROFILES / "tpu-v6e-inference.xplane.pb"), "--batch-size", "8"], capsys
    )
    assert "holds no training steps" in err and "TPU v6 Lite" in err and "No step time measured" in err


@needs_xprof
def test_a_cpu_only_profile_from_keras_fit(tmp_path, capsys) -> None:
    """Made here by Keras fit with TensorBoard(profile_batch=(2, 4)): Keras writes under train/."""
    run = tmp_path / "logs" / "train" / "plugins" / "profile" / "2026_11_25_12_59_35"
    run.mkdir(parents=True)
    shutil.copy(PROFILES / "cpu-only-keras.xplane.pb", run / "vm.xplane.pb")
    err = refused(["--from-profile", str(tmp_path / "logs"), "--batch-size", "4"], capsys)
    assert (
        "is a CPU-only profile (CPU, host vm)" in err and "measures no step time without a GPU or TPU" in err
    )


def test_a_folder_without_a_profile(tmp_path, capsys) -> None:
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "events.out.tfevents.1").write_bytes(b"")
    err = refused(["--from-profile", str(tmp_path), "--batch-size", "8"], capsys)
    assert f"No profile in '{tmp_path}'" in err and "plugins/profile/<run>" in err


def test_a_missing_path(tmp_path, capsys) -> None:
    err = refused(["--from-profile", str(tmp_path / "nope")], capsys)
    assert "(--from-profile) does not exist" in err


@needs_xprof
@pytest.mark.parametrize(
    ("name", "make", "says"),
    [
        ("h.xplane.pb", lambda b: b[:100_000], f"xprof {XPROF} could not read"),
        ("h.xplane.pb", lambda b: b"", "is empty: a corrupt profile"),
        ("h.overview_page.pb", lambda b: b[: len(b) // 2], "does not parse as the Profiler's OverviewPage"),
        ("h.overview_page.json.gz", lambda b: gzip.compress(b)[:300], "not a whole gzip file"),
        ("h.overview_page.json", lambda b: b[:500], "is corrupt: not JSON"),
    ],
)
def test_a_corrupt_file(name, make, says, tmp_path, capsys) -> None:
    sources = {
        ".xplane.pb": "gpu-multi-worker-v100x8.xplane.pb",
        ".overview_page.pb": "gpu-input-bound.overview_page.pb",
    }
    source = next((v for k, v in sources.items() if name.endswith(k)), "cloud-tpu-v2-8.overview_page.json")
    (tmp_path / name).write_bytes(make((PROFILES / source).read_bytes()))
    err = refused(["--from-profile", str(tmp_path / name), "--batch-size", "8"], capsys)
    assert str(tmp_path / name) in err and says in err


def test_xprof_missing_names_the_extra(monkeypatch, capsys) -> None:
    hide_xprof(monkeypatch)
    for name in ("gpu-multi-worker-v100x8.xplane.pb", "gpu-input-bound.overview_page.pb"):
        err = refused(["--from-profile", str(PROFILES / name), "--batch-size", "8"], capsys)
        assert "needs the TensorFlow Profiler (the xprof package), which is not installed" in err
        assert 'pip install "tfpipe[profile]"' in err


@needs_xprof
def test_an_xprof_output_it_does_not_know_names_the_version(tmp_path, capsys) -> None:
    page = json.loads((PROFILES / "cloud-tpu-v2-8.overview_page.json").read_text())
    page = [t for t in page if "stepnum" not in [c.get("id") for c in t.get("cols", [])]]
    (tmp_path / "h.overview_page.json").write_text(json.dumps(page))
    err = refused(["--from-profile", str(tmp_path / "h.overview_page.json"), "--batch-size", "8"], capsys)
    assert "no step-time table" in err and f"xprof 2.24 (installed: {XPROF})" in err


@needs_xprof
def test_batch_size_from_the_profile_or_given(capsys) -> None:
    gpu = str(PROFILES / "gpu-input-bound.overview_page.pb")
    err = refused(["--from-profile", gpu], capsys)
    assert "needs the profiled run's global batch (--batch-size)" in err and "does not record it" in err
    tpu = str(PROFILES / "cloud-tpu-v2-8.overview_page.json")
    err = refused(["--from-profile", tpu, "--batch-size", "256"], capsys)
    assert "batch_size=256 (--batch-size), but the profile" in err and "records a global batch of 1024" in err


@needs_xprof
def test_a_consumer_beyond_any_host_is_refused(capsys) -> None:
    # 21.3 ms for 10^6 images would be 47M images/s: the batch cannot be that.
    err = refused(
        ["--from-profile", str(PROFILES / "gpu-multi-worker-v100x8.xplane.pb"), "--batch-size", "1000000"],
        capsys,
    )
    assert "beyond what any accelerator host takes in" in err


def test_profile_flags_are_checked(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "--from-profile", "x", "--step-time-ms", "50"])
    assert "not allowed with argument" in capsys.readouterr().err
    err = refused(["--profile-run", "2020_01_01_00_00_00"], capsys)
    assert (
        "profile_run (--profile-run) picks a run of from_profile (--from-profile), which is not given" in err
    )


@pytest.mark.slow
def test_import_tfpipe_and_bench_need_no_xprof() -> None:
    import subprocess

    code = (
        "import sys; sys.modules['xprof'] = None\n"
        "import tfpipe, tfpipe.bench, tfpipe.bench.profiles, tfpipe.cli.bench\n"
        "print('tensorflow' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


# ---- the rules, on given numbers ----


def steps(*ms: float, percent: float = 0.0) -> tuple[profiles.Step, ...]:
    return tuple(profiles.Step(str(i), t, t * percent / 100, percent) for i, t in enumerate(ms))


def host(name: str, ms: tuple[profiles.Step, ...], device: str = "TPU v4", batch: int | None = None):
    return profiles.HostAnalysis(name, (f"{name}.xplane.pb",), "test", device, "TPU", 4, 1, batch, ms, "")


def test_only_a_short_last_step_is_partial() -> None:
    from tfpipe.bench.profiles.analysis import split_partial

    kept, dropped = split_partial("h", steps(100, 102, 49.9))
    assert len(kept) == 2 and dropped == profiles.DroppedStep("h", "2", 49.9, 100)
    assert split_partial("h", steps(100, 102, 50.0)) == (steps(100, 102, 50.0), None)  # half: not shorter
    assert split_partial("h", steps(10, 100, 100))[1] is None  # a short first step is not partial
    assert split_partial("h", steps(3.0))[1] is None  # one step: no median to be short against


def test_hosts_of_one_run_combine_slowest_step_and_largest_wait() -> None:
    from tfpipe.bench.profiles.analysis import summarize

    a = host("a", steps(100, 100, 100, 40, percent=10))
    b = host("b", steps(120, 121, 119, percent=2), device="TPU")  # an input-pipeline file: "TPU" only
    p = summarize("logs", "run", ("run",), (a, b), None)
    assert (
        p.step_time_ms == 120
        and p.input_wait == pytest.approx(0.10)
        and p.verdict == "moderately_input_bound"
    )
    assert p.steps == 3 and p.device == "TPU v4" and p.cores == 8 and p.host_count == 2
    assert [d.step_ms for d in p.dropped] == [40] and p.fed_step_time_ms == pytest.approx(108)
    with pytest.raises(profiles.ProfileError, match=r"its hosts name different devices, \['GPU', 'TPU v4'\]"):
        summarize("logs", "run", ("run",), (a, host("c", steps(100), device="GPU")), None)
    with pytest.raises(profiles.ProfileError, match=r"record different global batches, \[512, 1024\]"):
        summarize(
            "logs", "run", ("run",), (host("a", steps(1), batch=1024), host("b", steps(1), batch=512)), None
        )


def test_a_run_that_only_waited_holds_no_compute_time() -> None:
    from tfpipe.bench.measure.consumer import from_profile
    from tfpipe.bench.profiles.analysis import summarize

    p = summarize("logs", None, (), (host("a", steps(50, 50, percent=100)),), None)
    with pytest.raises(
        profiles.ProfileError, match=r"waited for input 100% of each step.*Use --step-time-ms"
    ):
        from_profile(p, 1024, 1, "imagenet")
    fed = from_profile(
        summarize("logs", None, (), (host("a", steps(50, 50, percent=20)),), None), 1024, 4, "imagenet"
    )
    assert fed.step_time_ms == pytest.approx(40) and fed.examples_per_sec == pytest.approx(256 / 0.040)

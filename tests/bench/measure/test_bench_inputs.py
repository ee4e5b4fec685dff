"""`tfpipe bench` refuses what it cannot measure before it measures anything: raw data named
for what it is, a batch larger than the data, an implausible step time, an output path it
could not write at the end. Library errors are TfpipeErrors; the CLI prints one line."""

from __future__ import annotations

import os
import shutil
import time

import pytest

import tfpipe
from tfpipe.bench import BenchConfig
from tfpipe.bench.measure import data, producer
from tfpipe.bench.measure.synthetic import EXAMPLES_ENV
from tfpipe.errors import ConfigError, DataError
from tfpipe.testing import fake_data

from support.cli import main_cli

ROWS = 37


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    """A 37-row table as CSV and Parquet, its converted dataset (2 shards), and 5 images."""
    root = tmp_path_factory.mktemp("bench_inputs")
    df = fake_data.make_table(ROWS, seed=2)
    csv = fake_data.write_table(df, root / "t.csv")
    fake_data.write_table(df, root / "t.parquet")
    tfpipe.convert(csv, str(root / "tab"), label="label", num_shards=2, workers=1)
    fake_data.write_image_folder(root / "imgs", classes=2, per_class=[3, 2], size=(32, 24), seed=1, workers=1)
    shutil.copy(root / "tab" / "train-00000-of-00002", root / "lone.tfrecord")
    os.makedirs(root / "empty_ish")
    (root / "empty_ish" / "notes.txt").write_text("no data here")
    os.makedirs(root / "run[1]")  # exists: a folder, not a pattern, as build() takes it
    (root / "run[1]" / "notes.txt").write_text("no data here")
    return root


def bench_cli(capsys, *args: str) -> tuple[int, str]:
    start = time.monotonic()
    code, out, err = main_cli(
        capsys, "bench", "--quiet", "--seconds", "0.2", "--warmup", "0.1", "--max-cores", "1", *args
    )
    assert time.monotonic() - start < 30 and "Timing" not in out  # refused before measuring
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return code, err.strip()


def test_raw_data_is_named_with_what_to_run(raw, capsys, monkeypatch) -> None:
    monkeypatch.chdir(raw)
    expected = {
        "t.csv": "t.csv is a CSV table file, not a tfpipe dataset: run `tfpipe convert t.csv DEST "
        "--label COLUMN` first, then `tfpipe bench --data DEST --pipeline tabular`.",
        "t.parquet": "t.parquet is a Parquet table file, not a tfpipe dataset: run `tfpipe convert "
        "t.parquet DEST --label COLUMN` first, then `tfpipe bench --data DEST "
        "--pipeline tabular`.",
        "imgs": "imgs is a folder of image class folders, not a tfpipe dataset: run `tfpipe convert "
        "imgs DEST` first, then `tfpipe bench --data DEST`.",
        "imgs/n01440764/n01440764_0.JPEG": "imgs/n01440764/n01440764_0.JPEG is an image file, not "
        "a tfpipe dataset: run `tfpipe convert",
        "tab/train-00000-of-00002": "tab/train-00000-of-00002 names shard files of the tfpipe "
        "dataset tab: pass the dataset itself, --data tab (data='tab')",
        "tab/train-*": "tab/train-* names shard files of the tfpipe dataset tab",
        "empty_ish": "empty_ish has no tfpipe.json, so it is not a tfpipe dataset: pass its TFRecord "
        "files as a glob such as 'empty_ish/train-*'",
        "empty_ish/": "empty_ish/ has no tfpipe.json, so it is not a tfpipe dataset: pass its "
        "TFRecord files as a glob such as 'empty_ish/train-*'",
        "run[1]": "run[1] has no tfpipe.json, so it is not a tfpipe dataset",
        "run[2]": "No files match data='run[2]' (--data): expected TFRecord shards.",
        "nothing/here": "data='nothing/here' (--data) does not exist.",
    }
    for given, message in expected.items():
        code, err = bench_cli(capsys, "--data", given)
        assert code == 1 and err.startswith(f"tfpipe bench: error: {message}"), (given, err)
    code, err = bench_cli(capsys, "--data", "lone.tfrecord", "--pipeline", "tabular")
    assert code == 1 and err == (
        "tfpipe bench: error: lone.tfrecord is a TFRecord file without a tfpipe.json manifest, and "
        "the tabular pipeline takes its schema and label from one: pass a tfpipe dataset directory, "
        "or convert the raw table with `tfpipe convert TABLE DEST --label COLUMN`."
    )
    code, err = bench_cli(capsys, "--data", "lone.tfrecord", "--split", "train")
    assert code == 1 and "leave split (--split) out for TFRecord files. Received: split='train'" in err
    with pytest.raises(DataError, match=r"t.csv is a CSV table file"):
        tfpipe.bench(data="t.csv", pipeline="tabular")


def test_batch_larger_than_the_data_is_refused_up_front(raw, capsys) -> None:
    tab = str(raw / "tab")
    code, err = bench_cli(
        capsys, "--data", tab, "--pipeline", "tabular", "--batch-size", "38", "--step-time-ms", "10"
    )
    assert code == 1 and err == (
        f"tfpipe bench: error: batch_size=38 (--batch-size) is larger than the 37 examples in "
        f"split 'train' of {tab}: every batch would repeat examples. Pass a batch size of at most "
        "37, or bench more data. Received: batch_size=38"
    )
    with pytest.raises(
        ConfigError,
        match=r"the default batch_size=1024 \(--batch-size\) is larger "
        r"than the 37 examples",
    ):
        tfpipe.bench(data=tab, pipeline="tabular", step_time_ms=10)
    with pytest.raises(ConfigError, match=r"larger than the 5 examples in the generated dataset"):
        tfpipe.bench(synthetic_examples=5, batch_size=6, step_time_ms=10, workdir=str(raw / "cache"))
    assert not os.path.exists(raw / "cache")


def test_generated_data_holds_at_least_one_global_batch(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(EXAMPLES_ENV, "3")
    said = []
    got = data.resolve(BenchConfig(batch_size=5, workdir=str(tmp_path)), said.append)
    assert got.info.synthetic and got.info.examples == 5 and got.split == "train"
    assert "Generating 5 synthetic ImageNet-like JPEGs (first run only)" in said


def test_step_time_must_imply_a_physical_consumer_rate() -> None:
    with pytest.raises(ConfigError, match=r"Received: step_time_ms=0\.005"):
        BenchConfig(step_time_ms=0.005)
    with pytest.raises(ConfigError) as e:
        BenchConfig(step_time_ms=0.05, batch_size=256)
    assert str(e.value) == (
        "step_time_ms=0.05 (--step-time-ms) for a global batch of 256 means 5.12e+06 examples/s "
        "per host, beyond what any accelerator host takes in (1e+06/s for the imagenet pipeline). "
        "Expected the milliseconds of one training step of the global batch. "
        "Received: step_time_ms=0.05"
    )
    assert BenchConfig(step_time_ms=0.05, batch_size=256, hosts=8).host_batch == 32  # 640k/s
    assert BenchConfig(pipeline="tabular", step_time_ms=0.05, batch_size=4096).step_time_ms == 0.05


@pytest.mark.parametrize("flag", ["--json", "--plot"])
def test_unwritable_outputs_fail_before_measuring(flag, tmp_path, capsys) -> None:
    missing = tmp_path / "no" / "such" / "r.out"
    code, err = bench_cli(capsys, flag, str(missing))
    assert code == 1 and err == (
        f"tfpipe bench: error: {flag} must be a file path in an existing, writable folder; the "
        f"folder {missing.parent} does not exist (tfpipe creates no folders for it). "
        f"Received: {flag}={str(missing)!r}"
    )
    assert not (tmp_path / "no").exists()
    code, err = bench_cli(capsys, flag, str(tmp_path))
    assert code == 1 and err.endswith(f"it is a folder. Received: {flag}={str(tmp_path)!r}")
    code, err = bench_cli(capsys, flag, "/proc/tfpipe-report.out")  # not writable, even for root
    assert code == 1 and "cannot write in /proc" in err


def test_missing_profile_parent_is_refused(tmp_path) -> None:
    with pytest.raises(
        ConfigError,
        match=r"profile \(--profile\) must be a folder inside an "
        r"existing folder",
    ):
        tfpipe.bench(profile=str(tmp_path / "a" / "b"), step_time_ms=10)
    assert not (tmp_path / "a").exists()


def test_library_errors_are_tfpipe_errors() -> None:
    from tfpipe._tf import tf
    from tfpipe.bench.measure.models import build_model

    with pytest.raises(ConfigError, match=r"Received: max_cores=0"):
        producer.core_counts(0)
    with pytest.raises(DataError, match=r"produced no elements: expected records in data \(--data\)"):
        producer.measure(lambda: tf().data.Dataset.range(0), examples_per_element=1, seconds=0.1, warmup=0)
    with pytest.raises(DataError, match=r"ran out during warm-up"):
        producer.measure(lambda: tf().data.Dataset.range(3), examples_per_element=1, seconds=0.1, warmup=0.1)
    with pytest.raises(ConfigError, match=r"Received: model='nope'"):
        build_model("nope", (None, None), 10)


@pytest.mark.parametrize(
    "flag,name,said",
    [
        ("--plot", "report.gif", "--plot writes the format its file extension names"),
        ("--plot", "report", "without an extension"),
        ("--json", "report.json.gz", "--json is written as plain JSON text"),
        ("--json", "report.png", "whose extension .png names another format"),
    ],
)
def test_an_output_named_for_another_format_is_refused_before_measuring(
    flag, name, said, tmp_path, capsys
) -> None:
    code, err = bench_cli(capsys, flag, str(tmp_path / name))
    assert code == 1 and said in err
    assert not os.listdir(tmp_path)

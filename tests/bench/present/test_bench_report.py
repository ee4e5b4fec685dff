"""Report JSON against its schema, the rendered table, and the PNG plot, from given numbers."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re

import pytest

from tfpipe.bench import reference
from tfpipe.bench.config import BenchConfig, check_step_time_ms
from tfpipe.bench.judge.conclusion import conclude
from tfpipe.bench.results import (
    Comparison,
    Consumer,
    DatasetInfo,
    Rate,
    ScalingPoint,
    Simulation,
    StageRate,
)
from tfpipe.errors import ConfigError

from support.report_schema import validate


def _rate(eps: float, per_element: int = 1, busy: float = 1.85) -> Rate:
    # `busy` cores over a 3 s window: CPU ms per example = 1000 * busy / eps.
    return Rate(eps, eps / per_element, int(eps * 3 / per_element), 3.0, 0.4, 1.5, 1000 * busy / eps, busy)


SCALING = (ScalingPoint.of(1, _rate(160.0, busy=1.0)), ScalingPoint.of(2, _rate(298.0, 37)))


def sample_report(
    consumer_eps: float = 2375.0,
    simulation: Simulation | None = None,
    scaling=SCALING,
    spread: float | None = None,
    load=None,
    sim_load=None,
):
    """A report from given numbers. With a host `load`, the producer's two windows (both at
    298/s, each with that load beside it) and the load average 3.2 -> 4.1; `sim_load` is
    --simulate's."""
    final = dataclasses.replace(_rate(298.0, 37), spread=spread, host=load)
    stages = (
        StageRate("read", ("list_files", "interleave", "shuffle", "repeat"), 4, _rate(41_000.0)),
        StageRate("parse", ("parse",), 5, _rate(23_000.0)),
        StageRate("decode", ("decode",), 6, _rate(305.0)),
        StageRate("batch", ("batch",), 7, _rate(301.0, 37)),
        StageRate("final", ("prefetch",), 8, final),
    )
    if sim_load is not None:
        simulation = Simulation(15.6, 40, 3.0, 2.6, 300.0, 0.874, 0.861, host=sim_load)
    windows = (final, final) if load is not None else ()
    return conclude(
        pipeline="imagenet",
        dataset=DatasetInfo("/tmp/x", 1111, 4, 120_000_000, True, 41.5),
        batch_size=74,
        hosts=2,
        producer=stages[-1].rate,
        consumer=Consumer(
            consumer_eps,
            37 / consumer_eps * 1000,
            "reference",
            "ResNet-50 on A100",
            url="https://x",
            approximate=True,
        ),
        stages=stages,
        scaling=scaling,
        simulation=simulation,
        comparison=Comparison(298.0, 210.0),
        environment={"tensorflow": "2.21.0", "cpu_count": 2},
        elapsed_sec=88.0,
        windows=windows,
        timed=tuple(s.rate for s in stages[:-1]) if load is not None else (),
        load_average=(3.2, 4.1) if load is not None else (None, None),
    )


def test_report_json_matches_schema_and_contract_keys() -> None:
    sim = Simulation(15.6, 40, 3.0, 2.6, 300.0, 0.874, 0.861)
    report = sample_report(simulation=sim)
    obj = json.loads(report.to_json_text())
    validate(obj)
    assert obj["verdict"] == "highly_input_bound"
    assert obj["predicted_input_wait"] == pytest.approx(1 - 298 / 2375, abs=1e-6)
    assert obj["measured_input_wait"] == pytest.approx(0.861)
    assert obj["measured_by"] == "simulate"
    assert (obj["batch_size"], obj["per_host_batch_size"], obj["hosts"]) == (74, 37, 2)
    assert obj["producer"]["examples_per_sec"] == 298.0
    assert obj["producer"]["batches_per_sec"] == pytest.approx(298 / 37, abs=1e-6)
    assert obj["consumer"] == {
        "examples_per_sec": 2375.0,
        "step_time_ms": pytest.approx(37 / 2375 * 1000, abs=1e-6),
        "source": "reference",
        "description": "ResNet-50 on A100",
        "device": "",
        "url": "https://x",
        "approximate": True,
    }
    assert obj["bottleneck"]["stage"] == "decode"
    assert [s["name"] for s in obj["stages"]] == ["read", "parse", "decode", "batch", "final"]
    assert obj["stages"][2] == {
        "name": "decode",
        "stages": ["decode"],
        "upto": 6,
        "examples_per_sec": 305.0,
        "elements_per_sec": 305.0,
        "first_element_sec": 0.4,
        "cpu_ms_per_example": pytest.approx(1850 / 305, abs=1e-6),
        "cores_busy": 1.85,
    }
    assert obj["scaling"] == [
        {"cores": 1, "examples_per_sec": 160.0, "cpu_ms_per_example": 6.25, "cores_busy": 1.0},
        {
            "cores": 2,
            "examples_per_sec": 298.0,
            "cpu_ms_per_example": pytest.approx(1850 / 298, abs=1e-6),
            "cores_busy": 1.85,
        },
    ]
    assert obj["cores_needed"]["cores"] == 16  # ceil(2375 / 149) at 2-core efficiency
    assert obj["service_workers"]["workers"] == 16  # 2 hosts x 2375/s over 298/s per 2-core worker
    assert [r["kind"] for r in obj["recommendations"]] == [
        "decode_bound",
        "cpu_bound_beyond_host",
        "poor_scaling",
    ] or [r["kind"] for r in obj["recommendations"]] == ["decode_bound", "cpu_bound_beyond_host"]
    assert obj["compare"]["ratio"] == pytest.approx(298 / 210, abs=1e-6)
    assert obj["compare"]["baseline_examples_per_sec"] == 210.0
    with pytest.deprecated_call():
        assert report.comparison.recipe_examples_per_sec == 210.0
    assert obj["schema_version"] == 5
    assert obj["profile"] is None and obj["consumer"]["source"] == "reference"


def test_cpu_cost_per_example_and_cores_needed_from_it() -> None:
    obj = sample_report().to_json()
    assert obj["producer"]["cpu_ms_per_example"] == pytest.approx(1850 / 298, abs=1e-6)
    assert obj["producer"]["cores_busy"] == 1.85
    assert [s["cpu_ms_per_example"] for s in obj["stages"]] == pytest.approx(
        [1850 / 41_000, 1850 / 23_000, 1850 / 305, 1850 / 301, 1850 / 298], abs=1e-6
    )
    # The consumer's 2,375/s x 6.21 CPU ms per example = 14.7 cores, next to the curve's 16.
    assert obj["cores_needed_from_cpu"] == {
        "cores": pytest.approx(2375 * 1.85 / 298, abs=1e-6),
        "cpu_ms_per_example": pytest.approx(1850 / 298, abs=1e-6),
        "cores_busy": 1.85,
        "at_cores": 2,
        "disagreement": None,  # 15 and 16 whole cores agree within 25%
    }


def test_report_says_when_cpu_cost_and_scaling_curve_disagree() -> None:
    # The scaling run reached only 120/s on 2 threads, keeping 1.0 core busy; the producer's CPU
    # cost says the work needs 14.7 cores at the consumer's rate, the curve 40.
    slow_curve = (ScalingPoint.of(1, _rate(80.0, busy=0.9)), ScalingPoint.of(2, _rate(120.0, busy=1.0)))
    report = sample_report(scaling=slow_curve)
    assert report.cores.cores == 40  # ceil(2375 / 60)
    why = report.cpu_cores.disagreement
    assert why.startswith("The scaling curve says ~40 cores, the CPU cost per example ~14.7, 167% apart.")
    assert "Cores sit idle: with 2 threads the pipeline kept 1.0 cores busy" in why
    obj = report.to_json()
    validate(obj)
    assert obj["cores_needed_from_cpu"]["disagreement"] == why
    from rich.console import Console

    from tfpipe.bench.present.render import renderables

    console = Console(width=200, record=True, file=io.StringIO())
    for r in renderables(report):
        console.print(r)
    text = " ".join(console.export_text().split())
    assert "Cores check" in text and "Cores sit idle" in text
    assert "~14.7 per host from CPU cost (6.208 CPU ms per example x 2,375 examples/s)" in text


def test_schema_rejects_a_report_missing_a_contract_key() -> None:
    obj = sample_report().to_json()
    assert obj["measured_input_wait"] is None and obj["measured_by"] is None
    validate(obj)
    del obj["bottleneck"]
    with pytest.raises(ValueError, match="'bottleneck' is a required property"):
        validate(obj)
    obj = sample_report().to_json() | {"verdict": "slow"}
    with pytest.raises(ValueError, match="slow"):
        validate(obj)
    # The independent checker in support.report_schema finds the same faults.
    with pytest.raises(ValueError, match="'bottleneck' is a required property"):
        validate(
            {k: v for k, v in sample_report().to_json().items() if k != "bottleneck"}, use_jsonschema=False
        )
    with pytest.raises(ValueError, match="verdict: 'slow' is not one of"):
        validate(sample_report().to_json() | {"verdict": "slow"}, use_jsonschema=False)
    with pytest.raises(ValueError, match=r"predicted_input_wait: 1.5 is above the maximum 1"):
        validate(sample_report().to_json() | {"predicted_input_wait": 1.5}, use_jsonschema=False)
    validate(sample_report().to_json(), use_jsonschema=False)


def test_not_input_bound_report() -> None:
    report = sample_report(consumer_eps=200.0)
    assert report.verdict == "not_input_bound"
    assert report.predicted_input_wait == 0.0
    assert [r.kind for r in report.recommendations] == ["keeps_up"]
    assert report.cores.cores == 2  # 200/s needs the 2nd core (1 core gives 160/s)


def test_plot_is_a_readable_png(tmp_path) -> None:
    from PIL import Image

    from tfpipe.bench.present.plot import write_plot

    for consumer in (2375.0, 250.0):
        path = write_plot(sample_report(consumer), str(tmp_path / f"bench-{consumer:.0f}.png"))
        with open(path, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
        with Image.open(path) as im:
            im.verify()
        with Image.open(path) as im:
            assert im.size[0] >= 1200 and im.size[1] >= 500
            # Not a blank canvas: the bars and lines put many colours on it.
            assert len(im.convert("RGB").getcolors(maxcolors=1 << 20)) > 50


def test_rendered_table_names_verdict_bottleneck_and_source() -> None:
    from rich.console import Console

    from tfpipe.bench.present.render import renderables

    console = Console(width=160, record=True, file=io.StringIO())
    for r in renderables(sample_report(simulation=Simulation(15.6, 40, 3.0, 2.6, 300.0, 0.874, 0.861))):
        console.print(r)
    text = console.export_text()
    for needle in (
        "HIGHLY INPUT-BOUND",
        "predicted 87.5%",
        "measured 86.1% (simulate)",
        "Bottleneck",
        "decode",
        "(approximate)",
        "Recommendations",
        "--resize-shorter",
        "ratio 1.42x",
        "37 per host x 2 hosts",
        "CPU ms/ex",
        "cores busy",
        "6.066",
        "from CPU cost",
    ):
        assert needle in text, needle
    assert "Cores check" not in text  # the two estimates agree


def test_reference_table_rows_cite_sources() -> None:
    rows = reference.rows()
    assert {"resnet50-v100", "resnet50-a100", "resnet50-h100", "resnet50-tpu-v3", "resnet50-tpu-v4"} <= {
        r.name for r in rows
    }
    for row in rows:
        assert row.url.startswith("https://") and row.source and row.derivation
        assert row.examples_per_sec > 0
        assert "approximate" in row.label
    # The mission is TPU step time: with no consumer, imagenet compares against a TPU host.
    assert reference.default_for("imagenet").name == "resnet50-tpu-v4"
    assert "TPU" in reference.default_for("imagenet").accelerator
    assert reference.default_for("tabular").preset == "tabular"
    with pytest.raises(ConfigError, match=r"accelerator must be one of .*Received: accelerator='tpu-v9'"):
        reference.lookup("tpu-v9")


# The TPU rows' figures, recomputed from the MLPerf training logs they cite (Google's
# result_0.txt, read by hand): (examples in a block, ms from block start to end of training,
# chips in the submission). One TPU host has 4 chips.
MLPERF_BLOCKS = {
    # v0.7 tpu-v3-32-TF2.0 ResNet: 4 epochs, block_start 1595499516492 to eval_start 1595499673767.
    "resnet50-tpu-v3": (4 * 1_281_167, 1595499673767 - 1595499516492, 16),
    # v1.0 tpu-v4-128-TF ResNet: 4 epochs, block_start 1620425314827 to block_stop 1620425338044.
    "resnet50-tpu-v4": (4 * 1_281_167, 1620425338044 - 1620425314827, 64),
    # v0.7 tpu-v3-32-TF2.0 BERT: 1,117 steps of 448, block_start 1594329972397 to block_stop 1594330486814.
    "bert-large-tpu-v3": (1117 * 448, 1594330486814 - 1594329972397, 16),
    # v0.7 tpu-v4-128-TF BERT: 163 steps of 3,072, block_start 1593088226272 to block_stop 1593088280206.
    # (v1.0's tpu-v4-128-TF BERT bucketed sequences by length: not a padded-to-512 figure.)
    "bert-large-tpu-v4": (163 * 3072, 1593088280206 - 1593088226272, 64),
}

# The GPT-3 rows, in tokens: (tokens in a block, ms from block_start to block_stop, chips).
MLPERF_TOKEN_BLOCKS = {
    # v3.1 cloud-tpu-v5e-4096-PAX: 50,331,648 tokens, 1696461509294 to 1696461618234, 4,096 chips.
    "gpt3-175b-tpu-v5e": (50_331_648, 1696461618234 - 1696461509294, 4096),
    # v4.0 cloud-tpu-v5p-1024-maxtext: 50,331,648 tokens, 1709184398703 to 1709184684484, 512 chips
    # (a v5p-N counts TensorCores, two a chip).
    "gpt3-175b-tpu-v5p": (50_331_648, 1709184684484 - 1709184398703, 512),
}
# MaxText's tiering table (docs/reference/models/tiering.md): tokens/s per device as published.
MAXTEXT_PER_DEVICE = {"llama3.1-8b-tpu-v6e": 7207, "llama2-70b-tpu-v6e": 900, "llama2-70b-tpu-v5p": 692}


@pytest.mark.parametrize("name", sorted(MLPERF_BLOCKS))
def test_tpu_rows_are_four_chips_of_the_mlperf_logs(name) -> None:
    examples, ms, chips = MLPERF_BLOCKS[name]
    row = reference.lookup(name)
    per_chip = examples / (ms / 1000) / chips
    assert row.examples_per_sec == pytest.approx(4 * per_chip, rel=0.002)
    assert row.url.startswith("https://github.com/mlcommons/training_results_v")
    said = re.search(r"([\d,.]+) per chip", row.derivation)
    assert said and float(said.group(1).replace(",", "")) == pytest.approx(per_chip, rel=0.002)
    assert "(4 chips, 1 host)" in row.accelerator


@pytest.mark.parametrize("name", sorted(MLPERF_TOKEN_BLOCKS))
def test_gpt3_rows_are_four_chips_of_the_mlperf_logs(name) -> None:
    tokens, ms, chips = MLPERF_TOKEN_BLOCKS[name]
    row = reference.lookup(name)
    per_chip = tokens / (ms / 1000) / chips
    assert row.tokens_per_sec == pytest.approx(4 * per_chip, rel=0.001)
    assert row.examples_per_sec == pytest.approx(row.tokens_per_sec / 2048)  # sequences of 2,048
    assert (row.sequence_length, row.packing, row.preset) == (2048, "concat", "text")
    said = re.search(r"([\d,.]+) per chip", row.derivation)
    assert said and float(said.group(1).replace(",", "")) == pytest.approx(per_chip, rel=0.001)
    assert "(4 chips per host)" in row.accelerator


@pytest.mark.parametrize("name", sorted(MAXTEXT_PER_DEVICE))
def test_maxtext_rows_are_four_devices_as_published(name) -> None:
    row = reference.lookup(name)
    assert row.tokens_per_sec == 4 * MAXTEXT_PER_DEVICE[name]
    assert f"{MAXTEXT_PER_DEVICE[name]:,} tokens/s per device" in row.derivation
    assert row.url.startswith("https://github.com/AI-Hypercomputer/maxtext/blob/")
    assert f"SL={row.sequence_length}" in row.derivation


def test_text_rows_serve_the_text_pipeline_only() -> None:
    assert {r.preset for r in reference.rows()} == {"imagenet", "tabular", "text"}
    assert reference.default_for("text").name == "bert-large-tpu-v4"  # a TPU row
    for row in reference.rows():
        assert (row.preset == "text") == (row.sequence_length is not None) == (row.tokens_per_sec is not None)
    assert BenchConfig(pipeline="text", accelerator="gpt3-175b-tpu-v5p").accelerator == "gpt3-175b-tpu-v5p"
    with pytest.raises(
        ConfigError, match=r"'bert-large-tpu-v4' is a text reference; for pipeline='imagenet'"
    ):
        BenchConfig(accelerator="bert-large-tpu-v4")
    with pytest.raises(ConfigError, match=r"sequence_length shapes the rows of the text pipeline"):
        BenchConfig(pipeline="imagenet", sequence_length=512)
    with pytest.raises(ConfigError, match=r"packing must be None or one of"):
        BenchConfig(pipeline="text", packing="best")  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0, -3, "abc", "nan", "inf", "", None, True, 1e-300, 0.0099])
def test_step_time_validation(bad) -> None:
    expected = r"step_time_ms must be a number of milliseconds >= 0\.01 \(one training step\). Received: step_time_ms="
    with pytest.raises(ConfigError, match=expected):
        check_step_time_ms(bad)
    if bad is not None:
        with pytest.raises(ConfigError, match="step_time_ms"):
            BenchConfig(step_time_ms=bad)  # type: ignore[arg-type]


def test_bench_config_validation() -> None:
    assert check_step_time_ms("12.5") == 12.5
    cfg = BenchConfig(batch_size=96, hosts=3, step_time_ms=50)
    assert (cfg.global_batch, cfg.host_batch) == (96, 32)
    assert BenchConfig(pipeline="tabular").host_batch == 1024
    with pytest.raises(
        ConfigError, match=r"at most one consumer.*step_time_ms=5.0, accelerator='resnet50-a100'"
    ):
        BenchConfig(step_time_ms=5.0, accelerator="resnet50-a100")
    with pytest.raises(ConfigError, match=r"model='resnet50', from_profile='gs://b/logs'"):
        BenchConfig(model="resnet50", from_profile="gs://b/logs")
    with pytest.raises(ConfigError, match=r"from_profile must be None or a non-empty path"):
        BenchConfig(from_profile="")
    with pytest.raises(ConfigError, match="batch_size=100, hosts=3"):
        BenchConfig(batch_size=100, hosts=3)
    with pytest.raises(ConfigError, match=r"model must be one of .*Received: model='mlp'"):
        BenchConfig(model="mlp")
    with pytest.raises(ConfigError, match="fit needs a model"):
        BenchConfig(fit=True)
    with pytest.raises(ConfigError, match="tabular reference"):
        BenchConfig(accelerator="widedeep-a100")
    with pytest.raises(ConfigError, match="pipeline must be one of"):
        BenchConfig(pipeline="audio")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="seconds must be a positive number"):
        BenchConfig(seconds=0)
    with pytest.raises(ConfigError, match=r"compare .* needs pipeline='imagenet'"):
        BenchConfig(pipeline="tabular", compare=True)


@pytest.mark.parametrize(
    ("field", "bad", "expected"),
    [
        ("seconds", True, "a positive number of seconds"),
        ("seconds", "3", "a positive number of seconds"),
        ("step_time_ms", "12.5", "a number of milliseconds, not text"),
        ("warmup_seconds", "1", "a number of seconds >= 0"),
        ("warmup_seconds", -1, "a number of seconds >= 0"),
        ("simulate", 1, "True or False"),
        ("fit", "yes", "True or False"),
        ("compare", None, "True or False"),
        ("batch_size", 4.0, r"a positive int \(the global batch\) or None"),
        ("batch_size", True, r"a positive int \(the global batch\) or None"),
        ("hosts", 1.0, "an integer >= 1"),
        ("max_cores", False, "an int >= 1 or None"),
        ("data", 5, "a path or None"),
        ("split", "", "None or a split name such as 'train'"),
    ],
)
def test_every_bench_field_is_checked_by_name(field, bad, expected) -> None:
    with pytest.raises(ConfigError, match=rf"{field} must be {expected}. Received: {field}={bad!r}"):
        BenchConfig(**{field: bad})


def test_bench_config_takes_any_integral_type_as_an_int(tmp_path) -> None:
    import numpy as np

    cfg = BenchConfig(batch_size=np.int64(8), hosts=np.int32(2), max_cores=np.uint8(2), data=tmp_path)
    assert (cfg.batch_size, cfg.hosts, cfg.host_batch, cfg.max_cores, cfg.data) == (8, 2, 4, 2, str(tmp_path))
    assert {type(v) for v in (cfg.batch_size, cfg.hosts, cfg.max_cores)} == {int}


@pytest.mark.parametrize(
    "name,magic",
    [("r.jpg", b"\xff\xd8\xff"), ("r.JPEG", b"\xff\xd8\xff"), ("r.svg", b"<?xml"), ("r.pdf", b"%PDF-")],
)
def test_a_plot_is_written_in_the_format_its_extension_names(tmp_path, name, magic) -> None:
    from PIL import Image

    from tfpipe.bench.present.plot import write_plot

    path = write_plot(sample_report(250.0), str(tmp_path / name))
    with open(path, "rb") as f:
        assert f.read(len(magic)) == magic  # not PNG bytes under another name
    if name.lower().endswith((".jpg", ".jpeg")):
        with Image.open(path) as im:
            assert im.format == "JPEG" and im.size[0] >= 1200


@pytest.mark.parametrize("name", ["r.gif", "r.webp", "report", "r.png.gz"])
def test_a_plot_extension_tfpipe_does_not_write_is_refused(tmp_path, name) -> None:
    from tfpipe.bench.present.plot import write_plot

    with pytest.raises(ConfigError, match=r"writes the format its file extension names: one of \.png, \.jpg"):
        write_plot(sample_report(250.0), str(tmp_path / name))
    assert not os.listdir(tmp_path)


def test_the_first_screen_reads_whole_at_80_columns() -> None:
    """An 80-column terminal: no header or stage name is cut ("examples…", "list_fil…")."""
    from rich.console import Console

    from tfpipe.bench.present.render import renderables

    report = sample_report()
    console = Console(width=80, record=True, file=io.StringIO())
    for r in renderables(report):
        console.print(r)
    text = console.export_text()
    assert "…" not in text and max(map(len, text.splitlines())) <= 80
    words = set(re.findall(r"[\w/]+", text))
    for stage in report.stages:
        assert stage.name in words and all(name in words for name in stage.stages), stage
    for header in ("examples", "consumer", "ms/ex", "busy", "element"):
        assert header in words, header


def test_the_scaling_point_at_the_producers_threadpool_is_the_producer() -> None:
    """One measurement: the curve's point at build()'s threadpool is the producer's window."""
    from rich.console import Console

    from tfpipe.bench.present.render import renderables

    report = sample_report()
    point = report.scaling[-1]
    console = Console(width=120, record=True, file=io.StringIO())
    for r in renderables(report):
        console.print(r)
    said = f"{point.cores} cores: the producer's own rate"
    assert (point.examples_per_sec == report.producer.examples_per_sec) == (said in console.export_text())


def test_report_says_which_keras_backend_and_releases_ran() -> None:
    import dataclasses
    import io

    from rich.console import Console

    from tfpipe.bench.present.render import renderables
    from tfpipe.bench.run import keras_environment

    env = {"tensorflow": "2.21.0", "keras_backend": "jax", "keras": "3.15.1", "jax": "0.10.2", "cpu_count": 2}
    report = dataclasses.replace(sample_report(), environment=env)
    obj = json.loads(report.to_json_text())
    validate(obj)
    assert (obj["schema_version"], obj["schema_minor_version"]) == (5, 7)
    assert obj["environment"] | env == obj["environment"]
    console = Console(width=200, record=True, file=io.StringIO())
    for r in renderables(report):
        console.print(r)
    text = " ".join(console.export_text().split())
    assert "Backend Keras 3.15.1 on JAX 0.10.2; tf.data on TensorFlow 2.21.0" in text
    # This process runs Keras on TensorFlow (the JAX backend's report: tests/test_backends.py).
    import keras

    here = keras_environment()
    assert here["keras_backend"] == "tensorflow" and here["keras"] == keras.__version__
    jax = pytest.importorskip("jax", reason='JAX: pip install "jax[cpu]"')
    assert here["jax"] == jax.__version__


def test_a_simulation_that_cannot_keep_its_step_is_no_measurement() -> None:
    from tfpipe.bench.present.render import short_step_sentence

    # Issue 34's text case: 1.7 ms steps, 600 steps in 3 s of which 0.2 s waiting: 4.67 ms a step.
    short = Simulation(1.7, 600, 3.0, 0.2, 30_000.0, 0.326, 0.073)
    assert short.consumer_step_ms == pytest.approx(2800 / 600)
    assert not short.holds_step
    report = sample_report(simulation=short)
    assert (report.measured_input_wait, report.measured_by) == (None, None)
    assert report.to_json()["simulation"]["holds_step"] is False
    assert short_step_sentence(short) == (
        "Cannot simulate steps of 1.7 ms here: the simulated consumer's steps took 4.7 ms without "
        "waiting, since taking a batch from Python (the call, the GIL, the sleep) costs that much "
        "in this process. Its wait is for that slower consumer, so it is not reported as the "
        "measured wait; --fit measures a real model.fit instead."
    )
    held = Simulation(15.6, 40, 3.0, 2.4, 300.0, 0.874, 0.8)  # 15 ms a step: held
    assert held.holds_step and sample_report(simulation=held).measured_input_wait == 0.8


def _said(report) -> str:
    """The terminal's text of a report, the summary's borders and whitespace folded."""
    from rich.console import Console

    from tfpipe.bench.present.render import renderables

    console = Console(width=200, record=True, file=io.StringIO())
    for r in renderables(report):
        console.print(r)
    return " ".join(console.export_text().replace("│", " ").split())


def test_the_verdict_carries_its_interval_and_says_when_it_cannot_tell() -> None:
    from tfpipe.bench.present.plot import _title

    # 298/s against 367.9/s: 19% predicted; a 10% spread puts the wait at [11%, 27%].
    report = sample_report(consumer_eps=298.0 / 0.81, spread=0.10)
    obj = json.loads(report.to_json_text())
    validate(obj)
    assert obj["producer"]["spread"] == 0.1
    assert obj["predicted_input_wait_interval"] == {
        "low": pytest.approx(1 - 1.1 * 0.81, abs=1e-6),
        "high": pytest.approx(1 - 0.9 * 0.81, abs=1e-6),
        "spread": 0.1,
        "bands": ["moderately_input_bound", "highly_input_bound"],
        "certain": False,
        "moved": 0.0,
        "busy": None,
    }
    # The headline, the verdict's line and the plot's title carry the JSON's doubt; the JSON's
    # `verdict` stays the point's band.
    assert obj["verdict"] == "moderately_input_bound"
    said = _said(report)
    assert (
        "Verdict CANNOT TELL MODERATELY FROM HIGHLY INPUT-BOUND predicted 19% [11, 27] of step time "
        "waiting for input: the interval spans the 20% edge"
    ) in said
    assert "MODERATELY INPUT-BOUND" not in said.replace("FROM HIGHLY", "")
    assert _title(report).startswith("Cannot tell moderately from highly input-bound: predicted 19% [11, 27]")
    # No spread taken (a window of fewer than 3 pieces): no interval, the point as before.
    assert sample_report().to_json()["predicted_input_wait_interval"] is None
    sure = sample_report(consumer_eps=298.0 / 0.6, spread=0.05)
    assert sure.certain and _title(sure).startswith("Highly input-bound: predicted 40% [37, 43]")
    assert "Verdict HIGHLY INPUT-BOUND predicted 40% [37, 43] of step time waiting for input" in _said(sure)


def test_a_busy_host_is_said_in_the_json_the_headline_and_the_plot() -> None:
    from tfpipe.bench.judge.host import BUSY_SHARE
    from tfpipe.bench.present.plot import _title
    from tfpipe.bench.results import HostLoad

    # A neighbour took 0.91 of the 2 cores over both producer windows (issue 41's busy run):
    # the wait lies in one band, yet the run cannot tell what a quiet host gives.
    busy = HostLoad(2, 0.91, 0.0, 3.0)
    report = sample_report(
        consumer_eps=298.0 / 0.6, spread=0.05, load=busy, sim_load=HostLoad(2, 1.1, 0.0, 9.0)
    )
    obj = json.loads(report.to_json_text())
    validate(obj)
    validate(obj, use_jsonschema=False)
    i = obj["predicted_input_wait_interval"]
    assert (i["bands"], i["certain"]) == (["highly_input_bound"], False)
    assert i["busy"].startswith("the host was busy: other processes took 0.91 of 2 cores while the producer")
    h = obj["host"]
    assert (h["busy"], h["busy_share"], h["producer"]["others_cores"], h["simulation"]["others_cores"]) == (
        True,
        BUSY_SHARE,
        0.91,
        1.1,
    )
    assert (h["load_average_start"], h["load_average_end"]) == (3.2, 4.1)
    assert [w["host"]["others_cores"] for w in obj["producer"]["windows"]] == [0.91, 0.91]
    said = _said(report)
    assert "Verdict HIGHLY INPUT-BOUND ON THIS BUSY HOST (CANNOT TELL) predicted 40% [37, 43]" in said
    assert (
        "Host BUSY: other processes took 0.91 of 2 cores while the producer was timed; 0.91 over every "
        "timed window; 1.10 beside --simulate; load average 3.2 at the start, 4.1 at the end. The "
        "rates are this host's under that load"
    ) in said
    assert _title(report).startswith("Highly input-bound on this busy host (cannot tell): predicted 40%")
    assert "the host was busy while it was measured" in _title(report)
    # Quiet: 0.03 of 2 cores is the kernel's own threads.
    quiet = sample_report(consumer_eps=298.0 / 0.6, spread=0.05, load=HostLoad(2, 0.03, 0.0, 3.0))
    assert quiet.certain and quiet.to_json()["host"]["busy"] is False
    assert "Host quiet: other processes took 0.03 of 2 cores while the producer was timed" in _said(quiet)


def test_a_scaling_curve_that_falls_is_not_extrapolated() -> None:
    from tfpipe.bench.present.plot import _scaling_title
    from tfpipe.bench.present.render import curve_cores_sentence

    # Issue 41: 972/s on 1 core, 565/s on 2, against a consumer of 1,100/s.
    falling = (ScalingPoint.of(1, _rate(972.0, busy=1.0)), ScalingPoint.of(2, _rate(565.0, 37)))
    report = sample_report(consumer_eps=1100.0, scaling=falling)
    assert (report.cores.cores, report.cores.rises, report.cores.extrapolated) == (None, False, False)
    obj = report.to_json()
    validate(obj)
    assert obj["cores_needed"]["cores"] is None and obj["cores_needed"]["rises"] is False
    assert curve_cores_sentence(report) == (
        "not from the scaling curve: it does not rise with cores (972/s on 1 core, 565/s on 2), so it "
        "cannot be extrapolated to the 1,100/s the consumer takes"
    )
    said = _said(report)
    assert "cores needed" not in said.lower().replace("cores needed not from the scaling curve", "")
    assert "100% efficiency" not in said and "extrapolated)" not in said
    assert "The rate does not rise with cores here" in said
    assert _scaling_title(report, [(1, 972.0), (2, 565.0)]) == (
        "Scaling: 972/s on 1, 565/s on 2 - does not rise, not extrapolated"
    )
    # Within what was measured it still answers: 1 core made 972/s, above a 700/s consumer.
    assert sample_report(consumer_eps=700.0, scaling=falling).cores.cores == 1
    # A curve that rises is extrapolated as before.
    assert sample_report(consumer_eps=900.0).cores == verdict_cores(900.0)


def verdict_cores(consumer_eps: float):
    from tfpipe.bench.judge.verdict import cores_needed

    return cores_needed(consumer_eps, [(p.cores, p.examples_per_sec) for p in SCALING])


def test_the_fit_row_gives_the_monitors_wait_and_the_differential_method_beside_it() -> None:
    from rich.console import Console

    from tfpipe.bench.present.render import CPU_FIT_NOTE, renderables
    from tfpipe.bench.results import FitCheck

    # 1,310 ms a step on the pipeline, 48.2% of it waiting for the batch (the monitor); 618 ms
    # on synthetic batches: 1 - 618/1310 = 52.8% by the differential method, 4.6 points of it
    # the model computing slower beside the pipeline.
    fit = FitCheck("small_cnn", "CPU", 12, 1310.0, 618.0, 0.482, 0.451, 0.513, 1 - 618.0 / 1310.0, 0.046)
    report = dataclasses.replace(sample_report(consumer_eps=298.0 / 0.85), fit=fit)
    assert (report.measured_input_wait, report.measured_by) == (0.482, "fit")
    console = Console(width=400, record=True, file=io.StringIO())
    for r in renderables(report):
        console.print(r)
    text = " ".join(console.export_text().split())
    assert (
        "small_cnn on CPU: 1310.0 ms/step on the pipeline, 48.2% [45, 51] of it waiting for its batch "
        "(measured in fit by tfpipe.monitor); bench predicted 15.0% for this consumer. On synthetic "
        "input 618.0 ms/step: the differential method reads 52.8%, of which 4.6 points are the model "
        "computing slower on the cores the pipeline shares"
    ) in text

    obj = report.to_json()
    validate(obj)
    validate(obj, use_jsonschema=False)
    assert obj["fit"]["input_wait_low"] == 0.451 and obj["fit"]["contention"] == 0.046
    assert " ".join(CPU_FIT_NOTE.split()) in text

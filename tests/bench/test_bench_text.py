"""`tfpipe bench --pipeline=text` on real converted corpora: the standard library's docstrings,
tokenized by a tokenizer trained on them with `tfpipe convert`, benched through the real CLI.

The in-process runs use tiny windows: what they check is the arithmetic in tokens, the fill
measured against the one predicted from the manifest, and what the report says, not speed.
"""

from __future__ import annotations

import json
import os
import re

import pytest

from tfpipe.bench import reference
from tfpipe.bench.fmt import percent1
from tfpipe.bench.measure.synthetic import EXAMPLES_ENV
from tfpipe.bench.results import Rate, ScalingPoint, StageRate, TextMeasure
from tfpipe.cli import main
from tfpipe.modalities.text.bench.advice import padding_sentence, text_advice
from tfpipe.modalities.text.bench.figures import figures

from support.bench_once import handing, run_cli_handed

pytest.importorskip("tokenizers", reason='the text extra: pip install "tfpipe[text]"')

# Tiny windows, one core, no cache (the storage and first-epoch runs a cache adds are not what
# most of these test). A bench planned as an earlier one reuses its measurement (support.bench_once).
pytestmark = pytest.mark.usefixtures("bench_once")
FAST = ["--seconds", "0.2", "--warmup", "0.1", "--max-cores", "1", "--quiet", "--cache", "none"]
DOCS = 301  # documents of the corpus: odd, so shards and batches are uneven
PROFILES = os.path.join(os.path.dirname(__file__), "..", "data", "profiles")


@pytest.fixture(autouse=True)
def wide(monkeypatch) -> None:
    """Wide enough that rich does not wrap the report's sentences apart."""
    monkeypatch.setenv("COLUMNS", "250")


def convert(corpus_docs, root, *args) -> str:
    """The documents as a JSON Lines corpus, converted by the real CLI with a trained BPE."""
    from tfpipe.synthetic import text

    src, dest = root / "corpus", str(root / "ds")
    text.write_corpus(src, corpus_docs, "jsonl", files=3)
    code = main(
        ["convert", str(src), dest, "--train-tokenizer", "bpe", "--vocab-size", "500", "--quiet", *args]
    )
    assert code == 0
    return dest


@pytest.fixture(scope="module")
def docs():
    from tfpipe.synthetic import text

    return text.documents(DOCS)


@pytest.fixture(scope="module")
def corpus(docs, tmp_path_factory) -> str:
    return convert(docs, tmp_path_factory.mktemp("text_bench"), "--num-shards", "3")


def bench(args, tmp_path, capsys):
    """A real `tfpipe bench` through its entry point: exit code, JSON report, stdout."""
    report = tmp_path / "report.json"
    rc = main(["bench", *args, *FAST, "--json", str(report)])
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    return rc, json.loads(report.read_text()) if report.exists() else None, out


@pytest.mark.slow  # a real bench: the fill counted, every prefix timed (~20 CPU-s)
def test_a_padded_pipeline_against_a_tpu_row_is_called_out(corpus, tmp_path, capsys) -> None:
    from support.report_schema import validate

    rc, obj, out = bench(
        ["--data", corpus, "--sequence-length", "128", "--packing", "none", "--batch-size", "64"],
        tmp_path,
        capsys,
    )
    assert rc == 0
    validate(obj)
    t = obj["text"]
    assert obj["pipeline"] == "text" and obj["schema_version"] == 5
    assert (t["sequence_length"], t["packing"], obj["batch_size"]) == (128, "none", 64)
    # Measured on the pipeline's batches and predicted from the histogram: within 1 point.
    fill = t["fill"]
    assert abs(fill["measured"] - fill["predicted"]) <= 0.01 and fill["agrees"] is True
    assert fill["measured_low"] <= fill["measured"] <= fill["measured_high"]
    assert t["padding"] == pytest.approx(1 - fill["measured"], abs=1e-6)
    assert t["predicted_fill"]["first_fit"] > 0.9 > t["predicted_fill"]["none"]
    # One padded document a row: the slots are mostly padding, and the verdict says how much.
    said = (
        f"Your accelerator spends {percent1(t['padding'])} of its token slots on padding with "
        f"packing=none; first_fit makes it {percent1(1 - t['predicted_fill']['first_fit'])}."
    )
    assert said in out
    kinds = [r["kind"] for r in obj["recommendations"]]
    assert "padding" in kinds and "tokenize_at_convert" in kinds
    # The default consumer is a TPU row, in slot tokens; the useful rate is slots x fill.
    c = t["consumer"]
    assert obj["consumer"]["source"] == "reference" and "TPU v4" in obj["consumer"]["description"]
    assert c["slot_tokens_per_sec"] == pytest.approx(reference.lookup("bert-large-tpu-v4").tokens_per_sec)
    assert c["sequences_per_sec"] == pytest.approx(c["slot_tokens_per_sec"] / 128)
    assert c["useful_tokens_per_sec"] == pytest.approx(c["slot_tokens_per_sec"] * fill["measured"], rel=1e-5)
    assert "trained at L=512, one padded document a row; at your L=128" in obj["consumer"]["description"]
    # Tokens throughout: the producer's real tokens over its slot tokens are the fill.
    p = t["producer"]
    assert p["sequences_per_sec"] == pytest.approx(obj["producer"]["examples_per_sec"], rel=1e-5)
    assert p["real_tokens_per_sec"] / p["slot_tokens_per_sec"] == pytest.approx(fill["measured"], rel=1e-4)
    assert (
        [s["name"] for s in t["stages"]]
        == [s["name"] for s in obj["stages"]]
        == [
            "read",
            "parse",
            "pack",
            "batch",
            "final",
        ]
    )
    assert all(s["cpu_ms_per_1k_tokens"] > 0 for s in t["stages"])
    assert t["documents"] == DOCS and t["lengths"]["p50"] <= t["lengths"]["p90"] <= t["lengths"]["p99"]
    for needle in ("sequences/s", "real tokens/s", "slot tokens/s", "CPU ms/1k tokens", "Padding", "Lengths"):
        assert needle in out, needle


@pytest.mark.slow
def test_a_labeled_corpus_against_a_profiled_tpu_run(docs, tmp_path_factory, tmp_path, capsys) -> None:
    """A classifier's rows, [CLS] tokens [SEP], one document a row: its fill is predicted with
    both added, within a point of the one counted on its batches. The consumer is a profiled TPU
    run, whose batch counts sequences. (The prefixes are timed for real by the padded test.)"""
    from tfpipe.synthetic import text

    from support.report_schema import validate

    root = tmp_path_factory.mktemp("labeled_text")
    labels = [i % 3 for i in range(len(docs))]
    text.write_corpus(root / "corpus", docs, "jsonl", files=2, labels=labels)
    dest = str(root / "ds")
    # A BERT-style WordPiece has [CLS] and [SEP].
    args = ["--train-tokenizer", "wordpiece", "--vocab-size", "800", "--label", "label", "--quiet"]
    assert main(["convert", str(root / "corpus"), dest, *args]) == 0
    assert main(["bench", "--data", dest, "--sequence-length", "128", "--quiet"]) == 1
    assert "longer than sequence_length - 2 = 126 tokens" in capsys.readouterr().err
    profile = ["--from-profile", os.path.join(PROFILES, "tpu-v5-training.overview_page.json.gz")]
    shape = ["--sequence-length", "128", "--truncate", "--batch-size", "32"]
    with handing():  # the rows are counted for real; the prefixes' windows are given
        rc, obj, out = bench(["--data", dest, *shape, *profile], tmp_path, capsys)
    assert rc == 0
    validate(obj)
    t = obj["text"]
    assert t["classify"] is True and t["truncate"] is True and t["packing"] == "none"
    assert set(t["predicted_fill"]) == {"none"}
    assert abs(t["fill"]["measured"] - t["fill"]["predicted"]) <= 0.01
    assert "(a classifier's row holds one document)" in out
    fed = obj["profile"]["fed_step_time_ms"]
    assert obj["consumer"]["source"] == "profile" and obj["batch_size"] == 32
    assert obj["consumer"]["examples_per_sec"] == pytest.approx(32 / (fed / 1000), rel=1e-5)
    assert "for a global batch of 32 sequences of 128 tokens" in obj["consumer"]["description"]
    assert t["consumer"]["slot_tokens_per_sec"] == pytest.approx(128 * 32 / (fed / 1000), rel=1e-5)
    assert "Your profiled run waited" in out and "Your accelerator spends" in out


def test_a_raw_corpus_is_named_with_the_convert_that_tokenizes_it(tmp_path, capsys) -> None:
    from tfpipe.synthetic import text

    (jsonl,) = text.write_corpus(tmp_path / "j", ["hello"], "jsonl")
    (parquet,) = text.write_corpus(tmp_path / "p", ["hello"], "parquet")
    for path, kind in ((jsonl, "JSON Lines"), (parquet, "Parquet")):
        assert main(["bench", "--data", path, "--pipeline", "text"]) == 1
        err = capsys.readouterr().err
        assert f"is a text corpus file ({kind}), not a tfpipe dataset" in err, err
        assert f"tfpipe convert {path} DEST --tokenizer PATH" in err and "at convert time" in err
    # Without --pipeline=text a Parquet file is a table, as before.
    assert main(["bench", "--data", parquet]) == 1
    assert "is a Parquet table file" in capsys.readouterr().err


def test_a_text_option_says_text_so_a_raw_corpus_is_named_with_its_convert(tmp_path, capsys) -> None:
    from tfpipe.synthetic import text

    (jsonl,) = text.write_corpus(tmp_path / "j", ["hello"], "jsonl")
    assert main(["bench", "--data", jsonl, "--sequence-length", "128"]) == 1
    err = capsys.readouterr().err
    assert (
        "is a text corpus file (JSON Lines), not a tfpipe dataset" in err and "pipeline='imagenet'" not in err
    )
    assert f"tfpipe convert {jsonl} DEST --tokenizer PATH" in err


def test_a_corrupt_text_shard_is_named_with_the_way_out(corpus, tmp_path, capsys) -> None:
    import shutil

    data = tmp_path / "ds"
    shutil.copytree(corpus, data)
    shard = data / "train-00000-of-00003"
    raw = bytearray(shard.read_bytes())
    mid = len(raw) // 2
    raw[mid : mid + 64] = bytes(b ^ 0xFF for b in raw[mid : mid + 64])
    shard.write_bytes(bytes(raw))
    rc = main(["bench", "--data", str(data), "--sequence-length", "128", "--batch-size", "8", *FAST])
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err
    assert (
        f"{data}: the pipeline stopped while bench read it (InvalidArgumentError): Corrupt TFRecord shard "
        in err
    )
    assert f"{shard}: read " in err and "Re-convert the shard" in err


def test_list_accelerators_shows_text_rows_in_tokens(capsys) -> None:
    assert main(["bench", "--list-accelerators"]) == 0
    out = capsys.readouterr().out
    assert "bert-large-tpu-v4  (default for --pipeline=text)  297,114 slot tokens/s" in out
    assert re.search(r"gpt3-175b-tpu-v5p  \(text\)  1,376 slot tokens/s = 0\.67 sequences/s \(L=2,048", out)
    assert "llama3.1-8b-tpu-v6e" in out and "tiering.md" in out


def test_text_options_are_checked(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "--pipeline", "text", "--packing", "best"])
    assert "invalid choice: 'best'" in capsys.readouterr().err
    assert main(["bench", "--pipeline", "imagenet", "--sequence-length", "128", "--quiet"]) == 1
    assert "sequence_length shapes the rows of the text pipeline" in capsys.readouterr().err


# ---- the arithmetic, from given numbers ----


def measure(**over) -> TextMeasure:
    base = dict(  # noqa: C408 (the fields, as TextMeasure takes them)
        sequence_length=512,
        packing="none",
        classify=False,
        truncate=False,
        chunk_documents=1000,
        rows_per_chunk=1000.0,
        rows=6400,
        real_tokens=int(6400 * 512 * 0.25),
        fill_sd=0.02,
        batches=100,
        predicted_fill={"none": 0.252, "first_fit": 0.991, "concat": 0.998},
        documents=5000,
        tokens=640_000,
        lengths={"p50": 60, "p90": 300, "p99": 380, "max": 9000, "longer": 20},
        suggested_length=384,
        suggested_fill=0.33,
        tokenizer="huggingface tokenizer.json, 8,000 ids",
        tokenize_ms_per_1k=2.0,
    )
    return TextMeasure(**(base | over))


def rate(eps: float) -> Rate:
    return Rate(eps, eps / 64, int(eps), 1.0, 0.5, 1.0, cpu_ms_per_example=1000 / eps, cores_busy=1.0)


def test_tokens_are_sequences_times_the_measured_fill() -> None:
    stages = (
        StageRate("read", ("chunk",), 7, rate(4000.0)),
        StageRate("final", ("prefetch",), 12, rate(2000.0)),
    )
    f = figures(
        measure(),
        producer=stages[-1].rate,
        consumer_eps=500.0,
        stages=stages,
        scaling=(ScalingPoint.of(1, rate(2000.0)),),
    )
    assert f.fill == 0.25 and f.padding == 0.75 and f.tokens_per_sequence == 128.0
    assert (f.real_tokens_per_sec, f.slot_tokens_per_sec) == (256_000.0, 1_024_000.0)
    assert (f.consumer_slot_tokens_per_sec, f.consumer_useful_tokens_per_sec) == (256_000.0, 64_000.0)
    assert f.stages[0].real_tokens_per_sec == 512_000.0
    assert f.stages[-1].cpu_ms_per_1k_tokens == pytest.approx(1000 / 2000 * 1000 / 128)
    assert f.scaling[0].real_tokens_per_sec == 256_000.0
    # 95%: +-1.96 x 0.02 / sqrt(100).
    assert (f.fill_low, f.fill_high) == pytest.approx((0.25 - 0.00392, 0.25 + 0.00392))
    assert f.fill_predicted == 0.252 and f.fill_agrees
    assert f.tokenize_cores == pytest.approx(64_000 * 2.0 / 1e6)


def test_first_fit_is_advised_within_a_point_of_the_best_fill() -> None:
    f = figures(measure(), producer=rate(2000.0), consumer_eps=500.0, stages=(), scaling=())
    # concat's 0.998 cuts documents for 0.7 points more: first_fit is named.
    assert (f.alternative, f.alternative_better) == (("first_fit", 0.991), True)
    assert f.steps_factor == pytest.approx(0.991 / 0.25)
    assert f.alternative_useful_tokens_per_sec == pytest.approx(500 * 512 * 0.991)
    assert padding_sentence(f) == (
        "Your accelerator spends 75.0% of its token slots on padding with packing=none; first_fit makes it 0.90%."
    )
    packed = figures(
        measure(packing="first_fit", real_tokens=int(6400 * 512 * 0.99)),
        producer=rate(1.0),
        consumer_eps=1.0,
        stages=(),
        scaling=(),
    )
    assert (packed.alternative, packed.alternative_better) == (("none", 0.252), False)
    assert padding_sentence(packed).endswith("; none would make it 74.8%.")
    recs = {r.kind: r for r in text_advice(f)}
    assert "4.0x fewer steps" in recs["padding"].action  # 0.991 / 0.25
    # One document a row, 99% of them under 384 tokens: a shorter L is advised.
    assert "sequence_length=384" in recs["sequence_length"].action
    assert "tensorflow-text" in recs["tokenize_at_convert"].action


def test_a_disagreeing_fill_is_said(capsys) -> None:
    from tfpipe.modalities.text.bench.advice import fill_sentence

    f = figures(measure(), producer=rate(1.0), consumer_eps=1.0, stages=(), scaling=())
    assert "agree within 1 point" in fill_sentence(f)
    off = figures(
        measure(predicted_fill={"none": 0.30}), producer=rate(1.0), consumer_eps=1.0, stages=(), scaling=()
    )
    assert not off.fill_agrees and "DISAGREE by more than 1 point" in fill_sentence(off)


def test_without_the_text_extra_the_tokenizer_cost_is_said_not_measured(corpus, monkeypatch) -> None:
    import types

    from tfpipe.errors import MissingExtraError
    from tfpipe.format.manifest import Manifest
    from tfpipe.modalities.text.bench import measure as textmeasure
    from tfpipe.modalities.text.convert import tokenizers

    def missing(path, fingerprint):
        raise MissingExtraError(
            'Text conversion needs the tokenizers package. Install the extra: pip install "tfpipe[text]"'
        )

    monkeypatch.setattr(tokenizers, "load_stored", missing)
    pipe = types.SimpleNamespace(source=types.SimpleNamespace(manifest=Manifest.load(corpus)))
    cost, note = textmeasure._tokenize_cost(pipe, [[1, 2, 3]])
    assert cost is None and 'pip install "tfpipe[text]"' in note


def small_text_report(path: str, url: str):
    """The report of a 79-document corpus at L=2048 read from gs:// at a trickle, against a slow
    consumer: every figure small, the paths long (as the issue met them)."""
    from tfpipe.bench.judge.conclusion import conclude
    from tfpipe.bench.results import Consumer, DatasetInfo, Storage

    names = ("read", "parse", "pack", "batch", "final")
    stages = tuple(StageRate(n, (n,), i, rate(30.0)) for i, n in enumerate(names, 1))
    m = measure(
        sequence_length=2048,
        packing="first_fit",
        chunk_documents=256,
        rows_per_chunk=629.7,
        documents=79,
        tokens=90_000,
        epoch_rows=49,
        predicted_fill={"first_fit": 0.25, "none": 0.05, "concat": 0.26},
        tokenize_ms_per_1k=0.31,
        tokenize_ms_range=(0.278, 0.763),
        tokenize_rounds=5,
    )
    return conclude(
        pipeline="text",
        dataset=DatasetInfo(path, 79, 2, 200_000, False, 0.0),
        batch_size=8,
        hosts=1,
        producer=stages[-1].rate,
        consumer=Consumer(1.0, 8000.0, "reference", "a TPU row", url=url, approximate=True),
        stages=stages,
        scaling=(ScalingPoint.of(1, rate(30.0)),),
        storage=Storage("gcs", "none", 30.0, 0.0213, 0.0081, 700.0, 0.0014, 1.0),
        text=m,
    )


def test_small_figures_long_paths_and_chunks_read_right_at_80_columns() -> None:
    """ "~0.0 per host", "0.0 MB/s", chunks of 256 documents on a corpus of 79 and a tokenizer
    cost without its spread: each is said as it is, through the CLI's own printing."""
    import argparse
    import io
    import types

    from rich.console import Console

    from tfpipe.cli.bench import _show_and_write

    path = "gs://my-training-bucket/datasets/text/imagenet-1280-7a128c726d4f9e2b3c1d0a9b8c7d6e5f4a3b"
    url = "https://github.com/mlcommons/training_results_v1.0/blob/master/Google/results/tpu-v4-128/bert/result_0.txt"
    report = small_text_report(path, url)
    console = Console(width=80, file=io.StringIO(), record=True)
    _show_and_write(
        report, argparse.Namespace(json=None, plot=None), console, types.SimpleNamespace(check=lambda: None)
    )
    out = console.export_text()
    flat = " ".join(out.replace("│", " ").split())  # the summary's sentences, unwrapped
    assert "…" not in out
    assert f"dataset: {path}" in out.splitlines() and f"consumer source: {url}" in out.splitlines()
    assert "< 0.1 per host from CPU cost" in flat and "~0.0 " not in flat
    assert "= 0.021 MB/s" in flat and "~0.0081 requests/s" in flat and "needs 0.0014 MB/s" in flat
    assert "0.0 MB/s" not in flat
    assert (
        "one epoch packs into ~49 rows; a chunk packs 256 documents together, more than the corpus's 79: "
        "each spans 3.2 epochs" in flat
    )
    assert "629.7" not in flat
    assert "0.31 CPU ms per 1,000 tokens here (median of 5 rounds, 0.28-0.76)" in flat


def test_the_json_report_holds_the_epoch_rows_and_the_tokenizer_spread() -> None:
    from support.report_schema import validate

    obj = small_text_report("/d", "https://x").to_json()
    validate(obj)
    t = obj["text"]
    assert (t["epoch_rows"], t["tokenize_rounds"]) == (49, 5)
    assert t["tokenize_ms_per_1k_tokens_range"] == pytest.approx([0.278, 0.763])


# ---- slow: the default dataset, gs://, a model, the simulation ----


@pytest.mark.slow
@pytest.mark.timeout(900)  # ~1 min on a quiet machine; minutes under a neighbour's load
def test_the_default_runs_offline_and_speaks_in_tokens(tmp_path) -> None:
    """No --data: Python's own docstrings, tokenized by a BPE trained at the first run, cached;
    no network (every proxy points at a closed port). The data is made for real; the bench's
    windows are given (a text pipeline is timed for real by the padded test)."""
    closed = "http://127.0.0.1:9"
    offline = {f"{name}_proxy": closed for name in ("http", "https")}
    offline |= {name.upper(): url for name, url in offline.items()}
    env = dict(XDG_CACHE_HOME=str(tmp_path / "cache"), COLUMNS="250", HF_HUB_OFFLINE="1", **offline)
    flags = [
        "--batch-size",
        "8",
        "--seconds",
        "0.3",
        "--warmup",
        "0.1",
        "--max-cores",
        "1",
        "--cache",
        "none",
    ]
    run = run_cli_handed(
        "bench", "--pipeline=text", "--sequence-length", "128", *flags, env={EXAMPLES_ENV: "240", **env}
    )
    assert run.returncode == 0, run.stderr
    for needle in (
        "INPUT-BOUND",
        "sequences/s = ",
        "real tokens/s",
        "slot tokens/s",
        "Your accelerator spends",
        "built in: this Python's docstrings",
        "on Cloud TPU v4-8 (4 chips, 1 host)",
    ):
        assert needle in run.stdout, needle
    (made,) = os.listdir(tmp_path / "cache" / "tfpipe" / "datasets")
    assert made.startswith("text-240-")


@pytest.mark.slow
@pytest.mark.gcs
@pytest.mark.timeout(900)  # ~1 min on a quiet machine; minutes under a neighbour's load
def test_a_gcs_text_dataset_is_read_with_the_storage_figures(corpus, gcs_bucket, tmp_path, capsys) -> None:
    # The module's corpus again, to gs:// with the tokenizer its local conversion trained.
    source = os.path.join(os.path.dirname(corpus), "corpus")
    dest = f"{gcs_bucket}/text"
    tokenizer = os.path.join(corpus, "tokenizer.json")
    assert main(["convert", source, dest, "--tokenizer", tokenizer, "--num-shards", "2", "--quiet"]) == 0
    rc, obj, out = bench(["--data", dest, "--sequence-length", "128", "--batch-size", "16"], tmp_path, capsys)
    assert rc == 0
    s = obj["storage"]
    assert s["location"] == "gcs" and s["mb_per_sec"] > 0 and s["requests_per_sec"] > 0
    # The read is counted in the sequences its records pack into, as every prefix is.
    assert s["examples_per_sec"] == pytest.approx(obj["stages"][0]["examples_per_sec"], rel=1.0)
    assert "gs://, read without a cache" in out and "sequences/s" in out
    assert obj["text"]["fill"]["agrees"] is True


@pytest.mark.slow
def test_a_small_transformer_timed_here_is_the_consumer(corpus, tmp_path, capsys) -> None:
    # The padded test's pipeline: the model is the consumer whatever the rows hold, and the
    # producer's measurement is that test's (support.bench_once), not a second one.
    model = ["--model", "small_transformer", "--packing", "none"]
    rc, obj, _ = bench(
        ["--data", corpus, *model, "--sequence-length", "128", "--batch-size", "64"], tmp_path, capsys
    )
    assert rc == 0
    assert obj["consumer"]["source"] == "model" and obj["consumer"]["device"]
    assert "small_transformer train step" in obj["consumer"]["description"]
    # The model's step, in sequences of 128: the consumer's slot tokens are its sequences x L.
    t = obj["text"]
    assert t["consumer"]["slot_tokens_per_sec"] == pytest.approx(
        obj["consumer"]["examples_per_sec"] * 128, rel=1e-5
    )

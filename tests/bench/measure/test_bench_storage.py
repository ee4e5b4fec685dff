"""The storage stage of `tfpipe bench`: what reading without a cache gives (examples/s, MB/s,
requests/s), the first epoch of a caching pipeline, and the storage-bound verdict."""

from __future__ import annotations

import contextlib
import json

import pytest

import tfpipe
from tfpipe.bench import fmt
from tfpipe.bench.judge import verdict as v
from tfpipe.bench.judge.conclusion import conclude
from tfpipe.bench.measure import reading
from tfpipe.bench.results import Consumer, DatasetInfo, Rate, ScalingPoint, StageRate
from tfpipe.cli import main
from tfpipe.testing import fake_data

from support.bench_once import handing

MIB = 1 << 20


def rate(eps: float, cpu_ms: float = 1.0) -> Rate:
    return Rate(eps, eps, int(eps), 1.0, 0.1, 0.5, cpu_ms, 1.0)


def test_requests_follow_tensorflows_64_mib_blocks():
    # A 130 MiB shard takes three ranged GETs, a 30 MiB one a single GET; a tfpipe dataset's
    # manifest is read once a shard is open, and again at the end of one read in several GETs.
    assert reading.requests_per_file([130 * MIB, 30 * MIB], 64 * MIB, manifest=False) == 2.0
    assert reading.requests_per_file([130 * MIB, 30 * MIB], 64 * MIB) == (3 + 2 + 1 + 1) / 2
    assert reading.requests_per_file([1], 64 * MIB) == 2.0
    assert reading.requests_per_file([], 64 * MIB) == 0.0


def test_figures_turn_records_per_second_into_mb_and_requests():
    # 4 files of 50 MB holding 1,000 records each: 50 KB a record.
    s = reading.figures(
        location="gcs",
        cache="none",
        read=rate(2000.0, cpu_ms=0.02),
        sizes=[50_000_000] * 4,
        examples=4000,
        consumer_eps=3000.0,
        block=64 * MIB,
    )
    assert s.bytes_per_example == 50_000.0
    assert s.mb_per_sec == pytest.approx(100.0)  # 2,000 records/s x 50 KB
    assert s.needed_mb_per_sec == pytest.approx(150.0)
    assert s.requests_per_sec == pytest.approx(4.0)  # two files a second: a GET and a manifest read each
    assert not s.cached and s.first_epoch_examples_per_sec is None
    local = reading.figures(
        location="local", cache="memory", read=rate(2000.0), sizes=[10], examples=None, consumer_eps=1.0
    )
    assert local.requests_per_sec is None and local.mb_per_sec is None and local.cached


STAGES = (
    StageRate("read", ("list_files", "interleave"), 3, rate(400.0)),
    StageRate("decode", ("decode",), 5, rate(380.0)),
    StageRate("final", ("prefetch",), 7, rate(370.0)),
)


def report_with(storage, consumer_eps=1000.0):
    return conclude(
        pipeline="imagenet",
        dataset=DatasetInfo("gs://b/imagenet", 4000, 4, 200_000_000, False),
        batch_size=128,
        hosts=1,
        producer=STAGES[-1].rate,
        consumer=Consumer(consumer_eps, 128 / consumer_eps * 1000, "step_time", "given"),
        stages=STAGES,
        scaling=(ScalingPoint(1, 200.0, 2.0, 1.0), ScalingPoint(2, 370.0, 2.0, 1.9)),
        storage=storage,
    )


def test_reading_that_cannot_feed_the_consumer_is_storage_bound_and_named():
    s = reading.figures(
        location="gcs",
        cache="none",
        read=rate(400.0),
        sizes=[50_000_000] * 4,
        examples=4000,
        consumer_eps=1000.0,
    )
    report = report_with(s)
    assert report.bottleneck.stage == "read"
    first = report.recommendations[0]
    assert first.kind == "storage_bound"
    assert first.finding == (
        "Storage-bound: reading from gs:// gives 20.0 MB/s (400 examples/s, ~0.8 requests/s), "
        "the consumer needs 50.0 MB/s (1,000 examples/s). No CPU added to the later stages helps."
    )
    assert "cycle_length" in first.action and "region" in first.action and 'cache="memory"' in first.action
    assert not any(r.kind == "read_bound" for r in report.recommendations)
    obj = report.to_json()
    assert obj["schema_version"] == 5 and obj["bottleneck"]["stage"] == "read"
    assert obj["storage"]["mb_per_sec"] == 20.0 and obj["storage"]["requests_per_sec"] == pytest.approx(0.8)
    assert obj["storage"]["location"] == "gcs" and obj["storage"]["cached"] is False


def test_a_cache_hides_the_storage_after_the_first_epoch():
    s = reading.figures(
        location="gcs",
        cache="memory",
        read=rate(400.0),
        sizes=[50_000_000] * 4,
        examples=4000,
        consumer_eps=300.0,
        first_epoch=rate(250.0),
    )
    report = report_with(s, consumer_eps=300.0)
    assert not v.storage_bound(s, 300.0)
    assert report.verdict == "not_input_bound"  # the steady state reads the cache at 370/s
    kinds = [r.kind for r in report.recommendations]
    assert kinds[0] == "first_epoch_input_bound" and "storage_bound" not in kinds
    assert "250 examples/s against the consumer's 300/s, a predicted wait of 17%" in (
        report.recommendations[0].finding
    )
    assert report.to_json()["storage"]["first_epoch_predicted_input_wait"] == pytest.approx(1 / 6, abs=1e-6)


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    root = tmp_path_factory.mktemp("storage")
    fake_data.write_image_folder(
        root / "src", classes=2, per_class=[19, 18], size=(48, 40), seed=3, workers=1
    )
    tfpipe.convert(str(root / "src"), str(root / "data"), num_shards=4, workers=1)
    return root


FAST = ["--seconds", "0.2", "--warmup", "0.1", "--max-cores", "1", "--quiet", "--step-time-ms", "50"]


# Each runs with bench's windows given (the fast lane: which reads bench makes is its own logic),
# and the caching pipeline's also timed for real (slow: every prefix, then the read prefix and the
# whole pipeline uncached). An uncached pipeline's real timing is every other bench's.
@pytest.mark.parametrize(
    ("cache", "producer"),
    [pytest.param("auto", "measured", marks=pytest.mark.slow), ("auto", "given"), ("none", "given")],
)
def test_bench_measures_the_storage_uncached_and_the_first_epoch_when_it_caches(
    images, capsys, cache, producer
):
    out = images / f"report-{cache}-{producer}.json"
    with handing() if producer == "given" else contextlib.nullcontext():
        code = main(
            [
                "bench",
                "--data",
                str(images / "data"),
                "--batch-size",
                "8",
                "--cache",
                cache,
                "--json",
                str(out),
                *FAST,
            ]
        )
    assert code == 0
    obj = json.loads(out.read_text())
    st = obj["storage"]
    manifest = tfpipe.Manifest.load(str(images / "data"))
    split = manifest.split("train")
    assert st["location"] == "local" and st["requests_per_sec"] is None
    assert st["bytes_per_example"] == pytest.approx(split.bytes / split.examples)
    assert st["mb_per_sec"] == pytest.approx(st["examples_per_sec"] * st["bytes_per_example"] / 1e6, rel=1e-4)
    if cache == "auto":  # 37 small images fit in memory: the steady state reads the cache
        assert st["cache"] == "memory" and st["cached"] is True
        assert st["first_epoch_examples_per_sec"] > 0
    else:
        assert st["cache"] == "none" and st["first_epoch_examples_per_sec"] is None
        assert st["examples_per_sec"] == obj["stages"][0]["examples_per_sec"]  # the read prefix itself
    text = capsys.readouterr().out
    assert "Storage" in text and "MB/s" in text
    assert ("First epoch" in text) == (cache == "auto")


def test_bench_refuses_a_cache_that_is_no_cache_setting(capsys):
    assert main(["bench", "--cache", "ssd", *FAST]) == 1
    assert "cache must be one of ('auto', 'memory', 'none', 'disk:<path>'). Received: cache='ssd'" in (
        capsys.readouterr().err
    )


@pytest.mark.gcs
def test_the_request_estimate_is_what_tensorflow_asks_the_twin_for(images, local_gcs, gcs_bucket):
    # One uncached epoch of the read stage, counted at the twin: one GET per 64 MiB block of each
    # shard (these are far below one block) and one generation check, a listing of the split's
    # commit marker (tfpipe/format/commit_markers.py), as the estimate assumes.
    from tfpipe import storage
    from tfpipe.bench.measure import producer
    from tfpipe.format import commit_markers

    dest = gcs_bucket + "/data"
    tfpipe.convert(str(images / "src"), dest, num_shards=4, workers=1)
    pipe = tfpipe.pipeline.plan(dest, batch_size=8, cache="none", training=False)
    read_upto = producer.prefix_points(pipe.stages)[0][1]
    shard_names = {storage.basename(f) for f in pipe.files}
    with local_gcs.recording() as log:
        records = sum(1 for _ in pipe.dataset(read_upto))
    checks = [r for r in log if f"prefix=data%2F{commit_markers.COMMITS_DIR}%2F" in r.path]
    names = [r.path.split("?")[0].rsplit("%2F", 1)[-1] for r in log if r not in checks]
    sizes = [storage.size(f) for f in pipe.files]
    assert records == 37
    assert sorted(names) == sorted(shard_names) and len(checks) == 4  # nothing else: no stat, no probe
    assert len(log) == reading.requests_per_file(sizes, storage.gcs_block_bytes()) * len(sizes) == 8


@pytest.mark.gcs
def test_a_twin_limited_to_5_mb_per_second_is_storage_bound_and_named(local_gcs, gcs_bucket, tmp_path):
    # Every stream of the twin at 5 MB/s, no cache: 301 small images in 2 shards cannot be read
    # as fast as a 1 ms step of 8 takes them. (Enough records a shard that a prefix's 256-record
    # transport batch is not several epochs of the twin's time per request.)
    fake_data.write_image_folder(tmp_path / "src", classes=2, per_class=[151, 150], size=(48, 40), workers=1)
    dest = gcs_bucket + "/slow"
    tfpipe.convert(str(tmp_path / "src"), dest, num_shards=2, workers=1)
    out = tmp_path / "slow.json"
    with local_gcs.shaped(mbps_per_stream=5):
        # No warm-up: an element of an unbatched prefix (a 256-record transport batch) takes the
        # twin most of a second, so even one warm-up element would double the run.
        args = ["--data", dest, "--batch-size", "8", "--cache", "none", "--json", str(out), "--quiet"]
        code = main(
            ["bench", *args, "--seconds", "0.1", "--warmup", "0", "--max-cores", "1", "--step-time-ms", "1"]
        )
    assert code == 0
    obj = json.loads(out.read_text())
    st = obj["storage"]
    assert obj["bottleneck"]["stage"] == "read"
    assert obj["recommendations"][0]["kind"] == "storage_bound"
    assert obj["recommendations"][0]["finding"].startswith(
        f"Storage-bound: reading from gs:// gives {fmt.figure(st['mb_per_sec'])} MB/s"
    )
    assert st["location"] == "gcs" and st["cached"] is False
    # At most the 2 shards' streams at 5 MB/s each: what the twin allows.
    assert 0 < st["mb_per_sec"] <= 2 * 5 and st["mb_per_sec"] < st["needed_mb_per_sec"]
    assert st["requests_per_sec"] > 0

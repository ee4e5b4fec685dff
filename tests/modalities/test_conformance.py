"""The suite every registered modality passes, the tests' audio clips (support/audio.py)
included: its own synthetic data (`BenchHalf.synthetic`, a few dozen items) converted by
`tfpipe.convert` with its format found by content, the manifest read back and its modality found
from it, then `plan()` with no preset named (the manifest's modality's): training batches, eval
batches as many as their cardinality says, a run resumed at a step yielding the uninterrupted
run's batches, two hosts each their half of the global batch, and a bench of it (its windows
given: support.bench_once.handing) whose report reads in the modality's words. The conversion
runs in the fast lane; what reads the pipelines (~25 CPU-s for the four) is `slow`.

Nothing here names a modality: what differs between them (text's rows of L tokens) comes from
the modality itself (`BenchHalf.options`, `BenchHalf.plan_options`).
"""

from __future__ import annotations

import numpy as np
import pytest

import tfpipe
from tfpipe.bench.config import BenchConfig
from tfpipe.bench.measure.synthetic import SyntheticSpec
from tfpipe.bench.present.render import renderables
from tfpipe.format.manifest import Manifest
from tfpipe.modalities import get_modality, modalities, modality_of_layout

from support.audio import registered
from support.bench_once import handing
from support.report_schema import schema, validate

pytest.importorskip("tokenizers", reason='the text extra: pip install "tfpipe[text]"')

NAMES = [*(m.name for m in modalities()), "audio"]
EXAMPLES, SHARDS, B, K = 24, 3, 4, 2
# A modality's own bench options at a size this data fills (text: rows of 64 tokens).
SMALL = {"sequence_length": 64}


@pytest.fixture(scope="module", autouse=True)
def audio():
    with registered() as modality:
        yield modality


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """name -> (its modality, its dataset's manifest, the options `plan()` gets), made once."""
    made = {}

    def dataset(name):
        if name not in made:
            m = get_modality(name)
            root = tmp_path_factory.mktemp(name)
            synthetic = m.bench.synthetic
            raw = synthetic.generate(SyntheticSpec(m.preset.name, EXAMPLES, SHARDS), str(root / "raw"))
            manifest = tfpipe.convert(
                raw, str(root / "ds"), num_shards=SHARDS, workers=1, **synthetic.convert_options
            )
            shape = {n: SMALL[n] for n in m.bench.options if n in SMALL}
            cfg = BenchConfig(pipeline=m.preset.name, data=manifest.root, batch_size=B, **shape)
            made[name] = m, manifest, m.bench.plan_options(cfg), shape
        return made[name]

    return dataset


def batches(pipe, n=None):
    """The first `n` batches of the pipeline (all with None), each as NumPy arrays."""
    ds = pipe.dataset() if n is None else pipe.dataset().take(n)
    return [[np.asarray(t) for t in tfpipe_flatten(b)] for b in ds]


def tfpipe_flatten(element):
    import tensorflow as tf

    return tf.nest.flatten(element)


def rows(batch):
    return batch[0].shape[0]


@pytest.mark.parametrize("name", NAMES)
def test_its_source_converts_and_its_manifest_names_it(converted, name):
    m, manifest, _, _ = converted(name)
    assert manifest.layout in m.layouts and modality_of_layout(manifest.layout) is m
    split = Manifest.load(manifest.root).split("train")
    assert (split.examples, len(split.shards)) == (EXAMPLES, SHARDS)
    assert split.options["format"] in m.convert.formats  # found by content: --format auto


@pytest.mark.slow  # plans and reads pipelines of every modality: ~25 CPU-s in all
@pytest.mark.parametrize("name", NAMES)
def test_it_trains_and_evaluates_with_its_own_preset(converted, name):
    m, manifest, options, _ = converted(name)
    train = tfpipe.plan(manifest.root, batch_size=B, seed=7, **options)
    assert train.preset is m.preset  # the manifest's modality's, no preset named
    assert [rows(b) for b in batches(train, 3)] == [B, B, B]
    evaluation = tfpipe.plan(manifest.root, batch_size=B, training=False, **options)
    got = batches(evaluation)
    assert got and all(rows(b) <= B for b in got)
    if evaluation.plan.batches is not None:
        assert len(got) == evaluation.plan.batches


@pytest.mark.slow  # plans and reads pipelines of every modality: ~25 CPU-s in all
@pytest.mark.parametrize("name", NAMES)
def test_a_resumed_run_yields_the_uninterrupted_runs_batches(converted, name):
    _, manifest, options, _ = converted(name)
    whole = batches(tfpipe.plan(manifest.root, batch_size=B, seed=7, **options), K + 2)
    resumed = batches(tfpipe.plan(manifest.root, batch_size=B, seed=7, start_step=K, **options), 2)
    for a, b in zip(whole[K:], resumed, strict=True):
        assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


@pytest.mark.slow  # plans and reads pipelines of every modality: ~25 CPU-s in all
@pytest.mark.parametrize("name", NAMES)
def test_each_host_reads_its_half_of_the_global_batch(converted, name):
    _, manifest, options, _ = converted(name)
    first = [
        batches(tfpipe.plan(manifest.root, batch_size=B, num_hosts=2, host_index=i, seed=7, **options), 1)[0]
        for i in (0, 1)
    ]
    assert [rows(b) for b in first] == [B // 2, B // 2]
    assert not all(np.array_equal(x, y) for x, y in zip(*first, strict=True))


@pytest.mark.slow  # plans and reads pipelines of every modality: ~25 CPU-s in all
@pytest.mark.parametrize("name", NAMES)
def test_bench_measures_it_and_says_it_in_its_words(converted, name, tmp_path):
    m, manifest, _, shape = converted(name)
    with handing():
        report = tfpipe.bench(
            pipeline=m.preset.name,
            data=manifest.root,
            batch_size=B,
            step_time_ms=100.0,
            seconds=0.05,
            warmup_seconds=0.0,
            max_cores=1,
            workdir=str(tmp_path),
            **shape,
        )
    assert (report.pipeline, report.dataset.examples) == (m.preset.name, EXAMPLES)
    assert renderables(report) and report.recommendations
    out = report.to_json()
    assert out["pipeline"] == m.preset.name
    if m.preset.name in schema()["properties"]["pipeline"]["enum"]:  # the built-ins' contract
        validate(out)

"""`tfpipe.monitor.InputWait` in real `model.fit` runs, on both Keras backends that read tf.data:
TensorFlow (a child process with two logical CPU devices, for the MirroredStrategy case) and
JAX (a child with KERAS_BACKEND=jax; skipped without JAX). tests/support/fit_runs.py runs the
fits and takes the ground truth on the device's side (see its doc): each fit's first epoch
holds every batch back so that about 40% of each step waits, its second feeds the model far
faster than it trains.

Checked: the held-back epoch reads as the device's measured wait within 3 points, the fast
one under 3%; for one step a call and for four (`steps_per_execution=4`), and under a strategy
that prefetches to its devices; the figures reach History and TensorBoard.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest

import support.fit_runs as fit_runs
from support.backend_checks import jax_env

pytestmark = [pytest.mark.slow, pytest.mark.jax]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
CASES = {"tensorflow": ["window", "spe4", "mirrored"], "jax": ["window", "spe4"]}


def _child(backend: str, log_dir: str) -> dict:
    env = jax_env(devices=1) if backend == "jax" else dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env["PYTHONPATH"] = os.pathsep.join([REPO, env.get("PYTHONPATH", "")])
    if backend == "tensorflow":
        env["KERAS_BACKEND"] = "tensorflow"
    script = fit_runs.__file__
    proc = subprocess.run(
        [sys.executable, script, ",".join(CASES[backend]), log_dir],
        capture_output=True,
        text=True,
        timeout=280,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def runs(request, tmp_path_factory) -> dict:
    """{backend: {case: what the child reported}}; JAX's only where JAX is installed."""
    pytest.importorskip("tensorflow")
    out = {"tensorflow": (_child("tensorflow", str(tmp_path_factory.mktemp("tb-tf"))), "tb-tf")}
    try:
        import jax  # noqa: F401
    except ImportError:
        return out
    out["jax"] = (_child("jax", str(tmp_path_factory.mktemp("tb-jax"))), "tb-jax")
    return out


@pytest.fixture(params=[(b, c) for b, cases in CASES.items() for c in cases], ids=lambda p: f"{p[0]}-{p[1]}")
def case(request, runs) -> dict:
    backend, name = request.param
    if backend not in runs:
        pytest.skip('the JAX backend needs JAX: pip install "jax[cpu]"')
    got = runs[backend][0][name]
    assert "error" not in got, got
    assert got["backend"] == backend
    return got


def test_held_back_batches_read_as_the_wait_the_device_saw(case):
    truth, measured = case["truth"][0], case["epochs"][0]["input_wait"]
    assert abs(truth - 0.40) <= 0.05, case  # the setup held back ~40% of each step
    assert abs(measured - truth) <= 0.03, case


def test_a_pipeline_far_faster_than_the_model_reads_under_3_percent(case):
    assert case["epochs"][1]["input_wait"] < 0.03, case


def test_the_method_follows_where_the_step_takes_its_batch(runs):
    tf_runs = runs["tensorflow"][0]
    assert {name: got["method"] for name, got in tf_runs.items()} == {
        "window": "window",
        "spe4": "window",
        "mirrored": "buffered",
    }


def test_each_epochs_figure_reaches_history(case):
    history, epochs = case["history"], case["epochs"]
    assert history["input_wait"] == pytest.approx([e["input_wait"] for e in epochs])
    measured = [e for e in epochs if e["low"] is not None]
    assert measured, epochs
    for e in measured:
        assert e["low"] <= e["input_wait"] <= e["high"]


def test_each_epochs_figure_reaches_tensorboard(runs, tmp_path_factory):
    tf = pytest.importorskip("tensorflow")
    from tensorflow.core.util import event_pb2

    for backend, (got, folder) in runs.items():
        root = glob.glob(str(tmp_path_factory.getbasetemp() / f"{folder}*"))[0]
        files = glob.glob(os.path.join(root, "window", "train", "events.out.tfevents.*"))
        assert files, (backend, root)
        scalars: dict[str, list] = {}
        for record in tf.data.TFRecordDataset(files):
            event = event_pb2.Event.FromString(record.numpy())
            for v in event.summary.value:
                assert v.metadata.plugin_data.plugin_name == "scalars"
                scalars.setdefault(v.tag, []).append((event.step, float(tf.make_ndarray(v.tensor))))
        want = [e["input_wait"] for e in got["window"]["epochs"]]
        assert [s for _, s in sorted(scalars["epoch_input_wait"])] == pytest.approx(want, abs=1e-6)
        assert {"epoch_input_wait_low", "epoch_input_wait_high"} <= set(scalars)


def _tiny_fit(monitor, ds, **fit) -> object:
    import keras

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    return model.fit(ds, verbose=0, shuffle=False, callbacks=[monitor], **fit)


def test_a_dataset_fit_reads_unwatched_is_refused_by_name():
    tf = pytest.importorskip("tensorflow")
    import keras

    import tfpipe

    if keras.backend.backend() != "tensorflow":
        pytest.skip("this process's Keras runs on another backend")
    x = tf.zeros([8, 4])
    ds = tf.data.Dataset.from_tensors((x, x[:, :1])).repeat()
    monitor = tfpipe.monitor.InputWait(warmup_steps=2)
    monitor.watch(ds)  # watched, but fit is given the dataset itself
    with pytest.raises(tfpipe.ConfigError, match=r"model.fit\(monitor.watch\(ds\), callbacks=\[monitor\]\)"):
        _tiny_fit(monitor, ds, steps_per_epoch=6)


def test_the_result_after_fit_and_its_line(capsys):
    tf = pytest.importorskip("tensorflow")
    import keras

    import tfpipe

    if keras.backend.backend() != "tensorflow":
        pytest.skip("this process's Keras runs on another backend")
    x = tf.zeros([8, 4])
    monitor = tfpipe.monitor.InputWait(warmup_steps=2)
    ds = monitor.watch(tf.data.Dataset.from_tensors((x, x[:, :1])).repeat())
    _tiny_fit(monitor, ds, steps_per_epoch=12, epochs=2)
    got = monitor.result
    assert (got.backend, got.method, got.lost_rows) == ("tensorflow", "window", 0)
    assert got.host.steps == 22 and got.hosts == (got.host,) and got.job == got.host
    assert [e.steps for e in got.epochs] == [10, 12]
    assert 0 <= got.host.input_wait <= 1
    assert capsys.readouterr().out.startswith("tfpipe.monitor: input wait ")

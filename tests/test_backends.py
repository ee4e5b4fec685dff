"""tfpipe's batches and helpers on both Keras backends that take tf.data: TensorFlow (this
process) and JAX (a child process started with KERAS_BACKEND=jax, since the backend is chosen
when Keras is first imported). The same checks (tests/support/backend_checks.py) run on each:

- `tfpipe.attention_mask` inside a model (on a KerasTensor) and on arrays, as the NumPy mask;
- padded image eval and text eval: `evaluate` and `predict` without a warning, their length
  known, weighted metrics counting every example (every target token) exactly once;
- `bench --model`: the device and the step of the backend in use (JAX: data-parallel over its
  two CPU devices), and the report's environment;
- an `input_context` of per-replica batches, refused on JAX (each host's batch is its share).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import support.backend_checks as checks
from support.pipeline_data import N_IMAGES

pytestmark = [pytest.mark.slow, pytest.mark.jax]
# ceil(701 documents packed into rows of 128 / 8 rows a batch): the text_ds fixture's rows.
TEXT_BATCHES = 45


@pytest.fixture(scope="module")
def results(request, image_ds, text_ds) -> dict:
    """{backend: what the checks returned}: the JAX child's, and this process's own."""
    pytest.importorskip("tensorflow")
    import keras

    out = {}
    if keras.backend.backend() == "tensorflow":
        out["tensorflow"] = checks.main(image_ds, text_ds)
    out["jax"] = _jax_child(image_ds, text_ds)
    return out


def _jax_child(image_ds: str, text_ds: str) -> dict | None:
    """The checks in a process whose Keras runs on JAX (None when JAX is not installed)."""
    try:
        import jax  # noqa: F401
    except ImportError:
        return None
    # Two CPU devices: bench's model step then runs data-parallel over both, as over a TPU's chips.
    env = checks.jax_env(devices=2)
    proc = subprocess.run(
        [sys.executable, checks.__file__, image_ds, text_ds],
        capture_output=True,
        text=True,
        timeout=280,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(params=["tensorflow", "jax"])
def backend(request, results) -> dict:
    got = results.get(request.param)
    if got is None:
        if request.param == "jax":
            pytest.skip('the JAX backend needs JAX: pip install "jax[cpu]"')
        pytest.skip("this process's Keras runs on another backend (KERAS_BACKEND)")
    assert got["backend"] == request.param
    return got


def test_attention_mask_inside_a_model(backend):
    assert backend["attention_mask"] == {"causal=False": [True, True], "causal=True": [True, True]}


def test_padded_image_eval_counts_every_image_once_without_warnings(backend):
    got = backend["image_eval"]
    assert got["warnings"] == []
    assert got["count"] == N_IMAGES and got["predicted_rows"] == 40  # 5 full batches of 8
    evaluated, from_predictions = got["accuracy"]
    assert evaluated == pytest.approx(from_predictions, abs=1e-6)


def test_text_eval_knows_its_length_and_runs_without_warnings(backend):
    got = backend["text_eval"]
    assert got["warnings"] == []
    assert got["cardinality"] == got["batches"] == TEXT_BATCHES
    assert got["predicted_rows"] == 8 * TEXT_BATCHES
    evaluated, real_tokens = got["count"]
    assert evaluated == real_tokens > 0


def test_bench_times_the_model_on_the_backend_in_use(backend):
    import keras

    got = backend["bench"]
    jax_version = None
    try:
        import jax

        jax_version = jax.__version__
    except ImportError:
        pass
    assert got["environment"] == {
        "keras_backend": backend["backend"],
        "keras": keras.__version__,
        "jax": jax_version,
    }
    kind, name, runs_on = got["device"]
    assert kind == "CPU" and runs_on == backend["backend"]
    assert name == ("2 x cpu (JAX)" if runs_on == "jax" else "CPU")
    assert got["consumer"] == ["model", name, True]


def test_an_input_context_of_per_replica_batches_is_refused_on_jax(backend):
    got = backend["input_context"]
    if backend["backend"] == "tensorflow":
        assert got == {"batch": 2}  # tf.distribute's per-replica batch: 16 over 8 replicas
    else:  # the issue's `num_replicas_in_sync=jax.device_count()`: global 16 silently became 2
        assert "Keras runs on JAX" in got["refused"] and "num_hosts=jax.process_count()" in got["refused"]

"""`tfpipe.strategy()`: which device trains here. This machine has no TPU and no GPU, so the
tests prove the default strategy, that no TPU lookup reaches the GCE metadata server, and that
such a lookup would be seen if one were made."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

import tfpipe
from tfpipe import _tf, devices


@pytest.fixture
def metadata_server():
    """A TCP listener standing in for the GCE metadata server: it records every connection and
    never answers, as the real name does from a machine outside GCE that cannot resolve it."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.1)
    seen: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                seen.append(server.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.getsockname()[1]}", seen
    stop.set()
    thread.join()
    for conn in seen:
        conn.close()
    server.close()


def test_without_a_tpu_it_never_asks_the_metadata_server(metadata_server, monkeypatch, capsys) -> None:
    host, seen = metadata_server
    for name in ("GCE_METADATA_HOST", "GCE_METADATA_IP"):
        monkeypatch.setenv(name, host)
    for name in ("TPU_NAME", "COLAB_TPU_ADDR"):
        monkeypatch.delenv(name, raising=False)
    assert devices.tpu_signs() == []
    tf = _tf.tf()  # imported before the clock starts: only the choice is timed
    started = time.monotonic()
    strategy = tfpipe.strategy()
    assert time.monotonic() - started < 5
    assert strategy is tf.distribute.get_strategy()
    assert seen == []
    err = capsys.readouterr().err
    assert err.startswith("tfpipe.strategy: the default strategy on the CPU: no TPU here (no TPU_NAME, ")
    assert err.rstrip().endswith("and no GPU")
    choice = devices.choose()
    assert (choice.kind, choice.replicas) == ("CPU", 1)
    tfpipe.strategy(verbose=False)
    assert capsys.readouterr().err == ""


@pytest.mark.slow
def test_a_tpu_lookup_would_be_seen(metadata_server) -> None:
    """The control for the test above: TensorFlow's resolver given a TPU name asks the metadata
    server for the project, and the listener sees it."""
    host, seen = metadata_server
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.update(GCE_METADATA_HOST=host, TF_CPP_MIN_LOG_LEVEL="3")
    code = "import tensorflow as tf; tf.distribute.cluster_resolver.TPUClusterResolver(tpu='my-tpu')"
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not seen and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        proc.kill()
        proc.wait()
    assert seen, "the resolver never reached the stand-in metadata server"


def test_signs_of_a_tpu(monkeypatch) -> None:
    monkeypatch.setenv("TPU_NAME", "local")
    monkeypatch.setenv("COLAB_TPU_ADDR", "")
    assert devices.tpu_signs() == ["TPU_NAME=local"]


@pytest.mark.parametrize(
    ("host_batch", "cores", "note"),
    [
        (1024, 8, None),
        (2048, 4, None),
        (800, 8, "100 per core (800 over 8 cores), not a multiple of 128"),
        (1000, 8, "125 per core (1000 over 8 cores)"),
        (100, 8, "12.5 per core on average (100 over 8 cores)"),
        (64, 1, "64 per core (64 over 1 cores)"),
    ],
)
def test_tpu_batch_per_core_multiple_of_128(host_batch, cores, note) -> None:
    said = devices.tpu_batch_note(host_batch, cores)
    if note is None:
        assert said is None
    else:
        assert said is not None and note in said and "matrix units run partly empty" in said
        assert f"at 128 per core ({128 * cores} per host)" in said


def test_strategy_is_public() -> None:
    assert "strategy" in tfpipe.__all__ and "strategy" in dir(tfpipe)
    assert tfpipe.strategy is devices.strategy


@pytest.mark.slow
def test_a_tpu_that_looks_attached_but_cannot_be_reached_is_an_error_not_the_cpu() -> None:
    # TPU_NAME says a TPU is here; this machine has none, so connecting fails. The bench must not
    # time the CPU instead and call it the TPU.
    code = (
        "from tfpipe import devices\n"
        "try:\n"
        "    devices.choose()\n"
        "except devices.TpuUnavailableError as e:\n"
        "    print('refused |', e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=180,
        env=os.environ | {"TPU_NAME": "local", "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(
        "refused | A TPU looks attached (TPU_NAME=local), but TensorFlow could not connect to TPU 'local'."
    )
    assert "Received: " in out.stdout

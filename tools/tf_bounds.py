"""Checks, on the TensorFlow this Python has, the behaviour behind PipelineConfig's MAX_* bounds.

Each case runs in its own process (a crash must not end the check) and reports how it ended
and how long the first element took. Run it once per supported TensorFlow and compare:

    python tools/tf_bounds.py                      # on TF 2.21
    /path/to/tf220-venv/bin/python tools/tf_bounds.py

The bounds (tfpipe/pipeline/config.py) are right for a release when every case at the bound
ends "ok" and the cases past it crash or stall as the comment there says.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import textwrap
import time

from tfpipe.pipeline.config import MAX_READER_BUFFER, MAX_SHUFFLE_BUFFER, MAX_THREADS

PRELUDE = """
import os, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf
path = sys.argv[1]
with tf.io.TFRecordWriter(path) as w:
    for i in range(3):
        w.write(b"record %d" % i)
start = time.perf_counter()
"""

CASES = {
    f"reader_buffer at the bound ({MAX_READER_BUFFER} bytes)": (
        f"ds = tf.data.TFRecordDataset(path, buffer_size={MAX_READER_BUFFER})"
    ),
    "reader_buffer 2**35 bytes": "ds = tf.data.TFRecordDataset(path, buffer_size=2**35)",
    f"shuffle_buffer at the bound ({MAX_SHUFFLE_BUFFER})": (
        f"ds = tf.data.Dataset.range(10**9).shuffle({MAX_SHUFFLE_BUFFER})"
    ),
    "shuffle_buffer 2**31": "ds = tf.data.Dataset.range(10**10).shuffle(2**31)",
    f"private threads at the bound ({MAX_THREADS})": (
        "opts = tf.data.Options()\n"
        f"opts.threading.private_threadpool_size = {MAX_THREADS}\n"
        "ds = tf.data.TFRecordDataset(path).with_options(opts)"
    ),
    "private threads 4096": (
        "opts = tf.data.Options()\n"
        "opts.threading.private_threadpool_size = 4096\n"
        "ds = tf.data.TFRecordDataset(path).with_options(opts)"
    ),
}


def run_case(body: str, timeout: float) -> tuple[str, float]:
    code = PRELUDE + textwrap.dedent(body) + "\nnext(iter(ds))\nprint(time.perf_counter() - start)\n"
    with tempfile.NamedTemporaryFile(suffix=".tfrecord") as f:
        start = time.perf_counter()
        try:
            out = subprocess.run(
                [sys.executable, "-c", code, f.name], capture_output=True, text=True, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            return f"stalled (no element in {timeout:g} s)", time.perf_counter() - start
    if out.returncode == 0:
        return "ok", float(out.stdout.strip().splitlines()[-1])
    if out.returncode < 0:
        return f"crashed ({signal.Signals(-out.returncode).name})", time.perf_counter() - start
    last = (out.stderr.strip().splitlines() or ["?"])[-1]
    return f"raised: {last[:100]}", time.perf_counter() - start


def main() -> None:
    import tensorflow as tf

    print(f"TensorFlow {tf.__version__}")
    for name, body in CASES.items():
        outcome, seconds = run_case(body, timeout=120)
        print(f"- {name}: {outcome}, {seconds:.1f} s to the first element")


if __name__ == "__main__":
    main()

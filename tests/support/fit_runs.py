"""Real `model.fit` runs with `tfpipe.monitor.InputWait`, on whichever Keras backend this process
has (tests/monitor/test_monitor_fit.py starts one process per backend). Prints one JSON line:
per case, what the monitor reported for each epoch and the ground truth.

    python tests/support/fit_runs.py CASES LOG_DIR      # CASES: comma-separated names of CASES below

The model's step holds the device for STEP_S seconds without using the CPU (the `Hold` layer
sleeps inside the step, as an accelerator computes while the host's cores stay free), so that a
loaded host moves neither the step nor the pipeline's pace much. Each case is one fit of two
epochs on one pipeline: in the first every batch is held back by the producer (tf.data's own
sleep stage, before the prefetch: one batch per PRODUCER_S, so that 40% of each step waits),
in the second the producer is far faster than the model (one batch repeated from memory).

The ground truth is taken on the device's side: `Hold` takes the time when each step's hold
begins and ends, and the device is idle between holds. That idle time also holds each step's
own rest (Keras's Python between calls, dispatching the step, the dense layers): the fast
epoch measures that rest per step, so the first epoch's wait for input is its idle time less
the rest, per step, over its step time (the first WARMUP steps of the fit are left out, as the
monitor leaves them out).

Cases:
- "window": the step's own thread takes its batch (TensorFlow without a strategy; JAX);
- "spe4": the same with 4 steps per call (`steps_per_execution=4`);
- "mirrored": TensorFlow under a MirroredStrategy over two CPU devices, whose input thread
  prefetches batches to the devices (each step holds both devices, one after the other).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time

import numpy as np

STEP_S = 0.15
# A step takes its hold and a rest of about REST_S (measured here: 2-4 ms); a producer 1/0.6
# times slower than that makes 40% of each step wait.
REST_S = 0.003
PRODUCER_S = (STEP_S + REST_S) / 0.6
STEPS, BATCH, WARMUP = 24, 16, 5


def _hold(keras, holds: list) -> object:
    """A layer that holds the step STEP_S seconds, taking the time its hold begins and ends."""

    def sleep(v):
        t0 = time.time()
        time.sleep(STEP_S)
        holds.append((t0, time.time()))
        return v

    class Hold(keras.layers.Layer):
        def call(self, t):
            if keras.backend.backend() == "jax":
                import jax

                spec = jax.ShapeDtypeStruct(t.shape, t.dtype)
                out = jax.pure_callback(sleep, spec, jax.lax.stop_gradient(t))
                return t + jax.lax.stop_gradient(out - t)
            import tensorflow as tf

            out = tf.py_function(sleep, [t], t.dtype)
            out.set_shape(t.shape)
            return out

    return Hold()


def make_model(keras, holds: list, steps_per_execution: int = 1) -> object:
    inputs = keras.Input((8,))
    x = _hold(keras, holds)(keras.layers.Dense(8)(inputs))
    model = keras.Model(inputs, keras.layers.Dense(1)(x))
    model.compile("sgd", "mse", steps_per_execution=steps_per_execution)
    return model


def dataset(tf, held_steps: int, producer_s: float) -> object:
    """`held_steps` batches held back `producer_s` each by the producer, then batches far faster
    than the model."""
    # tf.data's sleep stage (the one tf.data's own tests use): it sleeps in C++, taking no GIL.
    from tensorflow.python.data.experimental.ops import testing

    x = np.random.default_rng(0).random((BATCH, 8), np.float32)
    one = tf.data.Dataset.from_tensors((x, x[:, :1]))
    # take() after the sleep: the held part ends without a last sleep for its end of data.
    held = one.repeat().apply(testing.sleep(int(producer_s * 1e6))).take(held_steps)
    return held.concatenate(one.repeat()).prefetch(2)


def truth(holds: list, epochs: list[float], warmup: int) -> list[float]:
    """Per epoch, the device's idle share less the fast epoch's rest (see the module doc)."""
    t = np.array(sorted(holds))
    # Holds that overlap or touch (two devices) are one busy stretch.
    busy = [list(t[0])]
    for a, b in t[1:]:
        if a <= busy[-1][1] + 1e-4:
            busy[-1][1] = max(busy[-1][1], b)
        else:
            busy.append([a, b])
    busy_arr = np.array(busy)
    out = []
    for e, start in enumerate(epochs):
        stop = epochs[e + 1] if e + 1 < len(epochs) else np.inf
        ends = busy_arr[(busy_arr[:, 1] > start) & (busy_arr[:, 1] < stop), 1]
        starts = busy_arr[(busy_arr[:, 1] > start) & (busy_arr[:, 1] < stop), 0]
        skip = warmup if e == 0 else 1
        idle = starts[skip + 1 :] - ends[skip:-1]
        period = ends[skip + 1 :] - ends[skip:-1]
        out.append((float(idle.mean()), float(period.mean())))
    rest = out[-1][0]
    return [max(0.0, idle - rest) / period for idle, period in out]


def run(case: str, log_dir: str) -> dict:
    import keras
    import tensorflow as tf

    import tfpipe

    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]) if case == "mirrored" else None
    holds: list = []
    spe = 4 if case == "spe4" else 1
    with strategy.scope() if strategy else contextlib.nullcontext():
        model = make_model(keras, holds, spe)
    model.fit(dataset(tf, 0, 0.0), steps_per_epoch=2 * spe, verbose=0)  # compiles
    holds.clear()
    monitor = tfpipe.monitor.InputWait(log_dir=os.path.join(log_dir, case), warmup_steps=WARMUP, verbose=0)
    starts: list[float] = []
    mark = keras.callbacks.LambdaCallback(on_epoch_begin=lambda epoch, logs: starts.append(time.time()))
    devices = 2 if case == "mirrored" else 1  # each step holds both devices, one after the other
    steps = STEPS - STEPS % spe
    history = model.fit(
        monitor.watch(dataset(tf, steps, devices * PRODUCER_S)),
        epochs=2,
        steps_per_epoch=steps,
        verbose=0,
        callbacks=[mark, monitor],
    )
    got = monitor.result
    return {
        "backend": keras.backend.backend(),
        "method": got.method,
        "epochs": [
            {"input_wait": f.input_wait, "low": f.low, "high": f.high, "steps": f.steps} for f in got.epochs
        ],
        "truth": truth(holds, starts, WARMUP),
        "history": {
            k: [float(v) for v in vs] for k, vs in history.history.items() if k.startswith("input_wait")
        },
        "hosts": len(got.hosts),
    }


def main(cases: list[str], log_dir: str) -> dict:
    import tensorflow as tf

    # Two CPU devices for the MirroredStrategy case (before TensorFlow starts).
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    out = {}
    for case in cases:
        try:
            out[case] = run(case, log_dir)
        except Exception as e:  # each case reports on its own; the test asserts on each
            out[case] = {"error": f"{type(e).__name__}: {e}"}
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1].split(","), sys.argv[2])))

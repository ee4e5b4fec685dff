"""One host of a two-process JAX job (tests/monitor/test_monitor_hosts.py starts two) training
with `tfpipe.monitor.InputWait`: Keras 3 on JAX, `keras.distribution.DataParallel` over both
processes' devices, each host feeding its share of the global batch. Host 1's producer holds
every batch back HOLD_S; host 0's is far faster than the model. Prints one JSON line of what
this host's monitor reported.

    python tests/support/jax_monitor_host.py PROCESS_ID PORT
"""

from __future__ import annotations

import json
import sys

GLOBAL_BATCH, STEPS, HOLD_S = 16, 30, 0.05


def main(process_id: int, port: int) -> dict:
    import jax

    jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=process_id)
    import keras
    import numpy as np
    import tensorflow as tf
    from tensorflow.python.data.experimental.ops import testing

    import tfpipe

    keras.distribution.set_distribution(keras.distribution.DataParallel(auto_shard_dataset=False))
    batch = GLOBAL_BATCH // jax.process_count()
    x = np.random.default_rng(process_id).random((batch, 8), np.float32)
    ds = tf.data.Dataset.from_tensors((x, x[:, :1])).repeat()
    if process_id == 1:  # tf.data's own sleep stage, before the prefetch: one batch per HOLD_S
        ds = ds.apply(testing.sleep(int(HOLD_S * 1e6)))
    ds = ds.prefetch(2)

    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)]
    )
    model.compile("sgd", "mse")
    monitor = tfpipe.monitor.InputWait(warmup_steps=5, verbose=0)
    model.fit(monitor.watch(ds), epochs=1, steps_per_epoch=STEPS, verbose=0, callbacks=[monitor])
    got = monitor.result

    def fig(f) -> dict:
        return {"input_wait": f.input_wait, "steps": f.steps, "step_ms": f.step_ms}

    return {
        "process": jax.process_index(),
        "host": fig(got.host),
        "hosts": [fig(f) for f in got.hosts],
        "job": fig(got.job),
    }


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]), int(sys.argv[2]))))

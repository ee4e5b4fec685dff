"""One host of a two-process JAX job (tests/pipeline/test_jax_hosts.py starts two): Keras 3 on
JAX with `keras.distribution.DataParallel`, fed by `tfpipe.build(..., hosts=tfpipe.Hosts.from_jax())`,
exactly as docs/guides/jax.md's recipe. Prints one JSON line of what this host saw.

    python tests/support/jax_host.py PROCESS_ID PORT TABLE_DS WORKDIR

Each process has 2 CPU devices (XLA_FLAGS=--xla_force_host_platform_device_count=2, set by the
test), so the job runs on 4 devices over 2 hosts.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import warnings

GLOBAL_BATCH, EVAL_BATCH, STEPS, EPOCHS, SAVE_FREQ, KILL_AT = 8, 4, 5, 2, 3, 7
FEATURES = {"features": ["float32_0", "float32_1"], "mask_suffix": "_missing"}
ID = {"features": ["row_id", "float32_0", "float32_1"]}
ORDER = {"seed": 5, "cycle_length": 2, "shuffle_buffer": 13, "cache": "none"}


def main(process_id: int, port: int, table: str, workdir: str) -> dict:
    import jax

    jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=process_id)
    import keras

    import tfpipe

    out = {"processes": jax.process_count(), "devices": jax.device_count(), "local": jax.local_device_count()}
    hosts = tfpipe.Hosts.from_jax()  # num_hosts=jax.process_count(), host_index=jax.process_index()
    out["refused"] = refusals(keras, tfpipe, table, hosts)
    out["eval_auto_shard"] = evaluate_global(keras, tfpipe, table)

    # The recipe: tfpipe gives each host its files and its share of the global batch, so Keras
    # must not shard again.
    keras.distribution.set_distribution(keras.distribution.DataParallel(auto_shard_dataset=False))
    train = tfpipe.plan(table, batch_size=GLOBAL_BATCH, hosts=hosts, **FEATURES, **ORDER)
    out["files"] = [os.path.basename(f) for f in train.files]
    out["host_batch"] = train.batch_size
    # The same order with the row ids beside (the order does not depend on the features read).
    seen = tfpipe.build(table, batch_size=GLOBAL_BATCH, hosts=hosts, **(FEATURES | ID), **ORDER)
    out["steps"] = [x["row_id"].numpy().tolist() for x, _ in seen.take(EPOCHS * STEPS)]

    model = make_model(keras, train.dataset().element_spec[0])
    history = model.fit(train.dataset(), epochs=EPOCHS, steps_per_epoch=STEPS, verbose=0)
    out["examples_per_epoch"] = [float(v) for v in history.history["count"]]
    out["weights"] = weights(keras, model)

    ev = tfpipe.build(table, batch_size=EVAL_BATCH, training=False, hosts=hosts, **FEATURES)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scores = model.evaluate(ev, verbose=0, return_dict=True)
    out["eval"] = {
        "count": float(scores["count"]),
        "accuracy": float(scores["accuracy"]),
        "batches": int(ev.cardinality()),
        "warnings": [str(w.message) for w in caught],
    }
    out["resumed_weights"] = resume(keras, tfpipe, table, hosts, workdir)
    return out


def refusals(keras, tfpipe, table: str, hosts) -> list[str]:
    """The two ways a host's data and Keras's sharding disagree, each refused by name."""
    refused = []
    keras.distribution.set_distribution(keras.distribution.DataParallel())  # auto_shard_dataset=True
    try:
        tfpipe.build(table, batch_size=GLOBAL_BATCH, hosts=hosts, **FEATURES)
    except tfpipe.ConfigError as e:
        refused.append(str(e))
    keras.distribution.set_distribution(keras.distribution.DataParallel(auto_shard_dataset=False))
    try:
        tfpipe.build(table, batch_size=GLOBAL_BATCH, **FEATURES)
    except tfpipe.ConfigError as e:
        refused.append(str(e))
    return refused


def evaluate_global(keras, tfpipe, table: str) -> dict:
    """Keras's default sharding (auto_shard_dataset=True) of the global eval dataset, every host
    reading every file: with pad_remainder its batch size is static, so Keras can cut it."""
    keras.distribution.set_distribution(keras.distribution.DataParallel())
    ds = tfpipe.build(table, batch_size=EVAL_BATCH, training=False, pad_remainder=True, **FEATURES)
    model = make_model(keras, ds.element_spec[0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scores = model.evaluate(ds, verbose=0, return_dict=True)
    return {"count": float(scores["count"]), "warnings": [str(w.message) for w in caught]}


def make_model(keras, spec):
    """A linear classifier of the table's features (each feature and its null mask)."""
    from support.backend_checks import count_metric

    keras.utils.set_random_seed(0)
    inputs = {k: keras.Input((), name=k, dtype=v.dtype.name) for k, v in sorted(spec.items())}
    x = keras.ops.stack([keras.ops.cast(v, "float32") for v in inputs.values()], axis=1)
    model = keras.Model(inputs, keras.layers.Dense(3)(x))
    model.compile(
        optimizer=keras.optimizers.SGD(0.1),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        weighted_metrics=[count_metric(), keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
    )
    return model


def weights(keras, model) -> list:
    return [keras.ops.convert_to_numpy(w).tolist() for w in model.get_weights()]


def resume(keras, tfpipe, table: str, hosts, workdir: str) -> list:
    """A run killed at step KILL_AT (every host together) and restarted: BackupAndRestore's
    backup at the last multiple of SAVE_FREQ, the data from that step on each host."""
    backup = os.path.join(workdir, f"backup-{hosts.host_index}")

    class Preempted(Exception):
        pass

    class Kill(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if int(keras.ops.convert_to_numpy(self.model.optimizer.iterations)) == KILL_AT:
                raise Preempted()

    def run(callbacks) -> object:
        position = tfpipe.resume.Position()
        ds = tfpipe.build(
            table, batch_size=GLOBAL_BATCH, start_step=position, hosts=hosts, **FEATURES, **ORDER
        )
        model = make_model(keras, ds.element_spec[0])
        keep = [
            keras.callbacks.BackupAndRestore(backup, save_freq=SAVE_FREQ),
            tfpipe.resume.KerasCallback(position, backup),
        ]
        model.fit(ds, epochs=EPOCHS, steps_per_epoch=STEPS, verbose=0, callbacks=keep + callbacks)
        return model

    with contextlib.suppress(Preempted):
        run([Kill()])
    return weights(keras, run([]))


if __name__ == "__main__":
    pid, port = int(sys.argv[1]), int(sys.argv[2])
    print(json.dumps(main(pid, port, sys.argv[3], sys.argv[4])))

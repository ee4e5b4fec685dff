"""Two replicas: MirroredStrategy over two logical CPUs, fed by build(hosts=Hosts.from_context(ctx)).

Logical devices must be configured before TensorFlow initialises its runtime, and other tests
initialise it in this pytest process, so the strategy runs in a subprocess (SCRIPT) that
prints one JSON line of what it saw.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import tfpipe

ROWS, SHARDS, GLOBAL_BATCH, STEPS, EPOCHS = 101, 4, 8, 6, 3

SCRIPT = r"""
import json, sys
from tfpipe._tf import tf as _tf

tf = _tf()
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])
import keras
import tfpipe

data = sys.argv[1]
global_batch, steps, epochs = (int(v) for v in sys.argv[2:5])
keras.utils.set_random_seed(0)
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
contexts, traced = [], []

def dataset_fn(ctx):
    contexts.append([ctx.num_input_pipelines, ctx.input_pipeline_id, ctx.num_replicas_in_sync])
    return tfpipe.build(data, preset="tabular", batch_size=global_batch, training=True,
                        hosts=tfpipe.Hosts.from_context(ctx), order=tfpipe.Order(seed=1))

class Model(keras.Model):
    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(2)
        self.seen = keras.metrics.Sum(name="examples")

    def call(self, features):
        x = tf.stack([features["x0"], features["x1"], features["x2"]], axis=1)
        return self.dense(x)

    def train_step(self, data):
        features, labels = data
        # Runs once per replica while tracing: record who traced it and the static batch.
        replica = tf.get_static_value(tf.distribute.get_replica_context().replica_id_in_sync_group)
        traced.append([int(replica), labels.shape.as_list(), features["x0"].shape.as_list()])
        self.seen.update_state(tf.ones_like(labels, tf.float32))
        logs = super().train_step(data)
        return logs | {"examples": self.seen.result()}

dist = strategy.distribute_datasets_from_function(dataset_fn)
with strategy.scope():
    model = Model()
    model.compile(optimizer=keras.optimizers.Adam(0.1),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
history = model.fit(dist, epochs=epochs, steps_per_epoch=steps, verbose=0)
print(json.dumps({
    "replicas": strategy.num_replicas_in_sync,
    "devices": list(strategy.extended.worker_devices),
    "contexts": contexts,
    "traced": traced,
    "loss": [float(v) for v in history.history["loss"]],
    "examples": [float(v) for v in history.history["examples"]],
}))
"""


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> str:
    """101 rows, 4 shards; label = (x0 + x1 > 0), so a linear model learns it."""
    root = tmp_path_factory.mktemp("distribute")
    rng = np.random.default_rng(7)
    x = rng.standard_normal((ROWS, 3)).astype(np.float32)
    df = pd.DataFrame(
        {"x0": x[:, 0], "x1": x[:, 1], "x2": x[:, 2], "label": (x[:, 0] + x[:, 1] > 0).astype(np.int64)}
    )
    df.to_csv(root / "t.csv", index=False)
    dest = str(root / "tab")
    tfpipe.convert(str(root / "t.csv"), dest, label="label", num_shards=SHARDS, workers=1)
    return dest


@pytest.mark.slow
def test_two_replica_mirrored_strategy_fit(table):
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, table, str(GLOBAL_BATCH), str(STEPS), str(EPOCHS)],
        capture_output=True,
        text=True,
        timeout=240,
        env=dict(os.environ, KERAS_BACKEND="tensorflow"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])

    assert out["replicas"] == 2
    assert [d.rsplit("/", 1)[1] for d in out["devices"]] == ["device:CPU:0", "device:CPU:1"]
    # One input pipeline for the (single) worker, feeding both replicas.
    assert out["contexts"] == [[1, 0, 2]]
    per_replica = GLOBAL_BATCH // 2
    traced = sorted(out["traced"])
    assert traced == [[0, [per_replica], [per_replica]], [1, [per_replica], [per_replica]]]
    # Each epoch (metrics reset per epoch) consumed STEPS full global batches, summed over
    # both replicas.
    assert out["examples"] == [STEPS * GLOBAL_BATCH] * EPOCHS
    loss = out["loss"]
    assert len(loss) == EPOCHS and all(math.isfinite(v) for v in loss)
    assert loss[0] > loss[1] > loss[2], loss


def test_input_pipelines_read_disjoint_files_and_together_every_row(table):
    from tfpipe._tf import tf
    from tfpipe.pipeline import plan

    tf_ = tf()
    plans, rows = [], []
    for i in range(2):
        ctx = tf_.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=i, num_replicas_in_sync=2)
        plans.append(
            plan(table, preset="tabular", batch_size=GLOBAL_BATCH, training=False, input_context=ctx)
        )
        got = []
        for features, labels in plans[-1].dataset():
            assert labels.shape[0] <= GLOBAL_BATCH // 2
            got += [round(float(v), 6) for v in features["x0"].numpy()]
        rows.append(got)
    files = [set(p.files) for p in plans]
    assert not files[0] & files[1] and len(files[0] | files[1]) == SHARDS
    assert all(p.batch_size == GLOBAL_BATCH // 2 for p in plans)
    assert not set(rows[0]) & set(rows[1])
    assert len(rows[0]) + len(rows[1]) == ROWS

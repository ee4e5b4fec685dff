"""A real model.fit, SIGKILLed mid-epoch, restarted with BackupAndRestore and tfpipe's resume,
trains on exactly the batches of an uninterrupted run: the same examples (image/filename, a
table's row_id), in the same order, with the same augmentation (pixels).

Each scenario runs SCRIPT twice in subprocesses: the first run waits at a random step for the
parent's SIGKILL; the restart runs to the end at another parallelism setting. Both log, per
training step, the example ids and a pixel (or value) fingerprint of the batch the model
trained on. The steps the first run backed up, then the restart's steps, must equal the
uninterrupted batches read straight from `tfpipe.build()` with the same seed.
"""

from __future__ import annotations

import json
import os
import pathlib
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import tfpipe
from tfpipe import storage

from support.pipeline_data import N_IMAGES, N_ROWS
from support.resume_fit import fingerprint_tf, named_images

tf = pytest.importorskip("tensorflow")

BATCH, EPOCHS, SAVE_FREQ, SEED = 4, 3, 3, 11
# Small groups and windows, odd sizes: the order's group and window edges fall mid-epoch.
ORDER = {"cycle_length": 2, "shuffle_buffer": 7}
PARALLELISM = {
    "serial": {"read_parallelism": 1, "map_parallelism": 1, "prefetch": 1},
    "autotune": {},
}

SCRIPT = r"""
import json, os, sys, time
import keras
import tfpipe
from tfpipe._tf import tf as _tf
sys.path.insert(0, sys.argv[1])
from support.resume_fit import named_images, fingerprint_tf

tf = _tf()
(_, _, data, kind, backup, log_path, parallelism, kill_at, settings) = sys.argv
options = json.loads(parallelism)
kill_at = int(kill_at)
BATCH, EPOCHS, SAVE_FREQ, SEED, ORDER = json.loads(settings)
keras.utils.set_random_seed(0)

position = tfpipe.resume.Position()
if kind == "images":
    ds = tfpipe.build(data, preset=named_images(), batch_size=BATCH, seed=SEED, start_step=position,
                      image_size=16, **ORDER, **options)
    inputs = keras.Input((16, 16, 3), dtype="uint8")
    x = keras.layers.Rescaling(1 / 255)(inputs)
    x = keras.layers.Conv2D(2, 3, strides=2)(x)
    net = keras.Model(inputs, keras.layers.Dense(3)(keras.layers.GlobalAveragePooling2D()(x)))
else:
    ds = tfpipe.build(data, batch_size=BATCH, seed=SEED, start_step=position, features=["row_id", "float32_0"],
                      mask_suffix="_missing", **ORDER, **options)
    inputs = keras.Input((1,))
    net = keras.Model(inputs, keras.layers.Dense(3)(inputs))

steps = tfpipe.steps_per_epoch(data, BATCH)

class Logged(keras.Model):
    # Trains `net`, keeping the ids and fingerprints of the batch it trained on.
    def __init__(self):
        super().__init__()
        self.net = net
        self.ids = tf.Variable(tf.zeros([BATCH], tf.int64), trainable=False)
        self.fps = tf.Variable(tf.zeros([BATCH], tf.int64), trainable=False)

    def call(self, x):
        return self.net(x)

    def train_step(self, data):
        x, y = data
        ids, fps = fingerprint_tf(x, kind)
        self.ids.assign(ids)
        self.fps.assign(fps)
        features = x[0] if kind == "images" else x["float32_0"][:, None]
        return super().train_step((features, y))

model = Logged()
model.build((None, 16, 16, 3) if kind == "images" else (None, 1))
model.compile(keras.optimizers.SGD(0.01), keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              jit_compile=False)

class Log(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        step = int(self.model.optimizer.iterations.numpy()) - 1
        line = {"step": step, "ids": self.model.ids.numpy().tolist(), "fps": self.model.fps.numpy().tolist()}
        with open(log_path, "a") as f:
            f.write(json.dumps(line) + "\n")
        if step == kill_at:
            time.sleep(120)  # the parent SIGKILLs this process now

model.fit(ds, epochs=EPOCHS, steps_per_epoch=steps, verbose=0, callbacks=[
    tfpipe.resume.KerasCallback(position, backup),  # listed first on purpose: order does not matter
    keras.callbacks.BackupAndRestore(backup, save_freq=SAVE_FREQ),
    Log(),
])
print("done", position.step)
"""


def expected(data, kind, steps, **options):
    """The uninterrupted run's batches, read straight from build(): [(ids, fps)] per step."""
    if kind == "images":
        ds = tfpipe.build(
            data, preset=named_images(), batch_size=BATCH, seed=SEED, image_size=16, **ORDER, **options
        )
    else:
        ds = tfpipe.build(
            data,
            batch_size=BATCH,
            seed=SEED,
            features=["row_id", "float32_0"],
            mask_suffix="_missing",
            **ORDER,
            **options,
        )
    out = []
    for x, _ in ds.take(steps):
        ids, fps = fingerprint_tf(x, kind)
        out.append((ids.numpy().tolist(), fps.numpy().tolist()))
    return out


def run_child(tmp: pathlib.Path, data, kind, backup, log, parallelism, kill_at):
    args = [
        sys.executable,
        "-c",
        SCRIPT,
        str(pathlib.Path(__file__).parent),
        data,
        kind,
        backup,
        str(log),
        json.dumps(PARALLELISM[parallelism]),
        str(kill_at),
        json.dumps([BATCH, EPOCHS, SAVE_FREQ, SEED, ORDER]),
    ]
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def read_log(path: pathlib.Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


def wait_for_step(proc, log: pathlib.Path, step: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(line["step"] == step for line in read_log(log)):
            return
        if proc.poll() is not None:
            raise AssertionError(f"the first run ended before step {step}: {proc.stderr.read()[-3000:]}")
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"step {step} never came")


def survive_sigkill(tmp: pathlib.Path, runs: dict[str, tuple[str, str, str, str]]) -> None:
    """Runs the scenarios `runs` ({kind: (data, backup, first, second)}) side by side: the
    first runs, SIGKILL each at a random mid-epoch step, the restarts, then the checks."""
    rng = random.Random(os.environ.get("PYTEST_CURRENT_TEST", ""))
    plans = {}
    for kind, (data, backup, first, _) in runs.items():
        steps = tfpipe.steps_per_epoch(data, BATCH)
        total = EPOCHS * steps
        kill = rng.choice([s for s in range(SAVE_FREQ + 1, total - 2) if s % steps])  # mid-epoch
        log = tmp / f"{kind}-first.jsonl"
        plans[kind] = (total, kill, log, run_child(tmp, data, kind, backup, log, first, kill))
    want = {kind: expected(data, kind, plans[kind][0]) for kind, (data, *_) in runs.items()}
    for _, kill, log, proc in plans.values():
        wait_for_step(proc, log, kill)
        proc.send_signal(signal.SIGKILL)  # no cleanup of any kind: a preemption
        proc.wait()
    restarts = {
        kind: run_child(tmp, data, kind, backup, tmp / f"{kind}-second.jsonl", second, -1)
        for kind, (data, backup, _, second) in runs.items()
    }
    for kind, proc in restarts.items():
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err[-3000:]
        total, kill, log, _ = plans[kind]
        check(kind, total, kill, read_log(log), read_log(tmp / f"{kind}-second.jsonl"), want[kind])


def check(kind: str, total: int, kill: int, before: list[dict], after: list[dict], want: list) -> None:
    resumed = after[0]["step"]
    where = f"{kind}: killed at step {kill}, resumed at {resumed}"
    # BackupAndRestore's last backup before the kill: the restart starts there, mid-epoch.
    assert resumed == (kill + 1) // SAVE_FREQ * SAVE_FREQ, where
    assert [line["step"] for line in before[:resumed]] == list(range(resumed)), where
    # The restart runs to the planned last step, not a partial epoch beyond it.
    assert [line["step"] for line in after] == list(range(resumed, total)), where
    trained = [(line["ids"], line["fps"]) for line in before[:resumed] + after]
    assert trained == want, where
    ids = [i for batch, _ in trained for i in batch]
    n = N_IMAGES if kind == "images" else N_ROWS
    assert sorted(ids[:n]) == sorted(set(ids[:n])) and len(set(ids[:n])) == n  # each example once per epoch


@pytest.mark.slow
def test_model_fit_survives_sigkill(tmp_path, image_ds, table_ds):
    survive_sigkill(
        tmp_path,
        {
            "images": (image_ds, str(tmp_path / "backup-images"), "serial", "autotune"),
            "table": (table_ds, str(tmp_path / "backup-table"), "autotune", "serial"),
        },
    )


@pytest.mark.slow
@pytest.mark.gcs
def test_model_fit_survives_sigkill_on_gcs(tmp_path, image_ds, table_ds, gcs_bucket):
    runs = {}
    for kind, local, first, second in (
        ("images", image_ds, "autotune", "serial"),
        ("table", table_ds, "serial", "autotune"),
    ):
        data = storage.join(gcs_bucket, kind)
        for name in os.listdir(local):
            storage.write_atomic(storage.join(data, name), pathlib.Path(local, name).read_bytes())
        runs[kind] = (data, storage.join(gcs_bucket, f"backup-{kind}"), first, second)
    survive_sigkill(tmp_path, runs)
    # BackupAndRestore removed its directory at the end, tfpipe's state file with it.
    assert not storage.exists(storage.join(gcs_bucket, "backup-images", tfpipe.resume.STATE_NAME))


def test_fingerprints_tell_augmentations_apart(image_ds):
    """The pixel fingerprint sees a flip or another crop: two seeds' batches differ."""
    a = expected(image_ds, "images", 2)
    np.testing.assert_equal(a, expected(image_ds, "images", 2))
    ds = tfpipe.build(
        image_ds, preset=named_images(), batch_size=BATCH, seed=SEED + 1, image_size=16, **ORDER
    )
    b = [fingerprint_tf(x, "images")[1].numpy().tolist() for x, _ in ds.take(2)]
    assert [fps for _, fps in a] != b

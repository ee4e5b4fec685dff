"""`Position`: where training input stands, as a `tf.train.Checkpoint`-trackable object.

The state of a resumable pipeline is a step count plus what the count means (the data, the
global batch, the seed, the number of input pipelines, the window): a few hundred bytes,
where an iterator checkpoint holds the shuffle buffer. `build(..., start_step=position)`
binds a pipeline to it; the dataset reads the step when its iterator starts, so a position
restored after `build()` (by `tf.train.Checkpoint.restore`, or by the Keras callback in
`tfpipe.resume`) is where the data starts.
"""

from __future__ import annotations

import json
from typing import Any

from tfpipe._tf import Tensor, tf
from tfpipe.errors import ConfigError
from tfpipe.validation import check_int

_tf = tf()
# TensorFlow's base of checkpointable objects (Any to a type checker, see tfpipe/_tf.py).
Trackable: Any = _tf.__internal__.tracking.Trackable

# The step lives in an int64 variable.
INT64_MAX = 2**63 - 1

# How each identity field is named in a refusal, and what to do about it.
_FIELDS = {
    "order_version": ("the resumable order's version", "this tfpipe orders records differently"),
    "mixture_version": (
        "the mixture's version",
        "this tfpipe mixes its sources differently (2: pieces of text and records merged in virtual "
        "time, issue 45; 1: a choice per document in permuted blocks)",
    ),
    "data": ("the data (shard names, counts, sizes, checksums)", "resume on the same split"),
    "batch_size": ("the global batch_size", "resume with the same batch_size"),
    "seed": ("the seed", "resume with the same seed="),
    "input_pipelines": (
        "the number of input pipelines (num_hosts, or input_context.num_input_pipelines)",
        "each pipeline's share of the files, and its place in them, depend on it: resume on "
        "as many hosts (input pipelines)",
    ),
    "window": (
        "the window (shuffle_buffer, capped by ram_budget)",
        "pass shuffle_buffer and ram_budget so the window matches",
    ),
    "cycle": ("the files per group (cycle_length)", "resume with the same cycle_length"),
    "run": ("the records per run", "the manifest's mean record size decides it: resume on the same data"),
}


class Position(Trackable):
    """The training step input pipelines start from, saved and restored with the model.

    Args:
      step: the first training step (batches of the global batch already consumed).

    Example (a custom training loop):
      >>> position = tfpipe.Position()
      >>> ds = tfpipe.build(data, batch_size=1024, seed=7, start_step=position)
      >>> ckpt = tf.train.Checkpoint(model=model, optimizer=optimizer, input=position)
      >>> ckpt.restore(tf.train.latest_checkpoint(checkpoint_dir))  # before iterating ds
      >>> for batch in ds:
      ...     train_step(batch)
      ...     position.advance()  # one step consumed; save ckpt when you like

    A restored position is checked against the pipelines bound to it: a checkpoint of other
    data, another batch size, seed, window or number of input pipelines is refused naming
    what differs.
    """

    def __init__(self, step: int = 0) -> None:
        step = check_int("step", step, 0, INT64_MAX)
        if _tf.distribute.has_strategy() and not _tf.distribute.in_cross_replica_context():
            raise ConfigError("Create the Position outside a replica context (not inside strategy.run).")
        with _tf.init_scope(), _tf.device("/cpu:0"):
            self._step = _tf.Variable(step, dtype=_tf.int64, trainable=False, name="tfpipe_input_step")
        self._identity: dict[str, Any] | None = None
        self._restored: dict[str, Any] | None = None

    @property
    def step(self) -> int:
        """The step the next iterator of a bound dataset starts at."""
        return int(self._step.numpy())

    @property
    def variable(self) -> Tensor:
        """The int64 `tf.Variable` holding the step (read when a bound dataset's iterator starts)."""
        return self._step

    @property
    def identity(self) -> dict[str, Any] | None:
        """What the step means, set by `build(..., start_step=self)`; None until then."""
        return None if self._identity is None else dict(self._identity)

    def assign(self, step: int) -> None:
        """Sets the step (e.g. from `optimizer.iterations` after a restore)."""
        step = check_int("step", step, 0, INT64_MAX)
        self._step.assign(step)

    def advance(self, steps: int = 1) -> None:
        """Counts `steps` more training steps consumed."""
        check_int("steps", steps, 1)
        self._step.assign_add(steps)

    def read(self) -> Tensor:
        """The step as a tensor (inside a dataset function: read when the iterator starts)."""
        return self._step.read_value()

    def bind(self, identity: dict[str, Any]) -> None:
        """Binds a pipeline: every pipeline of one Position must mean the same by a step, and
        a restored checkpoint must mean it too.

        Raises:
          ConfigError: naming the first field that differs.
        """
        if self._identity is not None:
            check_identity(self._identity, identity, "another pipeline bound to this Position")
        if self._restored is not None:
            check_identity(self._restored, identity, "the restored checkpoint")
        self._identity = dict(identity)

    # tf.train.Checkpoint's hooks: the step and the identity (a JSON string) are saved.
    def _serialize_to_tensors(self) -> dict[str, Tensor]:
        text = json.dumps(self._identity, sort_keys=True) if self._identity is not None else ""
        return {"step": self._step, "identity": _tf.constant(text)}

    def _restore_from_tensors(self, restored_tensors: dict[str, Tensor]) -> Tensor:
        text = restored_tensors["identity"]
        if _tf.executing_eagerly():
            text = text.numpy().decode()
            saved = json.loads(text) if text else None
            if saved is not None and self._identity is not None:
                check_identity(saved, self._identity, "the restored checkpoint")
            self._restored = saved
        return self._step.assign(restored_tensors["step"])


def check_identity(saved: dict[str, Any], now: dict[str, Any], what: str) -> None:
    """Refuses a position whose meaning differs, naming the field, both values and what to do."""
    saved, now = _versioned(saved), _versioned(now)
    for key in sorted(set(saved) | set(now), key=lambda k: list(_FIELDS).index(k) if k in _FIELDS else 99):
        if saved.get(key) != now.get(key):
            name, advice = _FIELDS.get(key, (key, "resume with the same settings"))
            raise ConfigError(
                f"Cannot resume the input: {what} counts steps with {name} = {saved.get(key)!r}, this "
                f"pipeline with {now.get(key)!r}. A step would then stand for other examples; "
                f"{advice}, or start over with a fresh Position (step 0)."
            )


def _versioned(identity: dict[str, Any]) -> dict[str, Any]:
    """A mixture's identity from before mixture versions (issue 35's) is version 1."""
    if "mixture" in identity and "mixture_version" not in identity:
        return identity | {"mixture_version": 1}
    return identity

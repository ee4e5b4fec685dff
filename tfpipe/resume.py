"""Resume training input where a preempted run stopped: exactly the same examples, in the same
order, with the same augmentation.

`tfpipe.build(..., seed=S, start_step=position)` makes a dataset that starts at
`position.step` when its iterator starts. Two ways to keep the position:

- Keras: `KerasCallback(position, backup_dir)` beside `keras.callbacks.BackupAndRestore`.
  After BackupAndRestore has restored the model (and its optimizer's step count), the callback
  sets the position from `model.optimizer.iterations` before fit starts reading data.
- Custom loops: `Position` is `tf.train.Checkpoint`-trackable; save it with the model.

Example:
  >>> position = tfpipe.resume.Position()
  >>> ds = tfpipe.build(data, batch_size=1024, seed=7, start_step=position)
  >>> model.fit(ds, epochs=90, steps_per_epoch=steps, callbacks=[
  ...     keras.callbacks.BackupAndRestore(backup_dir, save_freq=500),
  ...     tfpipe.resume.KerasCallback(position, backup_dir),
  ... ])
"""

from __future__ import annotations

import json

import keras

from tfpipe import storage
from tfpipe.errors import ConfigError
from tfpipe.pipeline.order.position import Position, check_identity

__all__ = ["STATE_NAME", "KerasCallback", "Position"]

# The file KerasCallback keeps in the backup directory: what a step means, and the step at
# which the planned run ends. BackupAndRestore removes the directory, and it, when fit ends.
STATE_NAME = "tfpipe_input.json"


class KerasCallback(keras.callbacks.Callback):
    """Starts `build(..., start_step=position)` datasets at the model's restored step.

    Args:
      position: the Position the training dataset was built with.
      backup_dir: BackupAndRestore's `backup_dir`. The callback keeps `tfpipe_input.json`
        there: what a step means (the data, batch size, seed, input pipelines, window), so a
        restart with other settings is refused naming the difference, and the step at which
        the planned run ends.

    What it does:
      - At the start of each epoch (after every callback's `on_train_begin`, so after
        BackupAndRestore has loaded the weights and the optimizer, whatever the order of the
        callbacks), it sets the position to `model.optimizer.iterations`: the steps whose
        updates the model holds. The dataset reads it when fit starts its iterator.
      - Keras restarts an interrupted epoch from its first batch (BackupAndRestore restores
        the epoch, not the batch), so after a mid-epoch resume fit would run more steps than
        planned: the callback stops fit at the planned last step, so the model trains on
        each planned batch exactly once. Epoch ends (logs, validation, epoch callbacks) then
        fall a partial epoch later than planned; step-based schedules are unaffected.
    """

    def __init__(self, position: Position, backup_dir: str) -> None:
        super().__init__()
        if not isinstance(position, Position):
            raise ConfigError(
                f"KerasCallback needs the tfpipe.resume.Position the dataset was built with. Received: "
                f"{type(position).__name__}"
            )
        if not isinstance(backup_dir, str) or not backup_dir:
            raise ConfigError(f"backup_dir must be BackupAndRestore's directory. Received: {backup_dir!r}")
        self.position = position
        self.backup_dir = backup_dir
        self._end: int | None = None
        self._started = False

    @property
    def state_path(self) -> str:
        return storage.join(self.backup_dir, STATE_NAME)

    def on_train_begin(self, logs: dict[str, float] | None = None) -> None:
        self._started, self._end = False, None

    def on_epoch_begin(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        step = self._iterations()
        if not self._started:
            self._started = True
            self._end = self._plan(epoch, step)
        self.position.assign(step)

    def on_train_batch_end(self, batch: int, logs: dict[str, float] | None = None) -> None:
        if self._end is not None and self._iterations() >= self._end:
            self.model.stop_training = True

    def _iterations(self) -> int:
        optimizer = getattr(self.model, "optimizer", None)
        if optimizer is None:
            raise ConfigError("KerasCallback needs a compiled model: it reads model.optimizer.iterations.")
        return int(keras.ops.convert_to_numpy(optimizer.iterations))

    def _plan(self, epoch: int, step: int) -> int | None:
        """The planned last step: from the state file of an interrupted run, else from this fit
        (written to the state file, with what a step means)."""
        identity = self.position.identity
        if identity is None:
            raise ConfigError(
                "The Position is not bound to a dataset: build the training dataset with "
                "tfpipe.build(..., start_step=position) before fit."
            )
        if storage.exists(self.state_path):
            state = json.loads(storage.read_bytes(self.state_path))
            check_identity(state["identity"], identity, f"the interrupted run ({self.state_path})")
            return state["end_step"]
        steps, epochs = self.params.get("steps"), self.params.get("epochs")
        end = step + (epochs - epoch) * steps if steps and epochs is not None else None
        storage.makedirs(self.backup_dir)
        state = {"identity": identity, "end_step": end, "start_step": step}
        storage.write_atomic(self.state_path, json.dumps(state, sort_keys=True).encode(), overwrite=True)
        return end

"""Every host's per-call series, gathered so each host can give the job's figure.

Only JAX processes are gathered (`jax.experimental.multihost_utils.process_allgather`, a
collective every process calls at the end of fit, as every process ends fit together). A
TensorFlow job's hosts are not gathered: each gives its own figure.
"""

from __future__ import annotations

import numpy as np


def process_count() -> int:
    """The JAX processes of this job (1 when JAX is not the backend or not distributed)."""
    import keras

    if keras.backend.backend() != "jax":
        return 1
    import jax

    return int(jax.process_count())


def process_index() -> int:
    import keras

    if keras.backend.backend() != "jax":
        return 0
    import jax

    return int(jax.process_index())


def gather(waits: np.ndarray, periods: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every process's per-call waits and periods, `[processes, calls]`, calls beyond a
    process's own padded with NaN (not measured). Every process must call this together."""
    from jax.experimental import multihost_utils

    lengths = np.asarray(multihost_utils.process_allgather(np.array([len(waits)], np.int64)))
    n = int(lengths.max())
    both = np.full((2, n), np.nan)
    both[0, : len(waits)], both[1, : len(periods)] = waits, periods
    every = np.asarray(multihost_utils.process_allgather(both))  # [processes, 2, n]
    return every[:, 0, :], every[:, 1, :]

"""How tfpipe starts worker processes: one rule for every process pool (convert's workers, the
synthetic data generator)."""

from __future__ import annotations

import multiprocessing
import sys
from collections.abc import Sequence


def worker_context(preload: Sequence[str] = ()) -> multiprocessing.context.BaseContext:
    """How to start worker processes.

    `fork` while TensorFlow is not loaded: fast, and a user's script needs no
    `if __name__ == "__main__":` guard. Once TensorFlow is loaded its threads make a fork
    unsafe, so `forkserver` then starts workers from a clean process (which re-imports the
    main module: scripts that load TensorFlow before converting need the guard).

    Args:
      preload: modules the fork server imports once, so each worker it starts has them.
    """
    if "tensorflow" not in sys.modules and "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(list(preload))
    return ctx

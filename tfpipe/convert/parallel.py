"""Ordered parallel map over worker processes, with a bounded number of tasks in flight.

Results come back in submission order, so what is written never depends on the number of
workers. Workers never need TensorFlow.
"""

from __future__ import annotations

import collections
import multiprocessing
import sys
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

IN_FLIGHT_PER_WORKER = 4
"""Tasks queued per worker: enough to hide the parent's write time, small enough to bound memory
(a task is one chunk of images or rows)."""


def worker_context() -> multiprocessing.context.BaseContext:
    """How to start worker processes.

    `fork` while TensorFlow is not loaded: fast, and a user's script needs no
    `if __name__ == "__main__":` guard. Once TensorFlow is loaded its threads make a fork
    unsafe, so `forkserver` then starts workers from a clean process (which re-imports the
    main module: scripts that load TensorFlow before converting need the guard).
    """
    if "tensorflow" not in sys.modules and "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["tfpipe.convert.encode"])
    return ctx


def ordered_map(fn: Callable[[T], R], tasks: Iterable[T], workers: int) -> Iterator[R]:
    """Yields `fn(task)` for each task, in order, computed by `workers` processes.

    With `workers == 1` everything runs in this process: the same bytes, no process start-up.
    """
    if workers <= 1:
        for task in tasks:
            yield fn(task)
        return
    with ProcessPoolExecutor(max_workers=workers, mp_context=worker_context()) as pool:
        pending: collections.deque[Future[R]] = collections.deque()
        try:
            for task in tasks:
                pending.append(pool.submit(fn, task))
                if len(pending) >= workers * IN_FLIGHT_PER_WORKER:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for f in pending:
                f.cancel()

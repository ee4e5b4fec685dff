"""Ordered parallel map over worker processes, with a bounded number of tasks in flight.

Results come back in submission order, so what is written never depends on the number of
workers. Workers start through `forkserver`: the parent may have TensorFlow loaded, whose
threads make a plain fork unsafe, and workers never need TensorFlow.
"""

from __future__ import annotations

import collections
import multiprocessing
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

IN_FLIGHT_PER_WORKER = 4
"""Tasks queued per worker: enough to hide the parent's write time, small enough to bound memory
(a task is one chunk of images or rows)."""


def ordered_map(fn: Callable[[T], R], tasks: Iterable[T], workers: int) -> Iterator[R]:
    """Yields `fn(task)` for each task, in order, computed by `workers` processes.

    With `workers == 1` everything runs in this process: the same bytes, no process start-up.
    """
    if workers <= 1:
        for task in tasks:
            yield fn(task)
        return
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["tfpipe.convert.encode"])
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
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

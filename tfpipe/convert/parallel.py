"""Ordered parallel map over worker processes, with a bounded number of tasks in flight.

Results come back in submission order, so what is written never depends on the number of
workers. Workers never need TensorFlow.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import ctypes.util
import multiprocessing
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import TypeVar

from tfpipe import _workers

T = TypeVar("T")
R = TypeVar("R")

IN_FLIGHT_PER_WORKER = 4
"""Tasks queued per worker: enough to hide the parent's write time, small enough to bound memory
(a task is one chunk of images or rows)."""


def worker_context() -> multiprocessing.context.BaseContext:
    """How to start convert's worker processes (`tfpipe._workers.worker_context`); a fork
    server preloads the encoder."""
    return _workers.worker_context(preload=["tfpipe.convert.encode"])


_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
_PARENT_POLL_S = 0.5


def init_worker(parent_pid: int, environ: dict[str, str]) -> None:
    """Worker initializer: the converting process's environment, and death with it.

    A fork server is started once and keeps the environment of that moment; its workers
    must still see the caller's current one (e.g. STORAGE_EMULATOR_HOST, credentials), as
    forked workers do.
    """
    if dict(os.environ) != environ:
        os.environ.clear()
        os.environ.update(environ)
    die_with_parent(parent_pid)


def die_with_parent(parent_pid: int) -> None:
    """Worker initializer: the worker dies when the converting process `parent_pid` dies.

    A SIGKILLed or SIGTERMed `tfpipe convert` must not leave encode workers running under
    PID 1. A forked worker asks the kernel for SIGKILL when its parent goes
    (prctl(PR_SET_PDEATHSIG), Linux). A worker started by the fork server is the server's
    child, and the server itself outlives the converting process as long as any worker
    does, so such a worker watches `parent_pid` from a daemon thread (a pidfd on Linux,
    a poll elsewhere) and exits when it is gone.
    """
    if os.getppid() == parent_pid and _set_pdeathsig():
        # The parent may have died between fork() and prctl(): then nothing would signal us.
        if os.getppid() != parent_pid:
            os._exit(1)
        return
    threading.Thread(
        target=_exit_when_gone, args=(parent_pid,), name="tfpipe-parent-watch", daemon=True
    ).start()


def _exit_when_gone(pid: int) -> None:
    try:
        fd = os.pidfd_open(pid)  # readable once the process has exited
    except (AttributeError, OSError):
        fd = None
    if fd is not None:
        select.select([fd], [], [])
    else:
        while _alive(pid):
            time.sleep(_PARENT_POLL_S)
    os._exit(1)


def _set_pdeathsig() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def ordered_map(
    fn: Callable[[T], R], tasks: Iterable[T], workers: int, local: Callable[[T], R | None] | None = None
) -> Iterator[R]:
    """Yields `fn(task)` for each task, in order, computed by `workers` processes.

    With `workers == 1` everything runs in this process: the same bytes, no process start-up.

    Args:
      local: a cheaper way to the same result, tried first in this process; when it returns
        None the task goes to a worker. The workers start only when a task first needs one.
    """
    if workers <= 1:
        for task in tasks:
            result = local(task) if local else None
            yield fn(task) if result is None else result
        return
    with contextlib.ExitStack() as stack:
        pool: ProcessPoolExecutor | None = None
        pending: collections.deque[Future[R]] = collections.deque()
        try:
            for task in tasks:
                result = local(task) if local else None
                if result is None:
                    pool = pool or stack.enter_context(_pool(workers))
                    pending.append(pool.submit(fn, task))
                else:
                    pending.append(_done(result))
                if len(pending) >= workers * IN_FLIGHT_PER_WORKER:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for f in pending:
                f.cancel()
            if pool is not None:
                # On an error, don't wait for queued tasks: only the running ones finish.
                pool.shutdown(wait=True, cancel_futures=True)


def _pool(workers: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=worker_context(),
        initializer=init_worker,
        initargs=(os.getpid(), dict(os.environ)),
    )


def _done(result: R) -> Future[R]:
    future: Future[R] = Future()
    future.set_result(result)
    return future

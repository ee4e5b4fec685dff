"""One writer per destination: the `.tfpipe.lock` that `tfpipe convert` holds while it runs.

Two conversions into one destination can undo each other's work: an `--overwrite` run deletes
shards the other has committed, and two splits written at once would each number their
classes alone and each rewrite the manifest without the other's split. So a run takes the
destination's lock before it reads anything there, and a second writer is refused, naming
the holder. The lock covers the whole destination (every split), because the manifest and
the class list are shared by all splits.

- Local destinations: `flock()` on `DEST/.tfpipe.lock`. The kernel releases it when the holder
  dies, however it dies, so a killed run never leaves a stale lock. The file holds the
  holder's host, pid and start time, for the message a second writer gets.
- gs:// destinations: the object `DEST/.tfpipe.lock`, created with a does-not-exist
  precondition. A holder that was killed leaves it behind. It is stale, and taken over
  automatically, when it was written on this host (same host name and boot) by a process
  that is no longer running. A lock from another host cannot be checked from here: the
  message names the holder, and `--break-lock` (break_lock=True) takes it over once you know
  that run is dead.

The lock is released on success and on error; `.tfpipe.lock` is then deleted.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import os
import secrets
import socket
import time

from tfpipe import storage
from tfpipe.errors import DestinationError

LOCK_NAME = ".tfpipe.lock"
_HELD_FDS: set[int] = set()


def _close_held_in_child() -> None:
    # A forked worker must not keep the destination's flock alive after its parent died.
    for fd in list(_HELD_FDS):
        with contextlib.suppress(OSError):
            os.close(fd)
    _HELD_FDS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_held_in_child)


@dataclasses.dataclass(frozen=True, slots=True)
class Holder:
    """Who holds a lock: enough to name it, and to tell on this host whether it still runs."""

    host: str
    boot: str
    pid: int
    pid_start: str
    started: float
    token: str

    @classmethod
    def me(cls) -> Holder:
        pid = os.getpid()
        return cls(
            socket.gethostname(), _boot_id(), pid, _process_start(pid), time.time(), secrets.token_hex(8)
        )

    @classmethod
    def parse(cls, data: bytes) -> Holder | None:
        try:
            obj = json.loads(data)
            return cls(
                str(obj["host"]),
                str(obj["boot"]),
                int(obj["pid"]),
                str(obj["pid_start"]),
                float(obj["started"]),
                str(obj["token"]),
            )
        except (ValueError, KeyError, TypeError):
            return None

    def to_bytes(self) -> bytes:
        return json.dumps(dataclasses.asdict(self)).encode()

    def describe(self) -> str:
        when = datetime.datetime.fromtimestamp(self.started).isoformat(timespec="seconds")
        age = max(0.0, time.time() - self.started)
        return f"pid {self.pid} on host {self.host}, started {when} ({_duration(age)} ago)"

    def is_dead(self) -> bool:
        """True only when this host can tell for sure that the holder no longer runs."""
        if self.host != socket.gethostname():
            return False
        if self.boot and _boot_id() and self.boot != _boot_id():
            return True  # the host rebooted since
        return _process_start(self.pid) != self.pid_start


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def _process_start(pid: int) -> str:
    """An id of the process `pid` that changes if the pid is reused; "" if it does not run."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return "" if fields[0] in ("Z", "X") else fields[19]  # state; starttime (field 22)
    except FileNotFoundError:
        return ""
    except (OSError, IndexError):
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return ""
    except PermissionError:
        pass
    return "running"


class DestinationLock:
    """The lock of one destination, as a context manager.

    Raises (on enter):
      DestinationError: another run holds it (naming that run), or the destination cannot
        be written.

    Example:
      >>> with DestinationLock("gs://bucket/imagenet"):
      ...     ...  # the only writer of that destination
    """

    def __init__(self, dest: str, break_lock: bool = False) -> None:
        self.dest, self.break_lock = dest, break_lock
        self.path = storage.join(dest, LOCK_NAME)
        self.holder = Holder.me()
        self._fd: int | None = None
        self._generation = 0

    def __enter__(self) -> DestinationLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def acquire(self) -> None:
        if storage.is_gcs(self.dest):
            self._acquire_gcs()
        else:
            self._acquire_local()

    def _refuse(self, holder: Holder | None, extra: str = "") -> DestinationError:
        who = holder.describe() if holder else "a process whose details are not written yet"
        return DestinationError(
            f"{self.dest} is being written by another tfpipe convert ({who}; lock {self.path}). "
            f"One writer per destination: wait for it to finish, or convert into another destination.{extra}"
        )

    def _acquire_local(self) -> None:
        import fcntl

        for _ in range(10):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = Holder.parse(os.read(fd, 1 << 16))
                os.close(fd)
                raise self._refuse(holder) from None
            except BaseException:
                os.close(fd)
                raise
            # The holder before us may have deleted the file while we waited to lock it: then
            # we hold a lock on a file no one else can see, and must take the new one.
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                continue
            os.ftruncate(fd, 0)
            os.pwrite(fd, self.holder.to_bytes(), 0)
            self._fd = fd
            _HELD_FDS.add(fd)
            return
        raise DestinationError(f"{self.path}: could not take the lock: the file kept being replaced")

    def _acquire_gcs(self) -> None:
        for _ in range(10):
            try:
                self._generation = storage.write_atomic(self.path, self.holder.to_bytes())
                return
            except storage.AlreadyExists:
                pass
            try:
                data, generation = storage.read_generation(self.path)
            except FileNotFoundError:
                continue  # released meanwhile: try again
            holder = Holder.parse(data)
            if not (self.break_lock or (holder is not None and holder.is_dead())):
                raise self._refuse(
                    holder,
                    " If that run is dead (killed on another host), pass "
                    "--break-lock (break_lock=True) to take the lock over.",
                )
            storage.remove_generation(self.path, generation)
        raise DestinationError(f"{self.path}: could not take the lock: other writers kept taking it")

    def release(self) -> None:
        """Deletes the lock if it is still ours. Safe to call twice."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.remove(self.path)  # while still locked: a waiter then sees the file is gone
            _HELD_FDS.discard(self._fd)
            os.close(self._fd)
            self._fd = None
        elif self._generation:
            with contextlib.suppress(Exception):  # an error here must not hide the run's own
                storage.remove_generation(self.path, self._generation)
            self._generation = 0

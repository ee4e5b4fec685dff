"""Helpers for the tf.data service tests: free ports, and `tfpipe serve` as a real subprocess."""

from __future__ import annotations

import queue
import socket
import subprocess
import threading
import time

from support.cli import command, environment, run_cli


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cli:
    """`python -m tfpipe serve ...` with its stdout collected line by line."""

    def __init__(self, *args: str):
        self.proc = subprocess.Popen(
            command("serve", *args),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=environment({"PYTHONUNBUFFERED": "1"}),
        )
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, text: str, timeout: float = 90) -> str:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._queue.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                raise AssertionError(f"no {text!r} within {timeout} s; got {self.lines}") from None
            if line is None:
                raise AssertionError(f"exited {self.proc.wait()} before {text!r}: {self.lines}")
            self.lines.append(line)
            if text in line:
                return line

    def stop(self, sig: int, timeout: float = 15) -> int:
        start = time.monotonic()
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout)
        elapsed = time.monotonic() - start
        self.proc.stdout.close()
        assert elapsed < timeout
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def run_serve(*args: str) -> subprocess.CompletedProcess:
    """`python -m tfpipe serve ARGS` run to completion (for commands that refuse to start)."""
    return run_cli("serve", *args)

"""LocalGCS's two child processes: gcp-storage-emulator and the TLS proxy (`_gcs_proxy`),
started with their output in a log in the twin's folder, waited for until they serve, and ended.

Both children exit when their stdin pipe closes (`end` closes it), so they die with the test
process even when it is SIGKILLed: no orphan holds a port.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import selectors
import socket
import subprocess
import sys
import time

from tfpipe.testing import _gcs_proxy
from tfpipe.testing._gcs_proxy import http_request

_STARTUP_TIMEOUT_S = 30.0


# The emulator's CLI, plus a thread that exits when stdin closes: the emulator then dies with
# the parent even when the parent is SIGKILLed (no orphan holding a port).
_EMULATOR_CHILD = """
import os, sys, threading
def watch():
    sys.stdin.buffer.read()
    os._exit(0)
threading.Thread(target=watch, daemon=True).start()
from gcp_storage_emulator.__main__ import main
main(sys.argv[1:])
"""


def start_emulator(folder: str) -> tuple[subprocess.Popen[bytes], int]:
    """gcp-storage-emulator, in memory, on a free port of 127.0.0.1: (the process, its port).
    Ends what it started if the emulator does not come up."""
    for _ in range(3):  # the probed free port can be taken before the emulator binds it
        port = free_port()
        args = [
            "-c",
            _EMULATOR_CHILD,
            "start",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--in-memory",
            "-q",
        ]
        proc = _spawn(folder, "emulator", args)
        try:
            ready = _wait_emulator(folder, proc, port)
        except BaseException:
            end(proc)
            raise
        if ready:
            return proc, port
        end(proc)
    raise RuntimeError("gcp-storage-emulator found no free port in 3 attempts")


def start_proxy(folder: str, emulator_port: int, cert: str, key: str) -> tuple[subprocess.Popen[bytes], int]:
    """The TLS proxy in front of the emulator: (the process, the port it says it listens on).
    Ends it if it does not come up."""
    proc = _spawn(folder, "proxy", [_gcs_proxy.__file__, str(emulator_port), cert, key, folder], stdout=True)
    try:
        return proc, _wait_proxy(folder, proc)
    except BaseException:
        end(proc)
        raise


def _spawn(folder: str, name: str, args: list[str], stdout: bool = False) -> subprocess.Popen[bytes]:
    with open(_log_path(folder, name), "wb") as log:
        return subprocess.Popen(
            [sys.executable, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE if stdout else log,
            stderr=log,
        )


def _log_path(folder: str, name: str) -> str:
    return os.path.join(folder, f"{name}.log")


def _log_text(folder: str, name: str) -> str:
    with open(_log_path(folder, name), "rb") as f:
        return f.read().decode(errors="replace")[-3000:]


def _wait_emulator(folder: str, proc: subprocess.Popen[bytes], port: int) -> bool:
    """True when ready; False if the port was taken; raises on any other failure."""
    deadline = time.monotonic() + _STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, http.client.HTTPException):
            if http_request(port, "GET", "/", timeout=1.0)[0] == 200:
                return True
        if "Address already in use" in _log_text(folder, "emulator"):
            return False
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise RuntimeError(
        f"gcp-storage-emulator did not start on 127.0.0.1:{port}"
        f" within {_STARTUP_TIMEOUT_S:.0f} s. Its output:\n"
        f"{_log_text(folder, 'emulator')}"
    )


def _wait_proxy(folder: str, proc: subprocess.Popen[bytes]) -> int:
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)  # type: ignore[arg-type]
        if sel.select(_STARTUP_TIMEOUT_S):
            line = proc.stdout.readline().decode()  # type: ignore[union-attr]
            if line.startswith("READY "):
                return int(line.split()[1])
    raise RuntimeError(f"the LocalGCS proxy did not start. Its output:\n{_log_text(folder, 'proxy')}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def end(proc: subprocess.Popen[bytes] | None) -> None:
    """Closes the child's stdin (it exits on EOF), then escalates if it lingers."""
    if proc is None:
        return
    for stream in (proc.stdin, proc.stdout):
        with contextlib.suppress(OSError, AttributeError):
            stream.close()  # type: ignore[union-attr]
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()

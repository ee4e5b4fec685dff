"""The one way tests run the `tfpipe` command: in this process through `tfpipe.cli.main`
(`main_cli` with pytest's capsys, `cli_here` where there is none, as in a fixture), or as
`python -m tfpipe` in a child process (`run_cli`, `start_cli`).

A child gets this tree on its PYTHONPATH, one timeout (CLI_TIMEOUT), and the environment this
session set up (`environment`): what the caller's shell exported that changes what a command
prints or where it connects, such as TF_CPP_MIN_LOG_LEVEL or a proxy, is not passed on. The
conftest removes the same variables from this process at the start of the session;
`CALLER_ENVIRON` keeps them for the tests that need the caller's network (the package index).
"""

from __future__ import annotations

import contextlib
import io
import os
import pathlib
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
# Seconds a command may take in a test: the slowest (a convert or bench on a loaded 2-core
# machine) takes well under a minute; more is a hang, reported as one.
CLI_TIMEOUT = 300
# What a shell may export that changes a command's output or network: TensorFlow's log level
# (level 2 lets the CUDA build's cuInit error through), its oneDNN notice, and the proxies
# (the session's local GCS sets its own when a test asks for it).
SHELL_VARIABLES = (
    "TF_CPP_MIN_LOG_LEVEL",
    "TF_CPP_MAX_VLOG_LEVEL",
    "TF_ENABLE_ONEDNN_OPTS",
    *(f"{name}_proxy" for name in ("http", "https", "all", "no")),
    *(f"{name}_PROXY" for name in ("HTTP", "HTTPS", "ALL", "NO")),
)
# The environment as the caller's shell gave it, before the conftest removed SHELL_VARIABLES.
CALLER_ENVIRON = dict(os.environ)


def forget_the_shell() -> None:
    """Removes SHELL_VARIABLES from this process's environment (the conftest calls it once)."""
    for name in SHELL_VARIABLES:
        os.environ.pop(name, None)


def environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A child's environment: this process's (as the session set it up), this tree first on
    PYTHONPATH, then `extra`."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **(extra or {})}


def command(*args: object, prefix: Sequence[str] = ()) -> list[str]:
    """`[prefix...] python -m tfpipe ARGS` (each argument as a string)."""
    return [*prefix, sys.executable, "-m", "tfpipe", *map(str, args)]


def run_cli(
    *args: object, prefix: Sequence[str] = (), env: Mapping[str, str] | None = None, **run: object
) -> subprocess.CompletedProcess:
    """`tfpipe ARGS` in a child process, run to its end (at most CLI_TIMEOUT seconds):
    returncode, stdout, stderr (text). `env` adds to (or overrides) `environment()`; `run`
    goes to subprocess.run (cwd, preexec_fn)."""
    return subprocess.run(
        command(*args, prefix=prefix),
        env=environment(env),
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT,
        **run,
    )


def start_cli(
    *args: object, prefix: Sequence[str] = (), env: Mapping[str, str] | None = None, **popen: object
) -> subprocess.Popen:
    """`tfpipe ARGS` started in a child process, stdout and stderr as text pipes (to signal,
    pause or read it while it runs); `popen` goes to subprocess.Popen."""
    return subprocess.Popen(
        command(*args, prefix=prefix),
        env=environment(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )


def main_cli(capsys, *args: object) -> tuple[int, str, str]:
    """`tfpipe ARGS` in this process, through `tfpipe.cli.main`: exit code, stdout, stderr."""
    from tfpipe.cli import main

    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def cli_here(*args: object) -> tuple[int, str, str]:
    """`tfpipe ARGS` in this process, its output captured here (no capsys: fixtures use it):
    exit code, stdout, stderr."""
    from tfpipe.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


# ---- a child paused at a step (tfpipe.convert.writer's PAUSE_ENV) ----


def process_state(pid):
    """The state letter of process `pid` in /proc (T: stopped, Z: a zombie), or "gone"."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "gone"


def wait_paused(proc, timeout=60):
    """Waits until `proc` stopped itself at its pause point."""
    deadline = time.monotonic() + timeout
    while process_state(proc.pid) != "T":
        assert proc.poll() is None, f"the run ended without pausing: {proc.communicate()}"
        assert time.monotonic() < deadline, "the run never reached its pause point"
        time.sleep(0.01)


def as_unprivileged():
    """A command prefix under which permission bits apply (root ignores them)."""
    if os.geteuid() != 0:
        return []
    if not shutil.which("setpriv"):
        pytest.skip("running as root without setpriv: permission bits cannot be tested")
    return [
        "setpriv",
        "--bounding-set=-dac_override,-dac_read_search",
        "--inh-caps=-dac_override,-dac_read_search",
        "--",
    ]

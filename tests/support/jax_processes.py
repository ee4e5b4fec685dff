"""Two JAX processes on this machine, as two hosts of one job: each runs a script with its
process id and the coordinator's port, and prints its result as its last line of JSON."""

from __future__ import annotations

import json
import subprocess
import sys

from support.backend_checks import jax_env
from support.service import free_port


def run_two_hosts(script: str, *args: str, devices: int, timeout: float = 280) -> list[dict]:
    """`python SCRIPT PROCESS_ID PORT *ARGS` for process ids 0 and 1 at once, JAX forced to
    `devices` CPU devices each; what each printed last, process 0's first."""
    env = jax_env(devices=devices)
    port = free_port()
    procs = [
        subprocess.Popen(
            [sys.executable, script, str(i), str(port), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(2)
    ]
    out = []
    try:
        for p in procs:
            stdout, stderr = p.communicate(timeout=timeout)
            assert p.returncode == 0, stderr[-3000:]
            out.append(json.loads(stdout.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return out

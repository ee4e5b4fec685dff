"""Every command on gs:// without Google Cloud credentials: one line saying what is missing and
the ways to provide it, exit 1, no traceback, and no wait on a network.

The commands run in a process whose environment holds no credentials and none of the local
GCS twin's variables, with a home folder of its own (no gcloud configuration), the GCE
metadata server pointed at a closed loopback port and every proxy variable at another, so
nothing can reach a network or wait on one."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLOSED = "127.0.0.1:9"  # the discard port: nothing listens on it here

COMMANDS = [
    ["inspect", "gs://tfpipe-nocreds/ds"],
    ["inspect", "gs://tfpipe-nocreds/ds", "--verify"],
    ["convert", "{table}", "gs://tfpipe-nocreds/out"],
    ["convert", "gs://tfpipe-nocreds/t.csv", "{tmp}/out1"],
    ["convert", "gs://tfpipe-nocreds/images", "{tmp}/out2"],
    ["convert", "gs://tfpipe-nocreds/images", "{tmp}/out3", "--engine", "beam"],
    ["bench", "--data", "gs://tfpipe-nocreds/ds", "--step-time-ms", "10", "--batch-size", "8"],
    ["bench", "--data", "gs://tfpipe-nocreds/train-*", "--step-time-ms", "10", "--batch-size", "8"],
    ["bench", "--from-profile", "gs://tfpipe-nocreds/logs", "--batch-size", "8"],
    ["bench", "--pipeline", "tabular", "--json", "gs://tfpipe-nocreds/report.json"],
    ["bench", "--pipeline", "tabular", "--data", "{tmp}/none", "--profile", "gs://tfpipe-nocreds/trace"],
    ["serve", "dispatcher", "--port", "0", "--work-dir", "gs://tfpipe-nocreds/dispatcher", "--allow-remote"],
]

SCRIPT = """
import contextlib, io, json, sys, time, traceback
from tfpipe.cli import main
out = []
for args in json.loads(sys.argv[1]):
    err = io.StringIO()
    start = time.monotonic()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(args)
        except BaseException:
            code = "raised"
            traceback.print_exc()
    out.append({"args": args, "code": code, "err": err.getvalue(), "seconds": time.monotonic() - start})
print(json.dumps(out))
"""


def no_credentials_env(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    proxy = f"http://{CLOSED}"
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": ROOT,
        "HOME": str(home),
        "CLOUDSDK_CONFIG": str(home / "gcloud"),
        "GCE_METADATA_HOST": CLOSED,
        "GCE_METADATA_IP": CLOSED,
        "NO_GCE_CHECK": "true",
        "https_proxy": proxy,
        "HTTPS_PROXY": proxy,
        "http_proxy": proxy,
        "HTTP_PROXY": proxy,
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }


@pytest.mark.slow
def test_every_command_on_gcs_without_credentials_says_so_in_one_line(tmp_path):
    (tmp_path / "t.csv").write_text("x,y\n1,0\n")
    commands = [[a.format(table=tmp_path / "t.csv", tmp=tmp_path) for a in c] for c in COMMANDS]
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(commands)],
        env=no_credentials_env(tmp_path),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=150,  # ~10 s here; TensorFlow's silent retries (serve, before) take minutes
    )
    assert run.returncode == 0, run.stderr[-3000:]
    for result in json.loads(run.stdout.splitlines()[-1]):
        err, args = result["err"], " ".join(result["args"])
        lines = [line for line in err.splitlines() if line.startswith("tfpipe ")]
        assert result["code"] == 1 and "Traceback" not in err, (args, err)
        assert len(lines) == 1 and "no Google Cloud credentials found" in lines[0], (args, err)
        assert (
            "gcloud auth application-default login" in lines[0]
            and "GOOGLE_APPLICATION_CREDENTIALS" in lines[0]
        )
        assert "gs://tfpipe-nocreds" in lines[0] and "--resume" not in lines[0], (args, lines[0])
        assert result["seconds"] < 20, (args, result["seconds"])  # no wait on a metadata server

"""Captures the command output the docs show, so it is never pasted by hand:

- `docs/captures/bench-imagenet.txt` (+ `.json`, and `docs/images/bench-imagenet.png`, the
  bench's own `--plot`): `tfpipe bench --pipeline=imagenet` on a fresh cache, as a new user
  runs it first;
- `docs/captures/bench-text.txt` (+ `.json`): `tfpipe bench --pipeline=text`, the same way;
- `docs/captures/inspect-text.txt`: `tfpipe convert` of 2,000 stdlib docstrings with a BPE of
  8,000 trained on them, then `tfpipe inspect` of the dataset.

Each capture starts with the date, the CPU, the cores, TensorFlow's version and the load
average before the command; a capture taken while the 1-minute load average was above
QUIET_LOAD says "captured under load — to be regenerated quietly". Run it on a quiet machine
from the repository's root, then `python docs/scripts/make_figures.py` (the stage waterfall is
drawn from bench-imagenet.json):

    python docs/scripts/capture.py            # about 5 minutes quiet on 2 cores

It runs this tree's tfpipe (PYTHONPATH), in a temporary folder with its own cache
(XDG_CACHE_HOME), at 100 columns.
"""

from __future__ import annotations

import datetime
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "docs" / "captures"
IMAGES = ROOT / "docs" / "images"
QUIET_LOAD = 0.5
UNDER_LOAD = "captured under load — to be regenerated quietly"
CACHE = "/tmp/tfpipe-capture/cache"  # short, so the printed paths are readable


def cpu() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    except OSError:
        names = []
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{names[0] if names else platform.processor() or platform.machine()}, {cores} cores"


def tf_version(env: dict[str, str]) -> str:
    out = subprocess.run(
        [sys.executable, "-c", "import tensorflow as tf; print(tf.__version__)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip().splitlines()[-1]


def settle(most_s: float = 300.0) -> None:
    """Waits (at most `most_s`) for the 1-minute load average to fall to QUIET_LOAD: the
    previous capture's own bench raises it, and it takes about 1.5 minutes to decay."""
    deadline = time.monotonic() + most_s
    while os.getloadavg()[0] > QUIET_LOAD and time.monotonic() < deadline:
        time.sleep(5)


def header(command: str, env: dict[str, str], note: str = "") -> tuple[str, bool]:
    settle()
    load = os.getloadavg()[0]
    quiet = load <= QUIET_LOAD
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"# Captured {when} by docs/scripts/capture.py on {cpu()}, TensorFlow {tf_version(env)},",
        f"# load average {load:.1f} before the run"
        + ("" if quiet else f": {UNDER_LOAD}")
        + (f"; {note}" if note else ""),
        f"$ {command}",
    ]
    return "\n".join(lines) + "\n", quiet


def run(args: list[str], cwd: str, env: dict[str, str]) -> str:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(
            f"{' '.join(args)} exited {done.returncode}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
    return done.stdout


def capture(name: str, command: list[str], cwd: str, env: dict[str, str], note: str = "") -> bool:
    """Runs `tfpipe COMMAND...` and writes its stdout under a header to captures/<name>.txt."""
    shown = " ".join(["tfpipe", *command])
    head, quiet = header(shown, env, note)
    out = run([sys.executable, "-m", "tfpipe", *command], cwd, env)
    (CAPTURES / f"{name}.txt").write_text(head + out.rstrip() + "\n")
    print(f"wrote docs/captures/{name}.txt ({'quiet' if quiet else 'under load'})")
    return quiet


def main() -> None:
    CAPTURES.mkdir(parents=True, exist_ok=True)
    IMAGES.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(CACHE, ignore_errors=True)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
        "COLUMNS": "100",
        "XDG_CACHE_HOME": CACHE,
        "MPLBACKEND": "Agg",
    }
    for name in ("TF_CPP_MIN_LOG_LEVEL", "http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        env.pop(name, None)
    quiet = []
    with tempfile.TemporaryDirectory() as work:
        fresh = f"on a fresh cache (XDG_CACHE_HOME={CACHE})"
        quiet.append(
            capture(
                "bench-imagenet",
                [
                    "bench",
                    "--pipeline=imagenet",
                    "--json",
                    "bench-imagenet.json",
                    "--plot",
                    "bench-imagenet.png",
                ],
                work,
                env,
                fresh,
            )
        )
        shutil.copy(os.path.join(work, "bench-imagenet.json"), CAPTURES / "bench-imagenet.json")
        shutil.copy(os.path.join(work, "bench-imagenet.png"), IMAGES / "bench-imagenet.png")
        quiet.append(
            capture("bench-text", ["bench", "--pipeline=text", "--json", "bench-text.json"], work, env, fresh)
        )
        shutil.copy(os.path.join(work, "bench-text.json"), CAPTURES / "bench-text.json")
        code = (
            "from tfpipe.synthetic import text; "
            "text.write_corpus('corpus', text.documents(2000), 'jsonl', files=2)"
        )
        run([sys.executable, "-c", code], work, env)
        run(
            [
                sys.executable,
                "-m",
                "tfpipe",
                "convert",
                "corpus/",
                "data/corpus",
                "--train-tokenizer",
                "bpe",
                "--vocab-size",
                "8000",
                "--quiet",
            ],
            work,
            env,
        )
        made = "after `tfpipe convert corpus/ data/corpus --train-tokenizer bpe --vocab-size 8000` of 2,000 docstrings"
        quiet.append(capture("inspect-text", ["inspect", "data/corpus"], work, env, made))
    if not all(quiet):
        print(f"some captures ran under load: they say so ({UNDER_LOAD!r}); run again on a quiet machine")


if __name__ == "__main__":
    main()

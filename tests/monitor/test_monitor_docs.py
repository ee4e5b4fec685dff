"""The monitor's example in docs/guides/bench.md ("Confirm with the monitor") runs as written on
both backends: tests/test_docs.py runs it on TensorFlow with the rest of the page (`-m docs`);
this runs the same block with KERAS_BACKEND=jax (skipped without JAX), in a folder holding
`data/photos` as the page's first block makes it.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from support.backend_checks import jax_env

pytestmark = [pytest.mark.slow, pytest.mark.jax]
ROOT = pathlib.Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guides" / "bench.md"


def monitor_block() -> str:
    """The first Python block of the guide's "Confirm with the monitor" section."""
    section = GUIDE.read_text().split("\n## Confirm with the monitor\n", 1)[1]
    return section.split("```python\n", 1)[1].split("\n```", 1)[0] + "\n"


def test_the_guides_example_trains_with_the_monitor_on_jax(tmp_path):
    pytest.importorskip("jax", reason='the JAX backend needs JAX: pip install "jax[cpu]"')
    from tfpipe.convert import convert
    from tfpipe.synthetic import folders

    folders.write_image_folder(
        str(tmp_path / "photos"), classes=3, per_class=40, imagenet_names=False, size=(160, 120)
    )
    convert(str(tmp_path / "photos"), str(tmp_path / "data" / "photos"))
    (tmp_path / "example.py").write_text(monitor_block())
    env = jax_env(devices=1)
    proc = subprocess.run(
        [sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True, timeout=280, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[-1].startswith("input wait "), proc.stdout[-2000:]
    waits = [float(v) for v in lines[-2].strip("[]").split(",")]
    assert len(waits) == 2 and all(0 <= w <= 1 for w in waits)
    assert sorted(os.listdir(tmp_path / "logs" / "train"))[0].startswith("events.out.tfevents")

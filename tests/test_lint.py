"""The tree stays formatted and lint-clean under the ruff settings in pyproject.toml."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "args",
    [("check", "--output-format", "concise", "."), ("format", "--check", ".")],
    ids=["check", "format"],
)
def test_ruff_is_clean(args: tuple[str, ...]) -> None:
    run = subprocess.run([sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, f"ruff {' '.join(args)} found:\n{run.stdout}{run.stderr}"

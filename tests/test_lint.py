"""The tree stays formatted and lint-clean under the ruff settings in pyproject.toml."""

from __future__ import annotations

import ast
import collections
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [("check", "--output-format", "concise", "."), ("format", "--check", ".")],
    ids=["check", "format"],
)
def test_ruff_is_clean(args: tuple[str, ...]) -> None:
    run = subprocess.run([sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, f"ruff {' '.join(args)} found:\n{run.stdout}{run.stderr}"


# Functions another branch of issue 24 shortens (bench); nothing may be added here.
LONG_BEING_SHORTENED = {
    "tfpipe/bench/config.py:__post_init__",
    "tfpipe/cli/bench.py:run",
}


def test_functions_are_short():
    """No function over 80 lines; over 60 only with a reason, a docstring paragraph "Long: ..."."""
    too_long = []
    for path in sorted((ROOT / "tfpipe").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                name = f"{path.relative_to(ROOT)}:{node.name}"
                reason = "\nLong: " in "\n" + (ast.get_docstring(node) or "")
                if (lines > 80 or (lines > 60 and not reason)) and name not in LONG_BEING_SHORTENED:
                    too_long.append(f"{name} ({lines} lines)")
    assert too_long == []


def test_modules_are_short():
    """No module over 500 lines (STYLE.md: one concept a module); a long one is split where its
    responsibilities part, not at the nearest line."""
    long = [
        f"{path.relative_to(ROOT)} ({n} lines)"
        for path in sorted((ROOT / "tfpipe").rglob("*.py"))
        if (n := len(path.read_text().splitlines())) > 500
    ]
    assert long == []


BASELINE = ROOT / "tests" / "typecheck_baseline.txt"


def diagnostic_key(line: str) -> str | None:
    """A mypy error line without its line number ("path: message  [code]"), so edits elsewhere
    in a file leave its baseline alone; None for a note or a summary."""
    path, sep, rest = line.partition(": error: ")
    if not sep:
        return None
    message = re.sub(r"on line \d+", "on line N", rest.strip())
    return f"{path.split(':', 1)[0]}: {message}"


def test_diagnostic_keys_leave_out_line_numbers():
    assert (
        diagnostic_key('tfpipe/a.py:12: error: Name "x" already defined on line 3  [no-redef]')
        == 'tfpipe/a.py: Name "x" already defined on line N  [no-redef]'
    )
    assert diagnostic_key("tfpipe/a.py:12: note: See https://mypy.rtfd.io") is None


@pytest.mark.slow  # cold (no .mypy_cache, as in CI) ~12 CPU-s; warm ~1.5 CPU-s
def test_types_check_against_the_baseline():
    """mypy (settings in pyproject.toml) finds nothing but what the baseline allows, and the
    baseline holds nothing that is no longer found: it may only shrink."""
    run = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode in (0, 1), f"mypy failed to run:\n{run.stdout}{run.stderr}"
    found = collections.Counter(k for line in run.stdout.splitlines() if (k := diagnostic_key(line)))
    allowed = collections.Counter(
        line for line in BASELINE.read_text().splitlines() if line.strip() and not line.startswith("#")
    )
    new, gone = found - allowed, allowed - found
    lines = [line for line in run.stdout.splitlines() if diagnostic_key(line) in new]
    assert not new, "mypy found (fix it; the baseline may only shrink):\n" + "\n".join(lines)
    assert not gone, f"no longer found: delete these lines from {BASELINE.name}:\n" + "\n".join(
        sorted(gone.elements())
    )

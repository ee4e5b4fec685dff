"""The README's quick start is what CI runs: exactly two commands, the second verbatim in .ci/run;
the fast lane and the index tests' own step are said beside it, and CI runs that step."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]


def quick_start_commands():
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return [
        line.strip()
        for block in re.findall(r"```bash\n(.*?)```", section, re.S)
        for line in block.splitlines()
        if line.strip()
    ]


def test_quick_start_has_exactly_two_commands():
    commands = quick_start_commands()
    assert len(commands) == 2, commands
    assert commands[0].endswith("tfpipe bench --pipeline=imagenet")
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command_verbatim():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert quick_start_commands()[1] in [line.strip() for line in ci]


def test_the_fast_lane_and_the_index_step_are_beside_the_test_command():
    section = (ROOT / "README.md").read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert '`python -m pytest -m "not slow"`' in section
    assert "`python -m pytest -m index`" in section
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert "python -m pytest -m index" in ci

"""The README is one screen a new user can act on: "Install and run" holds exactly two
commands (install and run the main job; install and run the tests), the second verbatim in
.ci/run, with the fast lane, the index tests' and the docs' own steps said beside it and run
by CI; the quick starts (images, tables, text) each fit 12 lines; the suite's measured time
is stated, in one marked place."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
CI = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]


def section(title: str) -> str:
    return README.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def commands(text: str) -> list[str]:
    """The shell commands of a section's bash blocks (comments are not commands)."""
    return [
        line.strip()
        for block in re.findall(r"```bash\n(.*?)```", text, re.S)
        for line in block.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]


def test_install_and_run_has_exactly_two_commands():
    found = commands(section("Install and run"))
    assert len(found) == 2, found
    assert found[0].startswith('pip install ".[') and found[0].endswith("tfpipe bench --pipeline=imagenet")
    assert found[1].startswith("pip install -e") and found[1].endswith("python -m pytest")


def test_the_main_command_installs_the_build_without_cuda_and_says_which_to_pick():
    """It installed the `tensorflow` extra, the CUDA build, which logs `failed call to cuInit` in
    every process on a machine without a GPU (the `cpu` extra's build logs no error there)."""
    text = " ".join(section("Install and run").split())
    assert (
        commands(section("Install and run"))[0] == 'pip install ".[cpu]" && tfpipe bench --pipeline=imagenet'
    )
    assert "`cpu` without an NVIDIA GPU" in text and "`tensorflow` (the CUDA build) with one" in text
    assert "`tpu` on a Cloud TPU VM" in text


def test_ci_runs_the_readme_test_command_verbatim():
    assert commands(section("Install and run"))[1] in CI


def test_the_fast_lane_and_the_own_steps_are_beside_the_test_command():
    text = section("Install and run")
    for lane in ('python -m pytest -m "not slow"', "python -m pytest -m index", "python -m pytest -m docs"):
        assert f"`{lane}`" in text, lane
    assert "python -m pytest -m index" in CI
    assert any(line.startswith("python -m pytest -m docs") for line in CI)
    assert any(line.startswith("mkdocs build --strict") for line in CI)


def test_python_version_and_suite_time_are_stated():
    text = section("Install and run")
    assert "Python 3.11 or newer" in text
    marked = re.findall(r"<!-- suite-time:.*?-->\n(.*?)<!-- /suite-time -->", README, re.S)
    assert len(marked) == 1 and re.search(r"\d+.\d+ minutes on 2 quiet cores", marked[0]), marked


def test_three_quick_starts_of_at_most_12_lines():
    text = section("Quick starts")
    starts = re.split(r"\n\*\*(Images|Tables|Text)\*\*", text)[1:]
    assert starts[::2] == ["Images", "Tables", "Text"]
    for name, body in zip(starts[::2], starts[1::2], strict=True):
        code = [line for block in re.findall(r"```\w+\n(.*?)```", body, re.S) for line in block.splitlines()]
        assert len(code) <= 12, (name, len(code))
        shell = commands(body)
        assert shell[0].startswith("tfpipe convert") and shell[-1].startswith("tfpipe bench"), name
        assert any("tfpipe.build(" in line for line in code) and any(".fit(" in line for line in code), name


def test_the_readme_stays_one_screen_of_sections():
    assert len(README.splitlines()) <= 200
    assert re.findall(r"^## (.+)$", README, re.M) == [
        "Install and run",
        "What a pipeline costs to start",
        "Extras",
        "Quick starts",
        "Documentation",
        "License",
    ]

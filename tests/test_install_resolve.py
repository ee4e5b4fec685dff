"""Installing tfpipe beside any TensorFlow distribution leaves exactly one: pip's own resolver,
asked for a dry run against the package index, as a user's `pip install` would be.

Needs the package index, and minutes of pip: not in the default run (pyproject's `-m "not
index"`), run by CI as its own step, `python -m pytest -m index`. Offline they skip, except
under CI (the CI variable set), where an unreachable index fails them.
"""

import concurrent.futures
import json
import os
import pathlib
import subprocess
import sys

import pytest
from packaging.utils import canonicalize_name

from tfpipe import _tf

from support.cli import CALLER_ENVIRON

ROOT = pathlib.Path(__file__).resolve().parents[1]
TF_DISTRIBUTIONS = {canonicalize_name(n) for n in _tf.DISTRIBUTIONS}

# Ten resolves, two at a time, take minutes on a loaded machine: more than the default timeout.
pytestmark = [pytest.mark.index, pytest.mark.slow, pytest.mark.timeout(1800)]

# pip reaches the index as the caller's shell would (its proxy, if it set one): the session
# removes the shell's proxies, and the local GCS fixture points https_proxy at its own proxy,
# which refuses every host but Google's storage names.
ENVIRON = CALLER_ENVIRON

# (what the user has or asks for, tfpipe's extras) -> the one TensorFlow distribution expected.
CASES = [
    *[
        (spec, extras, expected)
        for spec, expected in (
            ("tensorflow-tpu==2.20.0", "tensorflow-tpu"),  # a Cloud TPU VM
            ("tensorflow-cpu==2.20.*", "tensorflow-cpu"),
            ("tensorflow==2.21.*", "tensorflow"),
        )
        # Alone, and with every extra at once: what CI installs (the strictest combination).
        for extras in ((), ("beam", "profile", "test", "text"))
    ],
    (None, ("tpu",), "tensorflow-tpu"),
    (None, ("cpu",), "tensorflow-cpu"),
    (None, ("tensorflow",), "tensorflow"),
    (None, (), None),  # plain tfpipe installs no TensorFlow at all
    (None, ("text",), None),  # nor does the text extra (tensorflow-text would)
]


def resolve(spec, extras, tmp_path):
    """The distributions `pip install [spec] tfpipe[extras]` would install, name -> version."""
    report = tmp_path / f"report-{abs(hash((spec, extras)))}.json"
    target = f"{ROOT}[{','.join(extras)}]" if extras else str(ROOT)
    out = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet"]
        + ["--disable-pip-version-check", "--report", str(report)]
        + ([spec] if spec else [])
        + [target],
        capture_output=True,
        text=True,
        timeout=600,
        env=ENVIRON,
    )
    if out.returncode != 0:
        unreachable = any(
            s in out.stderr
            for s in ("Failed to establish a new connection", "Temporary failure in name resolution")
        )
        if unreachable and not os.environ.get("CI"):
            pytest.skip(f"the package index is unreachable: {out.stderr.strip().splitlines()[-1]}")
        pytest.fail(f"pip could not resolve {spec} {target}:\n{out.stderr}")
    installs = json.loads(report.read_text())["install"]
    return {canonicalize_name(i["metadata"]["name"]): i["metadata"]["version"] for i in installs}


@pytest.fixture(scope="module")
def resolved(tmp_path_factory):
    """Every case resolved once, two pip processes at a time (each is ~10 s, mostly CPU)."""
    tmp = tmp_path_factory.mktemp("resolve")
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        futures = {(s, e): pool.submit(resolve, s, e, tmp) for s, e, _ in CASES}
        return {key: f.result() for key, f in futures.items()}


@pytest.mark.parametrize(("spec", "extras", "expected"), CASES)
def test_exactly_one_tensorflow_distribution(resolved, spec, extras, expected):
    installs = resolved[spec, extras]
    assert canonicalize_name("tfpipe") in installs
    tf = sorted(n for n in installs if n in TF_DISTRIBUTIONS)
    assert tf == ([expected] if expected else []), (spec, extras, tf)
    if expected:
        assert _tf._release(installs[expected]) in _tf.SUPPORTED
    if expected == "tensorflow-tpu":
        assert "libtpu" in installs  # the TPU runtime comes from its own wheel
    for extra, package in (
        ("beam", "apache-beam"),
        ("profile", "xprof"),
        ("test", "pytest"),
        ("text", "sentencepiece"),
        ("text", "tokenizers"),
    ):
        assert (package in installs) == (extra in extras)

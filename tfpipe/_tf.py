"""The one place tfpipe imports TensorFlow, lazily, and checks which TensorFlow it got.

`import tfpipe` and `tfpipe --help` never start TensorFlow: TF import costs about 3 s and
probes for CUDA. Library code calls `tf()` where it needs the module; `plain`, `after` and
`tensor_text` are the small helpers every piece of tfpipe's graph code uses.

TensorFlow is not a dependency of tfpipe: it comes in several distributions (tensorflow,
tensorflow-cpu, tensorflow-tpu, ...) that all write the same `tensorflow/` package, so the user
picks one (`tfpipe[tensorflow]`, `tfpipe[cpu]`, `tfpipe[tpu]`) or keeps the one installed. On
first use `tf()` checks what it found: none is a one-line error naming the choices, a release
older than SUPPORTED is refused, a newer one is warned about, and two distributions of
different releases (whose files overwrote each other) are refused by name.

A library leaves TensorFlow's logging as its user configured it. Only the `tfpipe` command
opts in to hiding TF's C++ log noise, with `set_quiet(True)` before the first `tf()`.
"""

from __future__ import annotations

import os
import re
import sys
import warnings
from importlib import metadata
from types import ModuleType
from typing import Any, TypeAlias

from tfpipe.errors import (
    MissingExtraError,
    UnsupportedTensorFlowError,
    UntestedTensorFlowWarning,
)

# TensorFlow ships no types: to a type checker its values are Any. Graph code names them with
# these aliases, so that a signature says which parameters are tensors and which datasets
# (`def pack(ds: Dataset, length: Tensor) -> Dataset`); values of tfpipe's own types keep them.
Tensor: TypeAlias = Any  # a tf.Tensor, or a tf.Variable where a helper reads one
Dataset: TypeAlias = Any  # a tf.data.Dataset

# The TensorFlow releases the whole test suite runs on (.ci/run runs it on both): 2.20 is the
# newest TPU build (tensorflow-tpu has no 2.21), 2.21 the newest release.
SUPPORTED = ((2, 20), (2, 21))
INSTALL_CHOICES = (
    'pip install "tfpipe[tensorflow]" (or "tfpipe[cpu]" for tensorflow-cpu, "tfpipe[tpu]" for '
    "tensorflow-tpu on a Cloud TPU VM)"
)
# Distributions on PyPI that install the `tensorflow` package itself. On Windows `tensorflow`
# is a shim that depends on `tensorflow-intel` of the same release: that pair is one install.
DISTRIBUTIONS = (
    "tensorflow",
    "tensorflow-cpu",
    "tensorflow-gpu",
    "tensorflow-tpu",
    "tensorflow-intel",
    "tensorflow-macos",
    "tensorflow-aarch64",
    "tensorflow-cpu-aws",
    "tensorflow-rocm",
    "intel-tensorflow",
    "tf-nightly",
    "tf-nightly-cpu",
    "tf-nightly-gpu",
    "tf-nightly-tpu",
)
_SHIM_PAIRS = ({"tensorflow", "tensorflow-intel"},)

_quiet = False
_checked: ModuleType | None = None


def set_quiet(quiet: bool) -> None:
    """Hides TensorFlow's C++ logs and Python warnings when `quiet`, for the `tfpipe` command.

    Takes effect only when called before TensorFlow is first imported; it then sets
    TF_CPP_MIN_LOG_LEVEL (unless already set) and TF's logger level, process-wide.
    """
    global _quiet
    _quiet = quiet


def tf() -> ModuleType:
    """Returns the `tensorflow` module, importing and checking it on first use.

    Raises:
      MissingExtraError: no TensorFlow is installed; the message names the extras.
      UnsupportedTensorFlowError: TensorFlow is older than 2.20, or two distributions of
        different releases are installed over each other.
    """
    global _checked
    if _checked is not None:
        return _checked
    try:
        version = _imported_version()
    except ModuleNotFoundError as e:
        if e.name != "tensorflow":
            raise  # TensorFlow is there but broken: its own error says more.
        raise MissingExtraError(
            f"this part of tfpipe needs TensorFlow {_supported_text()}, and none is installed. "
            f"Install one: {INSTALL_CHOICES}. Received: {e}"
        ) from None
    problem = check_release(version, installed_distributions())
    if problem:
        warnings.warn(problem, UntestedTensorFlowWarning, stacklevel=2)
    _checked = sys.modules["tensorflow"]
    return _checked


def plain(fn: Any) -> Any:
    """Marks a dataset function as plain graph code: autograph would add seconds of
    transpiling per `build()` and tfpipe's functions have no Python control flow on tensors."""
    return tf().autograph.experimental.do_not_convert(fn)


def after(deps: list[Any], value: Any) -> Any:
    """`value` (graph code) once `deps` have run."""
    tf_ = tf()
    with tf_.control_dependencies(deps):
        return tf_.identity(value)


def tensor_text(template: str, *args: Any) -> Any:
    """`template` (graph code) with each "{}" replaced by a scalar tensor (strings as they are,
    unquoted): an error message that names a shard known only in the graph."""
    tf_ = tf()
    pieces = template.split("{}")
    parts: list[Any] = [pieces[0]]
    for arg, piece in zip(args, pieces[1:], strict=True):
        parts += [arg if arg.dtype == tf_.string else tf_.strings.as_string(arg), piece]
    return tf_.strings.join(parts)


def _imported_version() -> str:
    if "tensorflow" not in sys.modules and _quiet:
        # Level 3 hides INFO, WARNING and ERROR lines from the C++ runtime, including the
        # `cuInit` failure the CUDA build prints on a machine without a GPU.
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
        with _stderr_silenced():
            import tensorflow
        tensorflow.get_logger().setLevel("ERROR")
    import tensorflow

    return str(tensorflow.__version__)


def installed_distributions() -> dict[str, str]:
    """The installed distributions that provide the `tensorflow` package, name -> version."""
    found: dict[str, str] = {}
    for name in DISTRIBUTIONS:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def check_release(version: str, distributions: dict[str, str]) -> str | None:
    """Checks an imported TensorFlow `version` and the `distributions` that installed it.

    Returns:
      None when tfpipe supports it, else a warning to show (a newer, untested release; two
      distributions of the same release).

    Raises:
      UnsupportedTensorFlowError: older than SUPPORTED, or distributions of different releases.
    """
    releases = {_release(v) for v in distributions.values()}
    if len(releases) > 1 and set(distributions) not in _SHIM_PAIRS:
        listed = ", ".join(f"{n} {v}" for n, v in sorted(distributions.items()))
        raise UnsupportedTensorFlowError(
            "Expected one TensorFlow distribution. Received: several, of different releases, "
            f"installed over each other: {listed}. They write the same `tensorflow/` package, "
            "so its files now come from two releases. Keep one: pip uninstall -y "
            f"{' '.join(sorted(distributions))}, then install the one you want, e.g. "
            f"{INSTALL_CHOICES}"
        )
    release = _release(version)
    if release < SUPPORTED[0]:
        raise UnsupportedTensorFlowError(
            f"tfpipe needs TensorFlow {_supported_text()}. Received: TensorFlow {version}"
            f"{_from(distributions)}. Upgrade it, e.g. {INSTALL_CHOICES}"
        )
    if release > SUPPORTED[-1]:
        return (
            f"tfpipe is tested on TensorFlow {_supported_text()}; this is TensorFlow {version}"
            f"{_from(distributions)}, which it was not tested on"
        )
    if len(distributions) > 1 and set(distributions) not in _SHIM_PAIRS:
        return (
            f"several TensorFlow distributions are installed over each other "
            f"({', '.join(f'{n} {v}' for n, v in sorted(distributions.items()))}); they are the "
            "same release, but uninstalling one removes files the other needs: keep one"
        )
    return None


def _release(version: str) -> tuple[int, int]:
    match = re.match(r"(\d+)\.(\d+)", version)
    if not match:
        raise UnsupportedTensorFlowError(
            f"Expected a TensorFlow version such as 2.21.0. Received: {version!r}"
        )
    return int(match[1]), int(match[2])


def _supported_text() -> str:
    return " or ".join(f"{major}.{minor}" for major, minor in SUPPORTED)


def _from(distributions: dict[str, str]) -> str:
    return f" (the {', '.join(sorted(distributions))} distribution)" if distributions else ""


class _stderr_silenced:
    """Redirects fd 2 for the duration: some CUDA probing writes there before logging is set up."""

    def __enter__(self) -> None:
        try:
            sys.stderr.flush()
            self._saved = os.dup(2)
        except OSError:
            self._saved = None
            return
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)

    def __exit__(self, *exc: object) -> None:
        if self._saved is not None:
            os.dup2(self._saved, 2)
            os.close(self._saved)

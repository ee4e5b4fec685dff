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
from collections.abc import Callable
from importlib import metadata
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from tfpipe.errors import (
    MissingExtraError,
    UnsupportedTensorFlowError,
    UntestedTensorFlowWarning,
)

if TYPE_CHECKING:
    from tensorflow.python.data.ops.structured_function import StructuredFunctionWrapper

# TensorFlow ships no types: to a type checker its values are Any. Graph code names them with
# these aliases, so that a signature says which parameters are tensors and which datasets
# (`def pack(ds: Dataset, length: Tensor) -> Dataset`); values of tfpipe's own types keep them.
Tensor: TypeAlias = Any  # a tf.Tensor, or a tf.Variable where a helper reads one
Dataset: TypeAlias = Any  # a tf.data.Dataset
Feature: TypeAlias = Any  # a tf.io parse spec's entry: FixedLenFeature, RaggedFeature, ...
Nest: TypeAlias = Any  # a tf.data element: a Tensor, or a tuple or dict of them (tf.nest)
Options: TypeAlias = Any  # a tf.data.Options
DType: TypeAlias = Any  # a tf.DType
F = TypeVar("F", bound=Callable[..., Any])

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


def plain(fn: F) -> F:
    """Marks a dataset function as plain graph code, run on one device.

    Plain: autograph would add seconds of transpiling per `build()`, and tfpipe's functions
    have no Python control flow on tensors.

    One device: tf.data instantiates every dataset function again for each new iterator (each
    `iter()`, each Keras validation), by default as a multi-device function, which runs
    grappler and oneDNN's layout pass over its body, though tf.data runs it on the CPU alone.
    A function with the `experimental_ints_on_device` attribute is instantiated on its one
    device, without them: 3-4x less CPU per function and per node (benchmarks/RESULTS.md,
    issue 31 round 2). TensorFlow's own tf.data functions that run on one device set it the
    same way (prefetching_ops.py); tf.data offers no public argument for it, so `plain`
    marks the function and `_one_device_tracing` adds the attribute when tf.data traces it.
    """
    _one_device_tracing()
    wrapped = tf().autograph.experimental.do_not_convert(fn)
    wrapped.__dict__[_ONE_DEVICE] = True
    return wrapped


# The mark `plain` leaves on a dataset function (see `_one_device_tracing`).
_ONE_DEVICE = "_tfpipe_one_device"
_one_device_installed = False


def _one_device_tracing() -> None:
    """Makes tf.data trace the functions `plain` marked with `experimental_ints_on_device`.

    Installed once, around tf.data's StructuredFunctionWrapper (the one place tf.data traces
    a dataset function); any other function is traced exactly as before. A function with
    several outputs of which one is int32 keeps the multi-device path (its one trace wrapped
    again without the attribute, `_without_attribute`): TensorFlow 2.21's tf.data graph
    rewrites (which a later `with_options`, a distribution strategy or tf.data service may run)
    fail on it ("Expected only one fetch node"). Where TensorFlow's internals differ from what
    this expects, nothing is installed: functions then take the multi-device path, slower to
    start and otherwise the same.
    """
    global _one_device_installed
    if _one_device_installed:
        return
    _one_device_installed = True
    try:
        import inspect

        from tensorflow.python.data.ops import structured_function
    except ImportError:  # pragma: no cover - a TensorFlow without tf.data's internals
        return
    wrapper = structured_function.StructuredFunctionWrapper
    init = wrapper.__init__
    if "defun_kwargs" not in inspect.signature(init).parameters:  # pragma: no cover
        return
    int32 = tf().int32

    def __init__(
        self: StructuredFunctionWrapper, func: Callable[..., Nest], *args: object, **kwargs: Any
    ) -> None:  # TF's own
        if not getattr(func, _ONE_DEVICE, False) or kwargs.get("use_legacy_function"):
            init(self, func, *args, **kwargs)
            return
        attrs = {**(kwargs.get("defun_kwargs") or {}), "experimental_ints_on_device": True}
        init(self, func, *args, **{**kwargs, "defun_kwargs": attrs})
        outputs = self.function.outputs
        if len(outputs) > 1 and any(t.dtype == int32 for t in outputs):
            _without_attribute(self, "experimental_ints_on_device", lambda: init(self, func, *args, **kwargs))

    __init__.__wrapped__ = init  # type: ignore[attr-defined]
    wrapper.__init__ = __init__


def _without_attribute(
    wrapper: StructuredFunctionWrapper, name: str, trace_again: Callable[[], None]
) -> None:
    """Gives a StructuredFunctionWrapper the function it traced, without the attribute `name`.

    The traced graph is wrapped again with the other attributes (tracing once more cost as
    much as the first trace: ~0.3 s of CPU for the text packer, per build()). Where
    TensorFlow's internals differ from what this expects, `trace_again` traces the function
    again instead.
    """
    traced = wrapper._function
    try:
        from tensorflow.python.eager.polymorphic_function import concrete_function

        attrs = {k: v for k, v in traced.function_def.attr.items() if k != name}
        wrapper._function = concrete_function.ConcreteFunction.from_func_graph(
            traced.graph, traced.function_type, attrs
        )
        wrapper._function._arg_keywords = traced._arg_keywords
        wrapper._function._num_positional_args = traced._num_positional_args
        wrapper._tfpipe_traced = traced  # owns the graph the new function shares
    except (ImportError, AttributeError, TypeError):  # pragma: no cover - other internals
        wrapper._function = traced
        trace_again()


def after(deps: list[Tensor], value: Nest) -> Nest:
    """`value` (graph code) once `deps` have run."""
    tf_ = tf()
    with tf_.control_dependencies(deps):
        return tf_.identity(value)


def tensor_text(template: str, *args: Tensor) -> Tensor:
    """`template` (graph code) with each "{}" replaced by a scalar tensor (strings as they are,
    unquoted): an error message that names a shard known only in the graph."""
    tf_ = tf()
    pieces = template.split("{}")
    parts: list[Tensor | str] = [pieces[0]]
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

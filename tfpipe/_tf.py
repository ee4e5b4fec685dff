"""The one place tfpipe imports TensorFlow, lazily.

`import tfpipe` and `tfpipe --help` never start TensorFlow: TF import costs about 3 s and
probes for CUDA. Library code calls `tf()` where it needs the module.

A library leaves TensorFlow's logging as its user configured it. Only the `tfpipe` command
opts in to hiding TF's C++ log noise, with `set_quiet(True)` before the first `tf()`.
"""

from __future__ import annotations

import os
from types import ModuleType

_quiet = False


def set_quiet(quiet: bool) -> None:
    """Hides TensorFlow's C++ logs and Python warnings when `quiet`, for the `tfpipe` command.

    Takes effect only when called before TensorFlow is first imported; it then sets
    TF_CPP_MIN_LOG_LEVEL (unless already set) and TF's logger level, process-wide.
    """
    global _quiet
    _quiet = quiet


def tf() -> ModuleType:
    """Returns the `tensorflow` module, importing it on first use."""
    import sys

    if "tensorflow" not in sys.modules and _quiet:
        # Level 3 hides INFO, WARNING and ERROR lines from the C++ runtime, including the
        # `cuInit` failure the CUDA build prints on a machine without a GPU.
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
        with _stderr_silenced():
            import tensorflow
        tensorflow.get_logger().setLevel("ERROR")
    import tensorflow

    return tensorflow


class _stderr_silenced:
    """Redirects fd 2 for the duration: some CUDA probing writes there before logging is set up."""

    def __enter__(self) -> None:
        import sys

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

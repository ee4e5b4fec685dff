"""The one place tfpipe imports TensorFlow, lazily, with its C++ log noise hidden.

`import tfpipe` and `tfpipe --help` never start TensorFlow: TF import costs about 3 s and
probes for CUDA. Library code calls `tf()` where it needs the module.
"""

from __future__ import annotations

import os
from types import ModuleType

_quiet = True


def set_verbose(verbose: bool) -> None:
    """Shows TensorFlow's C++ logs when `verbose`; must be called before the first `tf()`."""
    global _quiet
    _quiet = not verbose


def tf() -> ModuleType:
    """Returns the `tensorflow` module, importing it on first use."""
    import sys

    if "tensorflow" not in sys.modules and _quiet:
        # Level 3 hides INFO, WARNING and ERROR lines from the C++ runtime, including the
        # `cuInit` failure the CUDA build prints on a machine without a GPU.
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
        with _stderr_silenced():
            import tensorflow  # noqa: F401
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

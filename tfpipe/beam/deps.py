"""Apache Beam is an optional extra: this module is the one place that imports it on demand."""

from __future__ import annotations

import importlib
from types import ModuleType

from tfpipe.errors import MissingExtraError

__all__ = ["INSTALL_HINT", "MissingExtraError", "require_beam"]

INSTALL_HINT = 'pip install "tfpipe[beam]"'


def require_beam() -> ModuleType:
    """Returns the `apache_beam` module.

    Raises:
      MissingExtraError: Apache Beam is not installed; the message names the extra.
    """
    try:
        return importlib.import_module("apache_beam")
    except ImportError as e:
        raise MissingExtraError(
            f"engine='beam' (--engine beam) needs Apache Beam, which is not installed. Expected the "
            f"apache_beam module. Received: {type(e).__name__}: {e}. Install the extra: {INSTALL_HINT} "
            '(for Dataflow also `pip install "apache-beam[gcp]"` of the same version).'
        ) from e

"""Tools for testing code that uses tfpipe: `LocalGCS` (a GCS emulator on loopback that both
TensorFlow and the google-cloud-storage client talk to, shapable like GCS over a network) and
`fake_data` (ImageNet-like photos, image trees with odd files, mixed-type tables). Each loads
on first use."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

__all__ = ["LocalGCS", "fake_data"]

if TYPE_CHECKING:
    from tfpipe.testing import fake_data
    from tfpipe.testing.gcs import LocalGCS


def __getattr__(name: str) -> type[LocalGCS] | ModuleType:
    if name == "LocalGCS":
        from tfpipe.testing.gcs import LocalGCS  # the GCS twin's modules (~60 ms): on first use

        return LocalGCS
    if name == "fake_data":
        return importlib.import_module("tfpipe.testing.fake_data")
    raise AttributeError(f"module 'tfpipe.testing' has no attribute {name!r}")

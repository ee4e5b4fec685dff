"""tfpipe: sharded TFRecords, tuned tf.data pipelines, and an input-bound benchmark.

The public API is these names; everything else may move. Importing tfpipe does not import
TensorFlow: each name below loads its module on first use.

Example:
  >>> import tfpipe
  >>> manifest = tfpipe.convert("images/", "gs://bucket/imagenet")
  >>> ds = tfpipe.build("gs://bucket/imagenet", preset="imagenet", batch_size=256)
  >>> model.fit(ds, steps_per_epoch=tfpipe.steps_per_epoch("gs://bucket/imagenet", 256))
  >>> strategy = tfpipe.strategy()  # TPUStrategy on a TPU VM, else GPUs, else the default
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tfpipe._version import __version__

_EXPORTS = {
    "ShardConfig": "tfpipe.convert",
    "ConvertConfig": "tfpipe.convert",
    "Tick": "tfpipe.convert",
    "Manifest": "tfpipe.format.manifest",
    "Schema": "tfpipe.format.schema",
    "Field": "tfpipe.format.schema",
    "build": "tfpipe.pipeline",
    "plan": "tfpipe.pipeline",
    "Pipeline": "tfpipe.pipeline",
    "steps_per_epoch": "tfpipe.pipeline",
    "skipped": "tfpipe.pipeline",
    "SkipCounts": "tfpipe.pipeline",
    "PipelineConfig": "tfpipe.pipeline",
    "Hosts": "tfpipe.pipeline",
    "Order": "tfpipe.pipeline",
    "Tuning": "tfpipe.pipeline",
    "Remainder": "tfpipe.pipeline",
    "Integrity": "tfpipe.pipeline",
    "DataService": "tfpipe.pipeline",
    "Mixture": "tfpipe.pipeline",
    "Preset": "tfpipe.presets",
    "register_preset": "tfpipe.presets",
    "attention_mask": "tfpipe.modalities.text.preset",
    "BenchConfig": "tfpipe.bench",
    "Report": "tfpipe.bench",
    "strategy": "tfpipe.devices",
}
# Every error and warning tfpipe raises, from their one module (`except tfpipe.ConfigError`,
# `warnings.filterwarnings(..., category=tfpipe.DefaultWarning)`).
_ERRORS = (
    "TfpipeError",
    "ConfigError",
    "DataError",
    "UndecodableImage",
    "ProfileError",
    "UnknownFormat",
    "ManifestError",
    "DestinationError",
    "StorageError",
    "AlreadyExists",
    "CredentialsError",
    "InvalidPath",
    "MissingExtraError",
    "UnsupportedTensorFlowError",
    "TpuUnavailableError",
    "ServiceError",
    "PipelineFailed",
    "CommandUnavailable",
    "TfpipeWarning",
    "DefaultWarning",
    "ShardingWarning",
    "EmptyClassWarning",
    "UntestedTensorFlowWarning",
    "TilingWarning",
    "TpuBatchWarning",
)
_EXPORTS |= dict.fromkeys(_ERRORS, "tfpipe.errors")

# `convert` and `bench` are functions that share their names with the subpackages holding them.
# Importing a subpackage binds it as an attribute of its parent, so the packages are imported
# here first and the functions bound after: later submodule imports then leave these names
# alone. Both packages import no TensorFlow at module level.
from tfpipe.bench import bench  # noqa: E402 - after _EXPORTS, see above
from tfpipe.convert import convert  # noqa: E402

__all__ = sorted([*_EXPORTS, "convert", "bench", "__version__"])

# Public submodules loaded on first use, outside __all__ (some import TensorFlow or an extra):
# `tfpipe.presets` (the preset objects Text, ImageNet, Tabular), `tfpipe.resume` (Position, the
# Keras callback), `tfpipe.monitor` (InputWait, the Keras callback that measures input wait in
# fit), `tfpipe.service` (distribute, the servers), `tfpipe.beam` (WriteDataset; the beam extra),
# `tfpipe.testing` (LocalGCS, fake_data).
_SUBMODULES = ("presets", "resume", "monitor", "service", "beam", "testing")

if TYPE_CHECKING:
    # not beam: only Beam imports it (test_imports)
    from tfpipe import monitor, presets, resume, service, testing
    from tfpipe.bench import BenchConfig, Report
    from tfpipe.convert import ConvertConfig, ShardConfig, Tick
    from tfpipe.devices import strategy
    from tfpipe.errors import (
        AlreadyExists,
        CommandUnavailable,
        ConfigError,
        CredentialsError,
        DataError,
        DefaultWarning,
        DestinationError,
        EmptyClassWarning,
        InvalidPath,
        ManifestError,
        MissingExtraError,
        PipelineFailed,
        ProfileError,
        ServiceError,
        ShardingWarning,
        StorageError,
        TfpipeError,
        TfpipeWarning,
        TpuBatchWarning,
        TpuUnavailableError,
        UndecodableImage,
        UnknownFormat,
        UnsupportedTensorFlowError,
        UntestedTensorFlowWarning,
    )
    from tfpipe.format.manifest import Manifest
    from tfpipe.format.schema import Field, Schema
    from tfpipe.modalities.text.preset import attention_mask
    from tfpipe.pipeline import (
        DataService,
        Hosts,
        Integrity,
        Mixture,
        Order,
        Pipeline,
        PipelineConfig,
        Remainder,
        SkipCounts,
        Tuning,
        build,
        plan,
        skipped,
        steps_per_epoch,
    )
    from tfpipe.presets import Preset, register_preset


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"tfpipe.{name}")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tfpipe' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__

"""Every error and warning tfpipe raises on purpose: the one place to find them.

Each error says what was expected, what was received, and where. Every one is a
`TfpipeError`, and most also the built-in error they refine (`ConfigError` is a `ValueError`),
so `except tfpipe.ConfigError` and `except ValueError` both catch a bad option. Every warning
is a `TfpipeWarning` (a `UserWarning`), so
`warnings.filterwarnings("ignore", category=tfpipe.TfpipeWarning)` silences them all, and
`category=tfpipe.DefaultWarning` one kind. `tfpipe.<Name>` reaches each of them; the modules
that raise them also keep them under their old names.
"""

from __future__ import annotations


class TfpipeError(Exception):
    """Base class for every error tfpipe raises on purpose."""


class ConfigError(TfpipeError, ValueError):
    """An option or argument has an invalid value."""


class DataError(TfpipeError, ValueError):
    """Input data is malformed: names the file, shard, record or column."""


class UndecodableImage(DataError):
    """An input file is not an image tfpipe can decode; `reason` is short, for the skip list.

    Args:
      reason: e.g. "empty file", "truncated JPEG: image file is truncated (0 bytes not
        processed)", "not an image: starts with b'hello'".
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ProfileError(DataError):
    """A profile that cannot give a training step time: refused by name."""


class UnknownFormat(ProfileError):
    """An output of the Profiler that tfpipe does not know how to read."""


class ManifestError(TfpipeError, ValueError):
    """A manifest is missing, unreadable or unsafe."""


class DestinationError(TfpipeError):
    """The conversion destination holds a finished or a partial dataset."""


class StorageError(TfpipeError, OSError):
    """A read or write failed for a reason other than a missing file."""


class AlreadyExists(StorageError):
    """An atomic write found its destination taken."""


class CredentialsError(TfpipeError):
    """gs:// needs Google Cloud credentials, and none were found (or they were refused)."""


class InvalidPath(TfpipeError, ValueError):
    """A path that names no place: `gs://` without a bucket, or a bucket name GCS refuses."""


class MissingExtraError(TfpipeError, ImportError):
    """An optional dependency that the requested feature needs is not installed."""


class UnsupportedTensorFlowError(TfpipeError, ImportError):
    """The installed TensorFlow is older than tfpipe supports, or mixes two releases."""


class TpuUnavailableError(TfpipeError, RuntimeError):
    """Something says a TPU is attached, but TensorFlow could not connect to it."""


class ServiceError(TfpipeError):
    """A tf.data service peer was lost while a client read from it."""


class PipelineFailed(TfpipeError):
    """A Beam pipeline failed on its workers; the message ends with the worker's error."""


class CommandUnavailable(TfpipeError):
    """A command needs an optional package that is not installed."""


class TfpipeWarning(UserWarning):
    """Base class for every warning tfpipe gives."""


class DefaultWarning(TfpipeWarning):
    """A default changed the data, e.g. the label offset of records without a manifest."""


class ShardingWarning(TfpipeWarning):
    """Input pipelines share files by record, not by file (fewer files than pipelines)."""


class EmptyClassWarning(TfpipeWarning):
    """A class whose image files were all skipped: it is in the class list with 0 examples."""


class UntestedTensorFlowWarning(TfpipeWarning):
    """The installed TensorFlow is newer than the releases tfpipe is tested on."""


class TilingWarning(TfpipeWarning):
    """Text batches off a TPU's tiling: sequence_length not a multiple of 128, or the batch per
    replica not a multiple of 8."""


class TpuBatchWarning(TfpipeWarning):
    """The batch per TPU core is not a multiple of 128, so the matrix units run partly empty."""


def field_error(cls: type[TfpipeError], field: str, expected: str, value: object) -> TfpipeError:
    """Builds the standard message for an invalid config field."""
    return cls(f"{field} must be {expected}. Received: {field}={value!r}")

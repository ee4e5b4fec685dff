"""Errors tfpipe raises. Each message says what was expected, what was received, and where."""

from __future__ import annotations


class TfpipeError(Exception):
    """Base class for every error tfpipe raises on purpose."""


class ConfigError(TfpipeError, ValueError):
    """An option or argument has an invalid value."""


class DataError(TfpipeError, ValueError):
    """Input data is malformed: names the file, shard, record or column."""


class ManifestError(TfpipeError, ValueError):
    """A manifest is missing, unreadable or unsafe."""


class DestinationError(TfpipeError):
    """The conversion destination holds a finished or a partial dataset."""


class MissingExtraError(TfpipeError, ImportError):
    """An optional dependency that the requested feature needs is not installed."""


def field_error(cls: type[TfpipeError], field: str, expected: str, value: object) -> TfpipeError:
    """Builds the standard message for an invalid config field."""
    return cls(f"{field} must be {expected}. Received: {field}={value!r}")

"""Where `tfpipe bench` writes its report files, checked before anything is measured.

A bench takes minutes; a typo in `--json` or `--plot` should cost seconds. The folder must
already exist: tfpipe creates no folders for report files.
"""

from __future__ import annotations

import os

from tfpipe import storage
from tfpipe.errors import ConfigError


def check_writable(path: str, field: str) -> None:
    """Raises ConfigError unless a file can be written at `path` (local or gs://).

    Locally `storage.write_problem` proves the folder writable; on gs:// the form is checked,
    and that credentials are found (`CredentialsError` otherwise).
    """

    def bad(why: str) -> ConfigError:
        return ConfigError(
            f"{field} must be a file path in an existing, writable folder; {why}. Received: {field}={path!r}"
        )

    if not path or path.endswith(("/", os.sep)):
        raise bad("it names a folder, not a file")
    if storage.is_gcs(path):
        if not storage.split_gcs(path)[1]:
            raise bad("it names a bucket, not an object in it")
        storage.check_credentials(path)
        return
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise bad(f"the folder {parent} does not exist (tfpipe creates no folders for it)")
    if os.path.isdir(path):
        raise bad("it is a folder")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise bad("the file exists and is not writable")
    why = storage.write_problem(parent)
    if why:
        raise bad(f"cannot write in {parent} ({why})")


PLOT_FORMATS = {".png": "png", ".jpg": "jpeg", ".jpeg": "jpeg", ".svg": "svg", ".pdf": "pdf"}
"""The plot formats by file extension (matplotlib writes each; JPEG through Pillow)."""
_NOT_JSON = (".gz", ".bz2", ".xz", ".zip", ".zst", ".csv", ".parquet", *PLOT_FORMATS)


def plot_format(path: str, field: str = "plot (--plot)") -> str:
    """The format a plot at `path` is written in, as its extension names it.

    Raises:
      ConfigError: an extension that names no format tfpipe writes plots in (the bytes would
        not be what the name says).
    """
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in PLOT_FORMATS:
        raise ConfigError(
            f"{field} writes the format its file extension names: one of {', '.join(PLOT_FORMATS)}. "
            f"Received: {path!r}, {f'with the extension {suffix}' if suffix else 'without an extension'}"
        )
    return PLOT_FORMATS[suffix]


def check_json_name(path: str, field: str = "json (--json)") -> None:
    """Refuses a JSON report path whose extension names another format: the report is written
    as plain JSON text, which a `.gz` or `.png` name would misdescribe."""
    suffix = os.path.splitext(path)[1].lower()
    if suffix in _NOT_JSON:
        raise ConfigError(
            f"{field} is written as plain JSON text. Received: {path!r}, whose extension {suffix} "
            "names another format; name it .json."
        )


def check_folder(path: str, field: str) -> None:
    """Raises ConfigError unless `path` is a folder tfpipe can write in, or can be made as one
    inside an existing folder (local only; gs:// paths need no folders), as
    `storage.write_problem` proves it."""
    if storage.is_gcs(path):
        storage.check_credentials(path)  # TensorFlow's profiler would retry in silence
        return
    if os.path.exists(path) and not os.path.isdir(path):
        raise ConfigError(f"{field} must be a folder; it is a file. Received: {path!r}")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise ConfigError(
            f"{field} must be a folder inside an existing folder; {parent} does not "
            f"exist (tfpipe creates no parent folders). Received: {path!r}"
        )
    # The profiler writes DIR/plugins/profile/...: probe where it would make the first folder.
    where = path if os.path.isdir(path) else parent
    why = storage.write_problem(where)
    if why:
        raise ConfigError(
            f"{field} must be a folder tfpipe can write in; cannot write in {where} ({why}). Received: {path!r}"
        )

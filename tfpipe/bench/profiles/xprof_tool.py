"""The TensorFlow Profiler (xprof), an optional extra: its own analysis of raw `.xplane.pb` files.

tfpipe does no step analysis of its own: xprof's `xspace_to_tool_data(paths, "overview_page",
...)` turns every host's XSpace into the overview page's JSON, which `tables` reads. xprof
reads the files through symbolic links (local) or downloaded copies (gs://) in a temporary
folder, because it writes a cache file beside what it reads: the user's folder is left as it was.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from types import ModuleType

from tfpipe import storage
from tfpipe.bench.profiles.analysis import ProfileError
from tfpipe.bench.profiles.tables import UnknownFormat
from tfpipe.errors import MissingExtraError

INSTALL_HINT = 'pip install "tfpipe[profile]"'
# The xprof release line whose output tfpipe was written and tested against.
TESTED = "2.24"


def require(what: str) -> ModuleType:
    """Imports `xprof.<what>`, or says which extra installs it."""
    try:
        return importlib.import_module(f"xprof.{what}")
    except ImportError as e:
        raise MissingExtraError(
            "Reading this profile needs the TensorFlow Profiler (the xprof package), which is not "
            f"installed. Install the extra: {INSTALL_HINT}. Received: {type(e).__name__}: {e}"
        ) from None


def version() -> str | None:
    """The installed xprof's version, or None."""
    from importlib import metadata

    try:
        return metadata.version("xprof")
    except metadata.PackageNotFoundError:
        return None


def known_formats() -> str:
    """Which Profiler outputs tfpipe reads, for an error about one it does not."""
    return (
        f"tfpipe reads the output of xprof {TESTED} (installed: {version() or 'none'}) and the older "
        "TensorBoard profile plugin's overview_page/input_pipeline .pb and JSON files."
    )


def overview_page(paths: list[str]) -> object:
    """xprof's overview page for these `.xplane.pb` files (all hosts of one run), parsed.

    Raises:
      MissingExtraError: xprof is not installed.
      ProfileError: xprof could not read a file (it is corrupt or empty).
      UnknownFormat: xprof returned something that is not the JSON it writes.
    """
    raw_to_tool_data = require("convert.raw_to_tool_data")
    ver = version() or "unknown"
    for path in paths:
        if storage.size(path) == 0:
            raise ProfileError(f"{path} is empty: a corrupt profile (an interrupted write?)")
    with tempfile.TemporaryDirectory(prefix="tfpipe-xplane-") as tmp:
        local = [_stage(path, tmp, i) for i, path in enumerate(paths)]
        with _captured_stderr() as log:
            # use_saved_result=False: never a cache from an earlier, different set of files.
            result = raw_to_tool_data.xspace_to_tool_data(local, "overview_page", {"use_saved_result": False})
    data = result[0] if isinstance(result, tuple) else result
    if data is None:
        reason = _last_error(log.text) or "no reason given"
        for original, copy in zip(paths, local, strict=True):
            reason = reason.replace(copy, original)
        raise ProfileError(
            f"xprof {ver} could not read {', '.join(paths)}: a corrupt profile (truncated, or not an "
            f"XSpace). xprof says: {reason}"
        )
    try:
        return json.loads(data)
    except (TypeError, ValueError) as e:
        raise UnknownFormat(
            f"xprof {ver} returned an overview page for {', '.join(paths)} that is not JSON "
            f"({type(data).__name__}, {str(data)[:60]!r}). {known_formats()} Received: {e}"
        ) from None


def _stage(path: str, tmp: str, index: int) -> str:
    """A path xprof may read `path` from, in `tmp`, keeping the host name it is known by."""
    name = storage.basename(path)
    folder = os.path.join(tmp, str(index))  # two hosts of one name in different runs stay apart
    os.makedirs(folder)
    local = os.path.join(folder, name)
    if storage.is_gcs(path):
        # A TPU host's XSpace can run to gigabytes: streamed to disk, never held in memory.
        with storage.open_read(path) as src, open(local, "wb") as dst:
            shutil.copyfileobj(src, dst, 8 << 20)
    else:
        os.symlink(os.path.abspath(path), local)
    return local


class _Log:
    text = ""


@contextlib.contextmanager
def _captured_stderr() -> Iterator[_Log]:
    """Collects what xprof's C++ code writes to file descriptor 2 while the block runs.

    xprof logs every phase there; it is kept only to explain a failure.
    """
    log = _Log()
    with tempfile.TemporaryFile() as sink:
        try:
            saved = os.dup(2)
        except OSError:  # no stderr to redirect (a daemon): let xprof write wherever it does
            yield log
            return
        os.dup2(sink.fileno(), 2)
        try:
            yield log
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            log.text = sink.read().decode("utf-8", "replace")


def _last_error(text: str) -> str:
    """The last error line of a glog-style log ("E0000 ... file.cc:119] message")."""
    lines = [line for line in text.splitlines() if line[:1] in "EF" and "] " in line]
    return lines[-1].split("] ", 1)[1].strip() if lines else ""

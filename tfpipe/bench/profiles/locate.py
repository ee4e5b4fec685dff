"""Where the profile is: the run folder and each host's files, on local disk or gs://.

The Profiler writes `LOGDIR/plugins/profile/<run>/<host>.xplane.pb`, one file per host, one
run folder per capture, named by its start time (`2024_05_01_12_30_00`). Keras's TensorBoard
callback puts it under `LOGDIR/train/`. Older folders also hold the pre-converted
`<host>.overview_page.pb` / `.input_pipeline.pb`, and the converter's JSON of the same pages.
"""

from __future__ import annotations

import dataclasses
import os
import re

from tfpipe import storage
from tfpipe.bench.profiles.analysis import ProfileError
from tfpipe.errors import ConfigError

# File suffixes the Profiler writes, by what they hold, in the order one host's files are read.
XPLANE = ".xplane.pb"
SUFFIXES = {
    XPLANE: "xplane",
    ".overview_page.pb": "overview_page.pb",
    ".input_pipeline.pb": "input_pipeline.pb",
    ".overview_page.json": "overview_page.json",
    ".overview_page.json.gz": "overview_page.json.gz",
    ".input_pipeline.json": "input_pipeline.json",
    ".input_pipeline.json.gz": "input_pipeline.json.gz",
    ".input_pipeline_analyzer.json": "input_pipeline_analyzer.json",
    ".input_pipeline_analyzer.json.gz": "input_pipeline_analyzer.json.gz",
}
# The names tf.profiler and xprof give run folders: the capture's start time.
_RUN_NAME = re.compile(r"^\d{4}_\d{2}_\d{2}_\d{2}_\d{2}_\d{2}")


@dataclasses.dataclass(frozen=True, slots=True)
class Located:
    """The profile files to read.

    Attributes:
      run: the run folder's name; None when a single file was given.
      runs: every run found beside it, oldest first (just `run` for a run folder given).
      files: host name -> {kind -> path}, kinds as in SUFFIXES' values.
    """

    run: str | None
    runs: tuple[str, ...]
    files: dict[str, dict[str, str]]


def profile_kind(name: str) -> tuple[str, str] | None:
    """(host, kind) for a profile file's name, or None for any other file."""
    for suffix, kind in sorted(SUFFIXES.items(), key=lambda kv: -len(kv[0])):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)], kind
    return None


def locate(path: str, run: str | None = None) -> Located:
    """Finds the run to read under `path`: a log dir, a `plugins/profile` folder, a run folder,
    or one file.

    Args:
      path: local or gs://.
      run: the run folder to read; None reads the newest.

    Raises:
      ConfigError: `path` does not exist, or `run` is not among the runs there.
      ProfileError: no profile under `path`, or a file that is not one.
    """
    entries = _entries(path)
    if entries is None:  # a file
        found = profile_kind(storage.basename(path))
        if found is None:
            raise ProfileError(
                f"from_profile={path!r} (--from-profile) is not a profile file: expected a name ending "
                f"in one of {sorted(SUFFIXES)}"
            )
        if run is not None:
            raise ConfigError(
                f"profile_run={run!r} (--profile-run) picks a run of a log dir, but --from-profile names "
                f"one file, {path!r}. Pass the log dir, or leave --profile-run out"
            )
        host, kind = found
        return Located(None, (), {host: {kind: path}})
    here = _profile_files(path, entries)
    if here:  # a run folder itself
        name = storage.basename(path.rstrip("/"))
        if run is not None and run != name:
            raise ConfigError(
                f"profile_run={run!r} (--profile-run), but --from-profile names the run folder {name!r} "
                f"itself ({path!r})"
            )
        return Located(name, (name,), here)
    runs = _runs(path, entries)
    if not runs:
        raise ProfileError(
            f"No profile in {path!r}: looked for <host>{XPLANE} (or the Profiler's older "
            f"overview_page/input_pipeline files) in {storage.join(path, 'plugins/profile/<run>')}, "
            f"{storage.join(path, '<dir>/plugins/profile/<run>')} (Keras writes train/) and "
            f"{storage.join(path, '<run>')}. Profile a few training steps into it first, e.g. Keras "
            "TensorBoard(log_dir, profile_batch=(10, 15))"
        )
    order = sorted(runs, key=lambda name: (bool(_RUN_NAME.match(name)), name))
    if run is None:
        if len(order) > 1 and not _RUN_NAME.match(order[-1]):
            raise ConfigError(
                f"{path!r} holds several runs and not all are named by time, so none is the newest "
                f"by name: pass --profile-run, one of {order}"
            )
        run = order[-1]
    elif run not in runs:
        raise ConfigError(
            f"profile_run must be one of the runs in {path!r}: {order}. Received: profile_run={run!r}"
        )
    return Located(run, tuple(order), runs[run])


def _entries(path: str) -> list[tuple[str, bool]] | None:
    """(name, is_folder) under a folder; None when `path` is a file.

    Raises:
      ConfigError: nothing is at `path`.
    """
    missing = ConfigError(
        f"from_profile={path!r} (--from-profile) does not exist: expected a TensorBoard log dir, a "
        "plugins/profile/<run> folder or a profile file"
    )
    if storage.is_gcs(path):
        try:
            entries = [(name, is_dir) for name, is_dir, *_ in storage.gcs_entries(path)]
        except FileNotFoundError:
            raise missing from None
        if entries:
            return entries
        if storage.exists(path):
            return None
        raise missing
    if os.path.isfile(path):
        return None
    if not os.path.isdir(path):
        raise missing
    return [(name, os.path.isdir(os.path.join(path, name))) for name in sorted(os.listdir(path))]


def _profile_files(folder: str, entries: list[tuple[str, bool]]) -> dict[str, dict[str, str]]:
    files: dict[str, dict[str, str]] = {}
    for name, is_dir in entries:
        found = None if is_dir else profile_kind(name)
        if found:
            files.setdefault(found[0], {})[found[1]] = storage.join(folder, name)
    return files


def _runs(path: str, entries: list[tuple[str, bool]]) -> dict[str, dict[str, dict[str, str]]]:
    """Run name -> its files, for runs in `path/plugins/profile`, `path/*/plugins/profile`, or
    `path` itself (a plugins/profile folder)."""
    containers = [storage.join(path, "plugins", "profile")]
    containers += [storage.join(path, name, "plugins", "profile") for name, is_dir in entries if is_dir]
    containers.append(path)
    runs: dict[str, dict[str, dict[str, str]]] = {}
    for container in containers:
        listing = _entries(container) if _is_folder(container) else None
        for name, is_dir in listing or []:
            if not is_dir or name in runs:
                continue
            run_dir = storage.join(container, name)
            files = _profile_files(run_dir, _entries(run_dir) or [])
            if files:
                runs[name] = files
        if runs:
            return runs
    return runs


def _is_folder(path: str) -> bool:
    if storage.is_gcs(path):
        return bool(storage.gcs_entries(path))
    return os.path.isdir(path)

"""`read(path)`: a profiled training run's step time and input share, by the Profiler's own code."""

from __future__ import annotations

import gzip
import json
import zlib

from tfpipe import storage
from tfpipe.bench.profiles import tables, xprof_tool
from tfpipe.bench.profiles.analysis import HostAnalysis, Profile, ProfileError, summarize
from tfpipe.bench.profiles.locate import locate

# One host's pre-converted files, in the order they are read: the first present is read.
_PRECONVERTED = (
    "overview_page.pb",
    "overview_page.json",
    "overview_page.json.gz",
    "input_pipeline.pb",
    "input_pipeline_analyzer.json",
    "input_pipeline_analyzer.json.gz",
    "input_pipeline.json",
    "input_pipeline.json.gz",
)


def read(path: str, run: str | None = None) -> Profile:
    """Reads a TensorFlow Profiler profile of a training run.

    Raw `<host>.xplane.pb` files (every host of the run) are analysed by xprof's own
    `xspace_to_tool_data`; older folders' pre-converted overview/input-pipeline `.pb` files and
    the converter's JSON (plain or gzipped) are read as they are.

    Args:
      path: a TensorBoard log dir, a `plugins/profile/<run>` folder or one file; local or gs://.
      run: the run folder to read; None reads the newest.

    Returns:
      The Profile: device, cores, steps, step time and its spread, input share, partial steps
      dropped.

    Raises:
      ConfigError: `path` does not exist, or no run is called `run`.
      ProfileError: no profile there, a corrupt file, an unknown format, a CPU-only profile
        or one without training steps.
      MissingExtraError: the files need xprof, which is not installed.
    """
    found = locate(path, run)
    xplanes = {host: kinds["xplane"] for host, kinds in found.files.items() if "xplane" in kinds}
    if xplanes:
        hosts = sorted(xplanes)
        ver = xprof_tool.version()
        page = xprof_tool.overview_page([xplanes[h] for h in hosts])
        analysis = tables.from_datatables(
            page,
            host=", ".join(hosts),
            files=tuple(xplanes[h] for h in hosts),
            fmt=f"xplane, analysed by xprof {ver}",
            known=xprof_tool.known_formats(),
        )
        return summarize(path, found.run, found.runs, (analysis,), ver)
    analyses = tuple(_read_host(host, found.files[host]) for host in sorted(found.files))
    return summarize(path, found.run, found.runs, analyses, None)


def _read_host(host: str, kinds: dict[str, str]) -> HostAnalysis:
    kind = next(k for k in _PRECONVERTED if k in kinds)
    path = kinds[kind]
    data = storage.read_bytes(path)
    if not data:
        raise ProfileError(f"{path} is empty: a corrupt profile (an interrupted write?)")
    known = xprof_tool.known_formats()
    if kind.endswith(".pb"):
        xprof_tool.require("protobuf.overview_page_pb2")
        read_pb = tables.from_overview_pb if kind == "overview_page.pb" else tables.from_input_pipeline_pb
        return read_pb(data, host=host, files=(path,), known=known)
    return tables.from_datatables(_json(path, data), host=host, files=(path,), fmt=kind, known=known)


def _json(path: str, data: bytes) -> object:
    if path.endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise ProfileError(f"{path} is corrupt: not a whole gzip file. Received: {e}") from None
    try:
        return json.loads(data)
    except (UnicodeDecodeError, ValueError) as e:
        raise ProfileError(f"{path} is corrupt: not JSON. Received: {e}") from None

"""The Beam engine: the same plan as the local engine, executed as Beam pipelines.

The driver lists the source, decides the plan and holds the destination's lock, exactly as
the local engine does. Workers do the per-input work:
- tables: a first pipeline scans one file per worker (types, nulls, dropped rows, row
  counts); the driver folds those scans in file order into the schema and the row-to-shard
  assignment;
- images and tables alike: a pipeline writes one shard per element (`shards.write_shard`),
  each committed once and recorded with its done-record.
The driver then reads the done-records and writes the manifest once, last.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tfpipe import storage
from tfpipe.beam import tablescan
from tfpipe.beam.deps import require_beam
from tfpipe.beam.shards import ImageShard, RowRange, ShardJob, TableShard, run_job, save_job
from tfpipe.convert.config import ConvertConfig
from tfpipe.convert.encode import ImageItem
from tfpipe.convert.tables import TableScan, file_chunks, table_files
from tfpipe.errors import ConfigError

PipelineOptionsLike = str | Sequence[str] | Any  # "--runner=X ...", ["--runner=X"], or PipelineOptions
_JOB_UPLOADS = 16  # job files written at once: GCS uploads are latency-bound


def pipeline_options(options: PipelineOptionsLike | None, workers: int) -> Any:
    """Beam PipelineOptions from a command-line string, a list of flags, or PipelineOptions.

    None runs on this machine: the DirectRunner with `workers` processes (one: in this process).
    """
    require_beam()
    from apache_beam.options.pipeline_options import PipelineOptions

    if options is None:
        mode = ["--direct_running_mode=multi_processing", f"--direct_num_workers={workers}"] if workers > 1 \
            else ["--direct_running_mode=in_memory"]
        return PipelineOptions(["--runner=DirectRunner", *mode])
    if isinstance(options, PipelineOptions):
        return options
    if isinstance(options, str):
        flags = shlex.split(options)
    elif isinstance(options, Sequence) and all(isinstance(o, str) for o in options):
        flags = list(options)
    else:
        raise ConfigError("pipeline_options must be a string of flags (\"--runner=DataflowRunner "
                          "--project=P\"), a list of them, or apache_beam PipelineOptions. "
                          f"Received: {type(options).__name__}")
    bad = [f for f in flags if not f.startswith("--")]
    if bad:
        raise ConfigError(f"Expected Beam pipeline options such as --runner=DataflowRunner. Received: {bad}")
    return PipelineOptions(flags)


def _run(name: str, elements: list[Any], fn: Any, options: Any) -> None:
    """Runs `fn` once per element (redistributed over the workers) and waits for the end."""
    beam = require_beam()
    with beam.Pipeline(options=options) as p:
        _ = (p | f"{name}/list" >> beam.Create(elements, reshuffle=False)
             | f"{name}/spread" >> beam.Reshuffle()
             | f"{name}/work" >> beam.Map(fn))


# ---- tables: the first pass on workers ----


def _scan_to_file(element: tuple[str, str], fmt: str, chunk_rows: int, label: str | None,
                  missing_label: str, encoding: str, first: str) -> None:
    path, out = element
    scan = tablescan.scan_file(path, fmt, chunk_rows, label, missing_label, encoding, path == first)
    storage.write_atomic(out, json.dumps(scan.to_json()).encode(), overwrite=True)


def scan_table(src: str, fmt: str, cfg: ConvertConfig, dest: str, split: str,
               options: Any) -> tuple[TableScan, tuple[int, ...]]:
    """The table's first pass as a Beam stage: the TableScan and each file's rows to write."""
    files = tuple(table_files(src, fmt))
    outs = [storage.join(dest, storage.temp_name(f"{split}-scan-{i:05d}") + ".json") for i in range(len(files))]
    _run("scan", list(zip(files, outs, strict=True)), _bind(_scan_to_file, fmt=fmt, chunk_rows=cfg.chunk_rows,
         label=cfg.label, missing_label=cfg.missing_label, encoding=cfg.encoding, first=files[0]), options)
    try:
        scans = [tablescan.FileScan.from_json(json.loads(storage.read_bytes(o))) for o in outs]
    finally:
        for o in outs:
            storage.remove(o)
    scan = tablescan.merge(src, fmt, files, scans, cfg.label, cfg.missing, cfg.missing_label,
                           cfg.encoding, cfg.chunk_rows)
    rows = tuple(s.kept if not s.error else _count_rows(s.path, scan, cfg) for s in scans)
    return scan, rows


def _count_rows(path: str, scan: TableScan, cfg: ConvertConfig) -> int:
    """A file's rows to write, counted here (only for a file whose own scan stopped early)."""
    n = 0
    for frame in file_chunks(path, scan.format, cfg.chunk_rows, scan.kinds, scan.encoding):
        n += int(frame[scan.drop_label].notna().sum()) if scan.drop_label else len(frame)
    return n


def _bind(fn: Any, **kwargs: Any) -> Any:
    import functools

    return functools.partial(fn, **kwargs)


# ---- the plan as shard jobs ----


def image_jobs(items: Sequence[ImageItem], bounds: list[tuple[int, int]], names: list[str], todo: list[int],
               dest: str, split: str, compression: str, cfg: ConvertConfig) -> list[ShardJob]:
    return [ShardJob(dest, split, names[i], compression, cfg.strict,
                     ImageShard(tuple(items[bounds[i][0] : bounds[i][1]]), cfg.resize_shorter, cfg.quality, cfg.check))
            for i in todo]


def table_jobs(scan: TableScan, file_rows: tuple[int, ...], bounds: list[tuple[int, int]], names: list[str],
               todo: list[int], dest: str, split: str, compression: str, cfg: ConvertConfig) -> list[ShardJob]:
    """Each shard's rows as ranges of files, from the files' row counts alone."""
    starts = [sum(file_rows[:i]) for i in range(len(file_rows))]
    jobs = []
    for i in todo:
        a, b = bounds[i]
        ranges = tuple(RowRange(path, max(a, s) - s, min(b, s + n) - s, max(a, s))
                       for path, s, n in zip(scan.files, starts, file_rows, strict=True) if max(a, s) < min(b, s + n))
        work = TableShard(ranges, scan.format, scan.schema, scan.kinds, cfg.chunk_rows, scan.encoding, scan.drop_label)
        jobs.append(ShardJob(dest, split, names[i], compression, False, work))
    return jobs


def write_shards(jobs: list[ShardJob], options: Any) -> None:
    """Writes every job's shard on the workers; each leaves its done-record in the destination."""
    if not jobs:
        return
    with ThreadPoolExecutor(_JOB_UPLOADS) as pool:
        paths = list(pool.map(save_job, jobs))
    try:
        _run("shards", paths, run_job, options)
    finally:
        with ThreadPoolExecutor(_JOB_UPLOADS) as pool:
            list(pool.map(storage.remove, paths))

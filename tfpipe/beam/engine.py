"""The Beam engine: the local engine's plan, executed as Beam pipelines.

The driver lists the source, makes the plan, decides what to do with the destination and
holds its lock, as the local engine does (`run_conversion`). Workers do the per-input work:
- tables: a first pipeline scans one file per worker (types, nulls, dropped rows, row
  counts; `tablescan`), and the driver folds the scans in file order into the schema and the
  per-file row counts that place every row in its shard;
- images and tables: a second pipeline writes one shard per element (`shards.run_task`),
  each committed once and recorded with its done-record.
The driver then reads the done-records back and writes the manifest once, last.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import shlex
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tfpipe import storage
from tfpipe.beam import tablescan
from tfpipe.beam.deps import require_beam
from tfpipe.beam.shards import FileRows, file_rows, run_task, save_task
from tfpipe.convert.config import ConvertConfig
from tfpipe.convert.plan import ConvertPlan, ShardTask
from tfpipe.convert.run import Tick
from tfpipe.convert.sources import Source
from tfpipe.convert.tables import TableScan, read_chunks, table_files
from tfpipe.convert.writer import ResumeJournal, ShardDone
from tfpipe.errors import ConfigError, TfpipeError

_UPLOADS = 16  # task files written or removed at once: GCS requests are latency-bound


def pipeline_options(options: Any, workers: int) -> Any:
    """Beam PipelineOptions from a string of flags, a list of flags, or PipelineOptions.

    None runs here: the DirectRunner with `workers` processes (one: in this process).

    Raises:
      ConfigError: anything but flags such as `--runner=DataflowRunner`.
    """
    require_beam()
    from apache_beam.options.pipeline_options import PipelineOptions

    if options is None:
        mode = (
            ["--direct_running_mode=multi_processing", f"--direct_num_workers={workers}"]
            if workers > 1
            else ["--direct_running_mode=in_memory"]
        )
        return PipelineOptions(["--runner=DirectRunner", *mode])
    if isinstance(options, PipelineOptions):
        return options
    if isinstance(options, str):
        flags = shlex.split(options)
    elif isinstance(options, Sequence) and all(isinstance(o, str) for o in options):
        flags = list(options)
    else:
        raise ConfigError(
            'Expected pipeline_options as a string of flags ("--runner=DataflowRunner '
            '--project=P"), a list of them, or apache_beam PipelineOptions. '
            f"Received: {type(options).__name__}"
        )
    bad = [f for f in flags if not f.startswith("--")]
    if bad:
        raise ConfigError(f"Expected Beam pipeline options such as --runner=DataflowRunner. Received: {bad}")
    return PipelineOptions(flags)


class PipelineFailed(TfpipeError):
    """A Beam pipeline failed on its workers; the message ends with the worker's error."""


def _run(name: str, elements: list[Any], fn: Callable[[Any], Any], options: Any) -> None:
    """Runs `fn` once per element, spread over the workers, and waits for the end.

    Raises:
      PipelineFailed: a worker's error, as a runner reports it from another process (a
        TfpipeError or OSError raised in this process keeps its type).
    """
    beam = require_beam()
    try:
        with beam.Pipeline(options=options) as p:
            _ = (
                p
                | f"{name}/list" >> beam.Create(elements, reshuffle=False)
                | f"{name}/spread" >> beam.Reshuffle()
                | f"{name}/work" >> beam.Map(fn)
            )
    except (TfpipeError, OSError):
        raise
    except Exception as e:
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()] or [type(e).__name__]
        raise PipelineFailed(
            f"the Beam pipeline {name!r} failed: {lines[-1][:500]}. Shards committed so far "
            "are kept: run the same command with --resume (resume=True) to continue."
        ) from e


def _each(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
    with ThreadPoolExecutor(_UPLOADS) as pool:
        return list(pool.map(fn, items))


def _scan_to_file(
    element: tuple[str, str],
    fmt: str,
    chunk_rows: int,
    label: str | None,
    missing_label: str,
    encoding: str,
    first: str,
) -> None:
    path, out = element
    scan = tablescan.scan_file(path, fmt, chunk_rows, label, missing_label, encoding, path == first)
    storage.write_atomic(out, json.dumps(scan.to_json()).encode(), overwrite=True)


class BeamEngine:
    """Executes a conversion on Beam: `scan_table` for the first pass, `execute` for shards.

    Args:
      cfg: the conversion's options.
      options: Beam pipeline options (see `pipeline_options`).
      dest, split: where the conversion writes (the table scan's results go there too).
      progress: called with a Tick before the shards are written and once they all are.
    """

    def __init__(
        self,
        cfg: ConvertConfig,
        options: Any,
        dest: str,
        split: str,
        progress: Callable[[Tick], None] | None = None,
    ):
        self.cfg, self.options, self.progress = cfg, pipeline_options(options, cfg.n_workers), progress
        self.dest, self.split = dest, split
        self.file_rows: tuple[int, ...] = ()  # each table file's rows to write, from `scan_table`

    def scan_table(
        self,
        src: str,
        fmt: str,
        chunk_rows: int,
        label: str | None,
        missing: str,
        missing_label: str = "error",
        encoding: str = "utf-8",
    ) -> TableScan:
        """`tables.scan` as a Beam stage, one file per worker; keeps each file's rows to write."""
        files = tuple(table_files(src, fmt))
        outs = [
            storage.join(self.dest, storage.temp_name(f"{self.split}-scan-{i:05d}") + ".json")
            for i in range(len(files))
        ]
        scan_one = functools.partial(
            _scan_to_file,
            fmt=fmt,
            chunk_rows=chunk_rows,
            label=label,
            missing_label=missing_label,
            encoding=encoding,
            first=files[0],
        )
        try:
            _run("scan", list(zip(files, outs, strict=True)), scan_one, self.options)
            scans = [tablescan.FileScan.from_json(json.loads(storage.read_bytes(o))) for o in outs]
        finally:
            _each(storage.remove, outs)
        scan = tablescan.merge(src, fmt, files, scans, label, missing, missing_label, encoding, chunk_rows)
        self.file_rows = tuple(
            s.kept if not s.error else _count_rows(s.path, scan, chunk_rows) for s in scans
        )
        return scan

    def execute(
        self, plan: ConvertPlan, source: Source, done: dict[int, ShardDone], journal: ResumeJournal
    ) -> list[ShardDone]:
        """Writes the shards not `done` on the workers; returns one ShardDone per shard, in order.

        Raises:
          StorageError: the pipeline ended but a shard has no done-record.
        """
        self._tick(plan, done)
        tasks = [self._portable(t, source) for t in plan.shards if t.index not in done]
        paths = _each(save_task, tasks)
        try:
            if paths:
                _run("shards", paths, functools.partial(run_task, split=plan.split), self.options)
        finally:
            _each(storage.remove, paths)
        results = journal.completed(plan.n_shards)
        missing = [t.name for t in plan.shards if t.index not in results]
        if missing:
            raise storage.StorageError(
                f"{plan.dest}: expected every shard committed when the pipeline "
                f"ended. Received: no done-record for {missing[:5]}"
            )
        self._tick(plan, results)
        return [results[i] for i in range(plan.n_shards)]

    def _portable(self, task: ShardTask, source: Source) -> ShardTask:
        """The task with inputs a worker can read: a table shard's rows by the files holding them."""
        scan = getattr(source, "scan", None)
        if not isinstance(scan, TableScan):
            return task
        files = file_rows(scan.files, self.file_rows, task.first, task.first + task.count)
        rows = FileRows(
            files, scan.format, scan.schema, scan.kinds, self.cfg.chunk_rows, scan.encoding, scan.drop_label
        )
        return dataclasses.replace(task, inputs=rows)

    def _tick(self, plan: ConvertPlan, done: dict[int, ShardDone]) -> None:
        if self.progress:
            items = sum(plan.shards[i].count for i in done)
            out = sum(d.info.bytes for d in done.values())
            skipped = len(plan.skipped) + sum(len(d.skipped) for d in done.values())
            self.progress(
                Tick(items, plan.n_items, 0, out, len(done), plan.n_shards, skipped, plan.unit, plan.note)
            )


def _count_rows(path: str, scan: TableScan, chunk_rows: int) -> int:
    """A file's rows to write, counted here: only for a file whose own scan stopped early."""
    chunks = read_chunks((path,), scan.format, chunk_rows, scan.kinds, scan.encoding, scan.drop_label)
    return sum(len(frame) for frame, _, _ in chunks)

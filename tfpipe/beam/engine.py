"""The Beam engine: the local engine's plan, executed as Beam pipelines.

The driver lists the source, makes the plan, decides what to do with the destination and
holds its lock, as the local engine does (`run_conversion`). Workers do the per-input work:
- a modality whose first pass can run a file at a time (tables: types, nulls, dropped rows,
  row counts) runs it as a first pipeline (`on_workers`), and folds the results in file order;
- a second pipeline writes one shard per element (`shards.run_task`), each committed once and
  recorded with its done-record.
The driver then reads the done-records back and writes the manifest once, last.
"""

from __future__ import annotations

import functools
import json
import shlex
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from tfpipe import storage
from tfpipe.beam.deps import require_beam
from tfpipe.beam.shards import run_task, save_task
from tfpipe.convert.config import ConvertConfig
from tfpipe.convert.plan import ConvertPlan
from tfpipe.convert.progress import Tick
from tfpipe.convert.sources import Source
from tfpipe.convert.writer import ResumeJournal, ShardDone
from tfpipe.errors import ConfigError, PipelineFailed, TfpipeError

if TYPE_CHECKING:
    from apache_beam.options.pipeline_options import PipelineOptions

_UPLOADS = 16  # task files written or removed at once: GCS requests are latency-bound


def pipeline_options(options: object, workers: int) -> PipelineOptions:
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


def _run(name: str, elements: list[Any], fn: Callable[[Any], Any], options: PipelineOptions) -> None:
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


def _to_file(element: tuple[Any, str], fn: Callable[[Any], dict[str, Any]]) -> None:
    item, out = element
    storage.write_atomic(out, json.dumps(fn(item)).encode(), overwrite=True)


class BeamEngine:
    """Executes a conversion on Beam: `on_workers` for a first pass a file at a time, `execute`
    for the shards.

    Args:
      cfg: the conversion's options.
      options: Beam pipeline options (see `pipeline_options`).
      dest, split: where the conversion writes (the table scan's results go there too).
      progress: called with a Tick before the shards are written and once they all are.
    """

    def __init__(
        self,
        cfg: ConvertConfig,
        options: str | Sequence[str] | PipelineOptions | None,
        dest: str,
        split: str,
        progress: Callable[[Tick], None] | None = None,
    ):
        self.cfg, self.options, self.progress = cfg, pipeline_options(options, cfg.n_workers), progress
        self.dest, self.split = dest, split

    def on_workers(
        self, name: str, fn: Callable[[Any], dict[str, Any]], items: Sequence[Any]
    ) -> list[dict[str, Any]]:
        """`fn` (picklable) on each of `items` as a Beam pipeline `name`, one item per element;
        its JSON results, in the items' order (through files beside the destination)."""
        outs = [
            storage.join(self.dest, storage.temp_name(f"{self.split}-{name}-{i:05d}") + ".json")
            for i in range(len(items))
        ]
        try:
            _run(name, list(zip(items, outs, strict=True)), functools.partial(_to_file, fn=fn), self.options)
            return [json.loads(storage.read_bytes(o)) for o in outs]
        finally:
            _each(storage.remove, outs)

    def execute(
        self, plan: ConvertPlan, source: Source, done: dict[int, ShardDone], journal: ResumeJournal
    ) -> list[ShardDone]:
        """Writes the shards not `done` on the workers; returns one ShardDone per shard, in order.

        Raises:
          StorageError: the pipeline ended but a shard has no done-record.
        """
        self._tick(plan, done)
        tasks = [t for t in plan.shards if t.index not in done]
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

    def _tick(self, plan: ConvertPlan, done: dict[int, ShardDone]) -> None:
        if self.progress:
            items = sum(plan.shards[i].count for i in done)
            out = sum(d.info.bytes for d in done.values())
            skipped = len(plan.skipped) + sum(len(d.skipped) for d in done.values())
            self.progress(
                Tick(items, plan.n_items, 0, out, len(done), plan.n_shards, skipped, plan.unit, plan.note)
            )


Engine = BeamEngine
"""The engine `tfpipe.convert(engine="beam")` finds by name (`tfpipe.convert.run.ENGINES`)."""

"""`tfpipe.convert`: a source, a plan, an engine that writes atomic shards, and the manifest last.

The steps: list the source by its modality's convert half (`open_source`: the `Kind` of the
modality that reads the format), plan the shards (`plan.make_plan`), decide what to do with the
destination (`plan.decide`), let an engine write the shards not yet done (the local engine by
default, `engine.run_local`), then build and commit the manifest (`ConvertPlan.manifest`).
`run_conversion` takes any engine; `convert` uses the local one. No step names a modality.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import errno
import importlib
import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tfpipe import storage
from tfpipe.convert.config import ConvertConfig, ShardConfig, as_flags, split_options
from tfpipe.convert.detect import choose_format, refuse_split_folders
from tfpipe.convert.engine import run_local
from tfpipe.convert.kind import OnWorkers, SplitExtras
from tfpipe.convert.lock import LOCK_NAME, DestinationLock
from tfpipe.convert.plan import (
    ConvertPlan,
    Refuse,
    Resume,
    Start,
    decide,
    make_plan,
    refuse_finished,
)
from tfpipe.convert.progress import ProgressCallback, Tick
from tfpipe.convert.sources import Source, joining, open_source
from tfpipe.convert.writer import ResumeJournal, ShardDone, pause_point, sweep
from tfpipe.errors import (
    ConfigError,
    DataError,
    DestinationError,
    ManifestError,
    TfpipeError,
)
from tfpipe.format import commit_markers
from tfpipe.format.manifest import MANIFEST_NAME, Manifest
from tfpipe.modalities import get_modality, modality_of_format
from tfpipe.validation import check_choice

if TYPE_CHECKING:
    from apache_beam.options.pipeline_options import PipelineOptions

ENGINES = {"local": "", "beam": "tfpipe.beam.engine"}
"""The engines by name. An engine other than the local one is the module holding its `Engine`
class (made with the options, the destination, the split and the progress callback; it has
`execute`, and `on_workers` to run a modality's first pass a file at a time on its workers),
imported only when it is asked for: the core never imports an optional engine."""


def convert(
    src: str,
    dest: str,
    shards: ShardConfig | None = None,
    config: ConvertConfig | None = None,
    *,
    resume: bool = False,
    overwrite: bool = False,
    break_lock: bool = False,
    progress: ProgressCallback | None = None,
    engine: str = "local",
    pipeline_options: str | Sequence[str] | PipelineOptions | None = None,
    **options: Any,
) -> Manifest:
    """Converts raw data into sharded TFRecords plus a `tfpipe.json` manifest.

    Args:
      src: an image folder tree, a flat validation folder (with `labels_file`), a CSV,
        Parquet, Arrow or JSON Lines table file (or a folder of them), or a text corpus
        (`.jsonl`, `.txt` or `.parquet` files, also compressed: one, a folder or a glob; with
        `tokenizer` or `train_tokenizer`; JSON Lines without one are a table, unless their
        records hold text). Local or gs://.
      dest: the output directory, local or gs://. Not inside `src`.
      shards: how to cut shards, as a ShardConfig; or pass its fields as options.
      config: everything else, as a ConvertConfig; or pass its fields as options.
      resume: finish an interrupted conversion of the same split with the same options.
      overwrite: replace the split if `dest` already has it.
      break_lock: take over a gs:// destination's lock left by a run on another host that
        is known to be dead (a dead run on this host is detected without it).
      progress: called with a `Tick` as work completes; the library itself prints nothing.
      engine: "local" (a process pool on this machine) or "beam" (Apache Beam: the
        DirectRunner here, Dataflow, Flink or Spark at scale; needs `pip install "tfpipe[beam]"`).
        Both write the same bytes.
      pipeline_options: for engine="beam": Beam flags as one string ("--runner=DataflowRunner
        --project=P ..."), a list of them, or PipelineOptions. None: the DirectRunner with
        `workers` processes.
      **options: ShardConfig fields (split, num_shards, shard_size, compression) and
        ConvertConfig fields (format, workers, resize_shorter, quality, label, missing,
        label_offset, labels_file, strict, check, seed, chunk_rows, missing_label, encoding,
        null_values, column_types, text_field, lines, tokenizer, train_tokenizer, vocab_size),
        each for the config not given as an object.

    Returns:
      The committed Manifest.

    Raises:
      DestinationError: `dest` already holds this split (pass overwrite), an interrupted run
        (pass resume or overwrite), is being written by another run, is inside `src`, or
        cannot be written (a full disk says that `resume` continues once space is freed).
      DataError: bad input, naming the file, column and row.
      StorageError: reading or writing failed after retries; `resume` continues the run.
      ConfigError: an unknown or invalid option, or one given both in a config and as an option.

    Example:
      >>> tfpipe.convert("ILSVRC/train", "gs://bucket/imagenet", num_shards=1024)
      >>> tfpipe.convert("ILSVRC/train", "out/", tfpipe.ShardConfig(num_shards=8), resize_shorter=320)

    Long: the docstring is the public contract of every option; the body is 20 lines.
    """
    shard_cfg, cfg = split_options(options, shards, config)
    check_choice("engine", engine, tuple(ENGINES))
    if cfg.format != "auto":
        modality_of_format(cfg.format)  # refuses a format none reads, before the destination is touched
    storage.check_url(src)
    storage.check_url(dest)
    execute, on_workers = _engine(
        engine, cfg, pipeline_options, str(dest).rstrip("/"), shard_cfg.split, progress
    )
    return run_conversion(
        src,
        dest,
        shard_cfg,
        cfg,
        execute,
        resume=resume,
        overwrite=overwrite,
        break_lock=break_lock,
        on_workers=on_workers,
        engine=engine,
    )


def _engine(
    engine: str,
    cfg: ConvertConfig,
    pipeline_options: str | Sequence[str] | PipelineOptions | None,
    dest: str,
    split: str,
    progress: ProgressCallback | None,
) -> tuple[Execute, OnWorkers | None]:
    """The engine's shard writer and how it runs work on its workers (None: the local engine,
    whose first passes run in this process): the local process pool, or an optional engine's,
    imported by name only now (see ENGINES)."""
    if ENGINES[engine]:
        made = importlib.import_module(ENGINES[engine]).Engine(cfg, pipeline_options, dest, split, progress)
        return made.execute, made.on_workers
    if pipeline_options is not None:
        raise ConfigError(
            f"pipeline_options apply to engine='beam'. Received: engine={engine!r}, "
            f"pipeline_options={pipeline_options!r}"
        )

    def local(
        plan: ConvertPlan, source: Source, done: dict[int, ShardDone], journal: ResumeJournal
    ) -> list[ShardDone]:
        return _execute(plan, source, done, cfg.n_workers, journal, progress)

    return local, None


Execute = Callable[[ConvertPlan, Source, dict[int, ShardDone], ResumeJournal], list[ShardDone]]
"""An engine: writes the plan's shards not yet `done` (shard index -> ShardDone), records each
with `journal.mark_done` as it commits, and returns one ShardDone per shard of the plan, in order."""


def run_conversion(
    src: str,
    dest: str,
    shard_cfg: ShardConfig,
    cfg: ConvertConfig,
    execute: Execute,
    *,
    resume: bool = False,
    overwrite: bool = False,
    break_lock: bool = False,
    on_workers: OnWorkers | None = None,
    engine: str = "local",
) -> Manifest:
    """`convert` with the engine given: plans under the destination's lock, lets `execute`
    write the shards, and commits the manifest. Arguments and errors are those of `convert`;
    `on_workers` runs a modality's first pass a file at a time on the engine's workers (None:
    in this process), and an engine other than "local" is recorded in the split's options."""
    started, retried = time.monotonic(), storage.retries()
    storage.check_url(src)
    storage.check_url(dest)
    src, dest = str(src), str(dest).rstrip("/")
    _check_not_inside(src, dest)
    created = _prepare_destination(dest)
    try:
        with DestinationLock(dest, break_lock=break_lock):
            existing = _load_existing(dest)
            sweep(dest, existing)
            run = _Run(execute, on_workers, engine, retried)
            return _convert_locked(src, dest, existing, shard_cfg, cfg, resume, overwrite, run, started)
    except Exception as e:
        if created:
            with contextlib.suppress(OSError):
                os.rmdir(dest)  # only if the failed run left it empty
        if _is_io_error(e) and not isinstance(e, DestinationError):
            raise _resumable_error(e, dest, shard_cfg.split) from e
        raise


@dataclasses.dataclass(frozen=True, slots=True)
class _Run:
    """The engine of a conversion: its shard writer, how it runs work on its workers, its name;
    and `storage.retries()` when the run started."""

    execute: Execute
    on_workers: OnWorkers | None
    engine: str
    retried_before: dict[str, int]


def _convert_locked(
    src: str,
    dest: str,
    existing: Manifest | None,
    shard_cfg: ShardConfig,
    cfg: ConvertConfig,
    resume: bool,
    overwrite: bool,
    run: _Run,
    started: float,
) -> Manifest:
    refused = refuse_finished(existing, shard_cfg.split, overwrite)  # before the (long) scan
    if refused:
        raise DestinationError(refused.reason)
    refuse_split_folders(src, dest, as_flags(shard_cfg, cfg, leave_out=("split", "labels_file")))
    # The dataset this split joins: its class list, layout and tokenizer bind the new split.
    joins = existing if existing and set(existing.splits) - {shard_cfg.split} else None
    fmt, reason = choose_format(src, cfg, joins)
    source = open_source(src, fmt, cfg, joins, dest, run.on_workers)
    source = joining(joins, source, shard_cfg, dest)
    kind = get_modality(source.kind).convert
    plan = make_plan(src, dest, source, shard_cfg, cfg, fmt, reason)
    journal = ResumeJournal(dest, plan.split, plan.compression, kind.name, kind.tally_from_json)
    decision = decide(existing, journal.state(), plan, resume, overwrite)
    if isinstance(decision, Refuse):
        raise DestinationError(decision.reason)
    if isinstance(decision, Start) and decision.overwrite:
        existing = _drop_split(existing, plan.split, journal)
        journal.clear()
    done = journal.completed(plan.n_shards) if isinstance(decision, Resume) else {}
    done = {i: d.kept() for i, d in done.items()}  # the rest read back from the journal at the end
    if isinstance(decision, Start):
        journal.start(plan.record())
    for name, data in source.attachments:  # e.g. the tokenizer, which the workers read
        storage.write_atomic(storage.join(dest, name), data, overwrite=True)
    shards = run.execute(plan, source, done, journal)
    if kind.rereads_inputs:
        _check_inputs_unchanged(source)
    extras = _commit_extras(src, dest, kind.finish(plan, shards, journal.tally))
    manifest = plan.manifest(shards, existing, time.monotonic() - started, extras)
    entry = manifest.splits[plan.split]
    if run.engine != "local":  # the same bytes either way; the local engine's manifest predates the field
        entry = dataclasses.replace(entry, options=entry.options | {"engine": run.engine})
    else:  # every write of the local engine is made by this process, so counted here
        retried = collections.Counter(storage.retries())
        retried.subtract(run.retried_before)
        entry = dataclasses.replace(entry, retries={k: n for k, n in sorted(retried.items()) if n > 0})
    manifest = dataclasses.replace(manifest, splits=manifest.splits | {plan.split: entry})
    commit_markers.mark(dest, plan.split, entry.shards)  # gs://: readers check it by a listing
    manifest.save(overwrite=True)  # the commit point
    pause_point("manifest-committed")
    journal.clear()
    kind.committed(source, manifest, plan.split)
    return manifest


def _commit_extras(src: str, dest: str, extras: SplitExtras | None) -> SplitExtras | None:
    """Commits what the split's kind attaches to it (`Kind.finish`: e.g. text's lengths file)
    beside its shards, unless the kind refuses the split; returns it for the manifest."""
    if extras is None:
        return None
    try:
        extras.check(src)
        for name, path in extras.files:
            storage.commit_file(path, storage.join(dest, name), overwrite=True)
            pause_point("split-file-committed")
    finally:
        extras.discard()
    return extras


def _check_inputs_unchanged(source: Source) -> None:
    """Refuses to commit a source read again after its first pass (`Kind.rereads_inputs`: a
    table, a text corpus) that changed meanwhile: its shards would mix the rows of two
    versions. (Each image is read once, so an image cannot mix.)"""
    for path, identity in zip(source.inputs, source.identities, strict=True):
        now = storage.identity(path)
        if not storage.same_version(identity, now):
            raise DataError(
                f"{path}: changed during the conversion (was {identity}, now {now}), so its "
                "shards would mix rows of two versions; nothing was committed. Convert it again "
                "(--overwrite) once nothing writes to it."
            )


def _check_not_inside(src: str, dest: str) -> None:
    """DEST inside SRC would be read back as input by the next run, and can switch the layout."""
    if storage.is_gcs(src) != storage.is_gcs(dest):
        return
    if storage.is_gcs(src):
        outer, inner = src.rstrip("/") + "/", dest.rstrip("/") + "/"
    else:
        outer, inner = os.path.join(os.path.realpath(src), ""), os.path.join(os.path.realpath(dest), "")
    if inner.startswith(outer):
        raise DestinationError(
            f"Expected a destination outside the source. Received: dest {dest!r} inside src {src!r}. "
            "Its shards would be read back as input by the next conversion; write them elsewhere."
        )


def _prepare_destination(dest: str) -> bool:
    """Makes `dest` exist, or raises DestinationError saying why it cannot be written.

    Returns:
      True if this call created the (local) directory.
    """
    if storage.is_gcs(dest):
        try:
            storage.check_bucket(dest)
        except FileNotFoundError:
            bucket = storage.split_gcs(dest)[0]
            raise DestinationError(
                f"{dest}: the bucket {bucket!r} does not exist. Create it first "
                f"(gcloud storage buckets create gs://{bucket})."
            ) from None
        return False
    if os.path.exists(dest) and not os.path.isdir(dest):
        raise DestinationError(
            f"{dest}: expected a directory (or a new path) for the output. "
            f"Received: {storage.file_kind(os.stat(dest).st_mode)}"
        )
    created = not os.path.lexists(dest)
    try:
        os.makedirs(dest, exist_ok=True)
        # Before the lock file: opening one that exists needs no write access to the folder.
        why = storage.write_problem(dest)
        if why:
            raise DestinationError(f"{dest}: cannot write the output there: {why}")
        os.close(os.open(os.path.join(dest, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o644))
    except OSError as e:
        raise DestinationError(f"{dest}: cannot write the output there: {e.strerror or e}") from None
    return created


def _is_io_error(e: BaseException) -> bool:
    """An OSError (StorageError included), or an error of the GCS client or its HTTP layer."""
    return isinstance(e, OSError) or type(e).__module__.startswith(("google.", "requests.", "urllib3."))


def _resumable_error(e: Exception, dest: str, split: str) -> TfpipeError:
    """An I/O failure in the middle of a run, as one line that says `--resume` continues."""
    hint = (
        f"The shards committed so far are kept: run the same command with --resume (resume=True) "
        f"to continue split {split!r}."
    )
    code = getattr(e, "errno", None)
    name = getattr(e, "filename", None)
    if code == errno.ELOOP and name:  # a data problem: a --resume would meet it again
        return DataError(f"{name}: {storage.broken_link(name) or os.strerror(code)}")
    if code in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return DestinationError(
            f"{dest}: out of space while writing ({e.strerror}: {e.filename or dest}). "
            f"Free some space. {hint}"
        )
    if isinstance(e, PermissionError):
        return DestinationError(f"{e.filename or dest}: {e.strerror}. {hint}")
    return storage.StorageError(f"{e}. {hint}")


@dataclasses.dataclass(slots=True)
class _Tally:
    """What the local engine has done so far, for progress ticks."""

    items: int
    bytes_in: int
    bytes_out: int
    skipped: int
    shards: int


def _execute(
    plan: ConvertPlan,
    source: Source,
    done: dict[int, ShardDone],
    workers: int,
    journal: ResumeJournal,
    progress: ProgressCallback | None,
) -> list[ShardDone]:
    """Writes the shards not `done` with the local engine, recording each as it commits."""
    results = dict(done)
    tally = _Tally(
        items=sum(plan.shards[i].count for i in done),
        bytes_in=0,
        bytes_out=sum(d.info.bytes for d in done.values()),
        skipped=len(plan.skipped) + sum(len(d.skipped) for d in done.values()),
        shards=len(done),
    )

    def tick() -> None:
        if progress:
            progress(
                Tick(
                    tally.items,
                    plan.n_items,
                    tally.bytes_in,
                    tally.bytes_out,
                    tally.shards,
                    plan.n_shards,
                    tally.skipped,
                    plan.unit,
                    plan.note,
                )
            )

    tick()  # before any work: the plan, for the caller to show
    for step in run_local(source, [t for t in plan.shards if t.index not in done], workers):
        if step.piece is not None:
            tally.items += len(step.piece.encoded)
            tally.bytes_in += sum(item.input_bytes for item in step.piece.encoded)
            tally.skipped += sum(1 for item in step.piece.encoded if item.record is None)
        if step.done is not None:
            journal.mark_done(step.done)
            results[step.shard] = step.done.kept()  # the rest in the journal: read back at the end
            tally.bytes_out += step.done.info.bytes
            tally.shards += 1
            pause_point("shard-committed")
        tick()
    return [results[i] for i in range(plan.n_shards)]


def _load_existing(dest: str) -> Manifest | None:
    try:
        return Manifest.find(dest)
    except ManifestError as e:
        raise DestinationError(
            f"{dest} holds an unreadable manifest ({e}); pick another destination"
        ) from None


def _drop_split(existing: Manifest | None, split: str, journal: ResumeJournal) -> Manifest | None:
    """--overwrite: remove the split's commit markers, un-commit the old split, then delete its
    shards and any strays.

    In this order a kill at any point leaves no manifest that lists a deleted shard: at worst
    shard files no manifest lists, which the next run refuses until --overwrite; and no marker
    of the split while any of its shards is rewritten (tfpipe/format/commit_markers.py).
    """
    old_shards: list[str] = []
    commit_markers.unmark(journal.dest, split)  # first: no shard of a marked split is rewritten
    if existing is not None and split in existing.splits:
        old_shards = existing.shard_paths(split) + existing.split_file_paths(split)
        rest = {k: v for k, v in existing.splits.items() if k != split}
        if rest:
            existing = dataclasses.replace(existing, splits=rest)
            existing.save(overwrite=True)
        else:
            storage.remove(storage.join(existing.root, MANIFEST_NAME))
            existing = None
        pause_point("overwrite-uncommitted")
    for path in old_shards:
        storage.remove(path)
    for name in journal.stray_shards():
        storage.remove(storage.join(journal.dest, name))
    return existing

"""The plan's shard tasks as self-contained units of work for Beam workers.

A worker shares nothing with the driver but the storage, so each `ShardTask` travels as a
small hidden JSON file in the destination (`save_task`) and the pipeline carries only its
path: a plan of millions of images never travels inside the job graph. JSON, not pickle:
nobody who can write to the destination can make a worker run code.

A shard's inputs travel as their kind writes them (`ShardInputs.to_json`): a table shard's
rows, say, as the files that hold them (`TableRows`), located by the per-file row counts of
the table's first pass, read as the same chunks the local engine reads.

`run_task` writes one shard with the local engine's `write_shard` (same bytes), then its
done-record. Running it twice is harmless: the commit finds the same bytes and succeeds.
"""

from __future__ import annotations

import dataclasses
import json
import os

from tfpipe import storage
from tfpipe.convert.engine import write_shard
from tfpipe.convert.plan import ShardTask
from tfpipe.convert.writer import ResumeJournal, ShardDone, pause_point
from tfpipe.format.jsonobject import JsonObject
from tfpipe.modalities import get_modality


def task_to_json(task: ShardTask) -> JsonObject:
    """The task as JSON values; its inputs by their kind (`ShardInputs.to_json`)."""
    fields = {f.name: getattr(task, f.name) for f in dataclasses.fields(task) if f.name != "inputs"}
    return fields | {"inputs": {"kind": task.inputs.kind, **task.inputs.to_json()}}


def task_from_json(obj: JsonObject) -> ShardTask:
    """The task back from `task_to_json`; its inputs by their kind's `inputs_from_json`."""
    body = dict(obj["inputs"])
    inputs = get_modality(body.pop("kind")).convert.inputs_from_json(body)
    return ShardTask(**{k: v for k, v in obj.items() if k != "inputs"}, inputs=inputs)


def save_task(task: ShardTask) -> str:
    """Writes the task as a hidden temporary of its shard (swept if a run dies); returns its path."""
    path = storage.join(task.dest, storage.temp_name(task.name) + ".task.json")
    storage.write_atomic(path, json.dumps(task_to_json(task)).encode(), overwrite=True)
    return path


def run_task(path: str, split: str) -> ShardDone:
    """A worker's step: writes the shard of the task at `path`, then its done-record."""
    task = task_from_json(json.loads(storage.read_bytes(path)))
    fault_point("started", task.name)
    done = write_shard(task)
    fault_point("committed", task.name)
    ResumeJournal(task.dest, split, task.compression).mark_done(done)
    pause_point("shard-committed")
    return done


FAULT_ENV = "TFPIPE_TEST_FAIL_ONCE"


def fault_point(point: str, shard: str) -> None:
    """A test hook: the first attempt that reaches `point` of a chosen shard fails.

    TFPIPE_TEST_FAIL_ONCE="DIR;started:train-00001-of-00004,committed:train-00002-of-00004"
    fails the first attempt at each listed point; a marker file in DIR (seen by every worker
    process) records it, so the runner's retry passes. Without the variable it does nothing.
    """
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    folder, _, points = spec.partition(";")
    if f"{point}:{shard}" not in points.split(","):
        return
    try:
        os.close(os.open(os.path.join(folder, f"{point}-{shard}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    raise RuntimeError(f"injected fault at {point} of {shard} ({FAULT_ENV})")

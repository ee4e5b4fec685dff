"""The plan's shard tasks as self-contained units of work for Beam workers.

A worker shares nothing with the driver but the storage, so each `ShardTask` travels as a
small hidden JSON file in the destination (`save_task`) and the pipeline carries only its
path: a plan of millions of images never travels inside the job graph. JSON, not pickle:
nobody who can write to the destination can make a worker run code.

A table shard's rows are read from the files that hold them alone (`TableRows`), located by
the per-file row counts of the table's first pass, as the same chunks the local engine reads.

`run_task` writes one shard with the local engine's `write_shard` (same bytes), then its
done-record. Running it twice is harmless: the commit finds the same bytes and succeeds.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from tfpipe import storage
from tfpipe.convert.encode import ImageItem
from tfpipe.convert.engine import write_shard
from tfpipe.convert.plan import ShardTask
from tfpipe.convert.sources import ImageInputs, TableRows
from tfpipe.convert.textinputs import TextInputs
from tfpipe.convert.writer import ResumeJournal, ShardDone, pause_point
from tfpipe.schema import Schema


def task_to_json(task: ShardTask) -> dict[str, Any]:
    inputs = task.inputs
    if isinstance(inputs, ImageInputs):
        body = {"kind": "images", **dataclasses.asdict(inputs)}
    elif isinstance(inputs, TableRows):
        body = {"kind": "rows", **dataclasses.asdict(inputs), "schema": inputs.schema.to_json()}
    elif isinstance(inputs, TextInputs):
        body = {"kind": "text", **inputs.to_json()}
    else:
        raise TypeError(f"Expected ImageInputs, TableRows or TextInputs. Received: {type(inputs).__name__}")
    fields = {f.name: getattr(task, f.name) for f in dataclasses.fields(task) if f.name != "inputs"}
    return fields | {"inputs": body}


def task_from_json(obj: dict[str, Any]) -> ShardTask:
    body = dict(obj["inputs"])
    kind = body.pop("kind")
    if kind == "images":
        inputs: Any = ImageInputs(tuple(ImageItem(**i) for i in body.pop("items")), **body)
    elif kind == "text":
        inputs = TextInputs.from_json(body)
    else:
        files = tuple((str(p), int(i)) for p, i in body.pop("files"))
        nulls = {c: tuple(t) for c, t in body.pop("null_values", {}).items()}
        inputs = TableRows(files, schema=Schema.from_json(body.pop("schema")), null_values=nulls, **body)
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

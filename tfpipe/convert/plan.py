"""The plan of a conversion, and the pure decision of what to do with a destination.

`make_plan` turns a listed `Source` and the options into a frozen `ConvertPlan`: which inputs
go to which shard in which order, decided up front and deterministically. Any engine executes
the plan's `ShardTask`s (each a self-contained, picklable value) with `write_shard`, or in
pieces as the local engine does, and `ConvertPlan.manifest` builds the manifest from the
`ShardDone`s. `decide` says whether a run starts, resumes or is refused, from plain values.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Sequence

from tfpipe import storage
from tfpipe.convert.config import ConvertConfig, ShardConfig, options_left_out, recorded_options
from tfpipe.convert.encode import Piece
from tfpipe.convert.kind import SplitExtras
from tfpipe.convert.sources import ShardInputs, Source
from tfpipe.convert.writer import (
    JournalState,
    ShardDone,
    corrupt_plan_message,
    interrupted_message,
    shard_bounds,
)
from tfpipe.errors import DataError, ManifestError
from tfpipe.format.jsonobject import JsonObject
from tfpipe.format.manifest import Manifest, SkippedInput, Split
from tfpipe.format.schema import Schema
from tfpipe.format.shardnames import shard_name
from tfpipe.modalities import get_modality
from tfpipe.plural import counted

PLAN_VERSION = 3
"""The version of `ConvertPlan.record`; a resumed run compares records, so a change in what
the record holds must change it. 2: each input's identity. 3: paths resolved (a source named
`data/` and `/home/u/data/` is one source), the listing digested relative to the source."""
_NAMED = 5  # changed inputs named in a refusal; the count of the rest is given


@dataclasses.dataclass(frozen=True, slots=True)
class ShardTask:
    """One shard's work: everything needed to write it, in any process.

    Attributes:
      index: the shard's index in the split.
      name: its file name, `{split}-{index:05d}-of-{count:05d}` (plus `.gz`).
      dest: the output directory, local or gs://.
      first: the index in the plan of its first item (image or written row).
      count: how many items it covers.
      inputs: its kind's inputs (`ShardInputs`: images, rows, documents),
        with the encode options.
    """

    index: int
    name: str
    dest: str
    compression: str
    first: int
    count: int
    strict: bool
    inputs: ShardInputs

    def pieces(self) -> Iterator[Piece]:
        """The pieces of encoding work of this shard, in order."""
        return self.inputs.pieces(self.index, self.first, self.count)


@dataclasses.dataclass(frozen=True, slots=True)
class ConvertPlan:
    """What a conversion writes, decided before anything is written.

    Attributes:
      src, dest, split: where from, where to, and the split.
      options: the options as recorded in the manifest (`workers` left out: it changes no
        byte), plus `format` and `format_reason`.
      fingerprint: a digest of the source listing.
      inputs, identities: each input file and its identity (`storage.identity`) when listed.
      n_items, unit: how many images or rows are written ("images" or "rows").
      layout, schema, class_names, label_offset, compression, missing: the manifest's.
      skipped, dropped_rows: what the source left out while listing or scanning.
      shards: one task per shard, in order.
      notes: what the summary says of how the source was read.
      manifest_fields: the dataset's manifest fields its kind fills (`Kind.manifest_fields`:
        a text dataset's tokenizer).
    """

    src: str
    dest: str
    split: str
    options: JsonObject
    fingerprint: str
    n_items: int
    unit: str
    layout: str
    schema: Schema
    class_names: tuple[str, ...]
    label_offset: int
    compression: str
    missing: str
    skipped: tuple[SkippedInput, ...]
    dropped_rows: int
    shards: tuple[ShardTask, ...]
    inputs: tuple[str, ...] = ()
    identities: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    manifest_fields: JsonObject = dataclasses.field(default_factory=dict)

    @property
    def n_shards(self) -> int:
        return len(self.shards)

    @property
    def note(self) -> str:
        """The plan in one line, for the user to check."""
        fmt, reason = self.options["format"], self.options["format_reason"]
        return (
            f"format {fmt} ({reason}); {counted(self.n_items, self.unit.removesuffix('s'), self.unit)} "
            f"into {counted(self.n_shards, 'shard')}"
        )

    def record(self) -> JsonObject:
        """The plan's identity as JSON values: a run resumes only a run with the same record."""
        paths = {k: storage.resolved(v) for k in ("labels_file", "tokenizer") if (v := self.options.get(k))}
        record = {
            "plan_version": PLAN_VERSION,
            "src": storage.resolved(self.src),
            "options": self.options | paths,
            "inputs": self.fingerprint,
            "n_items": self.n_items,
            "n_shards": self.n_shards,
            "identities": list(self.identities),
        }
        return json.loads(json.dumps(record))  # as read back from the journal: lists, not tuples

    def manifest(
        self,
        done: Sequence[ShardDone],
        existing: Manifest | None,
        seconds: float,
        extras: SplitExtras | None = None,
    ) -> Manifest:
        """The manifest of the finished split, joined to the other splits of `existing`.
        `extras`: what its kind attached to the split (`Kind.finish`: a text split's figures and
        lengths file), listed in the split's entry.

        Raises:
          ManifestError: `done` is not one ShardDone per shard of the plan, in order.
        """
        names = [d.info.name for d in done]
        if names != [t.name for t in self.shards]:
            raise ManifestError(
                f"split {self.split!r}: expected the {self.n_shards} shards of the plan, "
                f"in order. Received: {names[:5]}{'...' if len(names) > 5 else ''}"
            )
        split = Split(
            shards=tuple(d.info for d in done),
            skipped=self.skipped + tuple(s for d in done for s in d.skipped),
            dropped_rows=self.dropped_rows,
            source=self.src,
            options=self.options,
            seconds=round(seconds, 3),
            notes=self.notes + (extras.notes if extras is not None else ()),
            **(extras.fields if extras is not None else {}),
        )
        return Manifest(
            root=self.dest,
            layout=self.layout,
            schema=self.schema,
            label_offset=self.label_offset,
            class_names=self.class_names,
            compression=self.compression,
            missing=self.missing,
            splits={**(existing.splits if existing else {}), self.split: split},
            **self.manifest_fields,
        )


def make_plan(
    src: str, dest: str, source: Source, shard_cfg: ShardConfig, cfg: ConvertConfig, fmt: str, reason: str
) -> ConvertPlan:
    """Cuts the source's items into shards; deterministic in the listing and the options.

    Raises:
      DataError: the source holds nothing to convert.
    """
    if source.n_items == 0:
        raise DataError(f"{src}: expected at least one input to convert. Received: none")
    kind = get_modality(source.kind).convert
    n_shards = shard_cfg.count_for(source.n_items, source.estimated_bytes)
    compression = shard_cfg.compression
    shards = tuple(
        ShardTask(
            i,
            shard_name(shard_cfg.split, i, n_shards, compression),
            dest,
            compression,
            a,
            b - a,
            cfg.strict,
            source.shard_inputs(a, b),
        )
        for i, (a, b) in enumerate(shard_bounds(source.n_items, n_shards))
    )
    options = recorded_options(shard_cfg, cfg, options_left_out(kind))
    options["format"], options["format_reason"] = fmt, reason
    return ConvertPlan(
        src,
        dest,
        shard_cfg.split,
        options,
        source.fingerprint,
        source.n_items,
        source.unit,
        source.layout,
        source.schema,
        source.class_names,
        source.label_offset,
        shard_cfg.compression,
        cfg.missing if kind.missing_applies else "error",
        source.skipped,
        source.dropped_rows,
        shards,
        source.inputs,
        source.identities,
        source.notes,
        kind.manifest_fields(source),
    )


# ---- the decision ----


@dataclasses.dataclass(frozen=True, slots=True)
class Start:
    """Write every shard. `overwrite`: first un-commit the split and delete its old shards."""

    overwrite: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class Resume:
    """Finish the interrupted run whose plan record is the same as this run's."""


@dataclasses.dataclass(frozen=True, slots=True)
class Refuse:
    """Leave the destination alone, for this reason (a DestinationError's message)."""

    reason: str


def refuse_finished(existing: Manifest | None, split: str, overwrite: bool) -> Refuse | None:
    """A split already committed is replaced only with `overwrite`."""
    if existing and split in existing.splits and not overwrite:
        return Refuse(
            f"{existing.root} already holds a finished dataset with split {split!r} "
            f"({existing.splits[split].examples} examples). Pass --overwrite (overwrite=True) to replace it."
        )
    return None


def decide(
    existing: Manifest | None, journal: JournalState, plan: ConvertPlan, resume: bool, overwrite: bool
) -> Start | Resume | Refuse:
    """What a run does with its destination; a pure function of plain values.

    Args:
      existing: the destination's committed manifest, or None.
      journal: what the resume journal of the plan's split holds.
      plan: this run's plan.
      resume, overwrite: as passed to `convert`.
    """
    dest, split = plan.dest, plan.split
    refused = refuse_finished(existing, split, overwrite)
    if refused or overwrite:
        return refused or Start(overwrite=True)
    if journal.corrupt is not None:
        return Refuse(corrupt_plan_message(journal.plan_path, journal.corrupt))
    old = journal.plan
    if old is None:
        if journal.stray:
            detail = f"{len(journal.stray)} shard file(s) such as {journal.stray[0]} but no plan"
            return Refuse(interrupted_message(dest, split, detail))
        return Start()
    if not resume:
        names = [shard_name(split, i, old["n_shards"], plan.compression) for i in range(old["n_shards"])]
        detail = f"{sum(1 for n in names if n in journal.done)} of {counted(old['n_shards'], 'shard')} done"
        return Refuse(interrupted_message(dest, split, detail))
    new = plan.record()
    if old.get("plan_version") == new["plan_version"] and old.get("identities") != new["identities"]:
        return Refuse(_changed_inputs(dest, plan, old))
    if old != new:
        return Refuse(
            f"{dest}: --resume needs the same source and options as the interrupted run. "
            f"Differences: {_diff(old, new)}. Pass --overwrite to start over instead."
        )
    return Resume()


def _changed_inputs(dest: str, plan: ConvertPlan, old: JsonObject) -> str:
    """Why a resume is refused when inputs changed since the interrupted run listed them."""
    before = old.get("identities") or []
    if old.get("inputs") != plan.fingerprint or len(before) != len(plan.identities):
        what = f"the source's listing changed ({len(before)} inputs then, {len(plan.identities)} now)"
    else:
        changed = [i for i, (a, b) in enumerate(zip(before, plan.identities, strict=True)) if a != b]
        named = "; ".join(
            f"{plan.inputs[i]} (was {before[i]}, now {plan.identities[i]})" for i in changed[:_NAMED]
        )
        more = f"; and {len(changed) - _NAMED} more" if len(changed) > _NAMED else ""
        what = f"{len(changed)} input(s) changed: {named}{more}"
    return (
        f"{dest}: --resume needs the inputs of the interrupted run unchanged, but {what}. The "
        "shards written so far hold the inputs as they were, so the dataset would mix two "
        "versions. Pass --overwrite (overwrite=True) to convert the inputs as they are now."
    )


def _diff(old: JsonObject, new: JsonObject) -> str:
    old, new = ({k: v for k, v in r.items() if k != "identities"} for r in (old, new))
    flat_old = old.get("options", {}) | {k: v for k, v in old.items() if k != "options"}
    flat_new = new.get("options", {}) | {k: v for k, v in new.items() if k != "options"}
    keys = sorted(k for k in set(flat_old) | set(flat_new) if flat_old.get(k) != flat_new.get(k))
    return ", ".join(f"{k} was {flat_old.get(k)!r}, now {flat_new.get(k)!r}" for k in keys) or "none"

"""What a kind of source (a modality: images, tables, text) gives convert's core.

The core (plan, engine, writer, run, and the Beam engine) names no modality: it opens a
source through its `Kind`, encodes each piece by the piece's own `Work.encode`, adds up the
pieces' `Tally`s without knowing what they count, and commits what the kind's `finish`
attaches to the split. A kind is registered by name (`tfpipe.convert.kinds.register_kind`), as
presets are; a new modality adds a kind and touches none of the core. This module is the
base the kinds import, so that no kind imports the registry that loads it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol

from tfpipe.convert.config import TEXT_OPTIONS


class Tally(Protocol):
    """What a kind's pieces held beyond their records (text: documents, tokens, lengths), added
    up per shard by the writer and kept in the shard's done-record. A tally class makes its
    empty tally when called with no argument."""

    @property
    def kind(self) -> str:
        """Its kind's name: the key of a done-record's tally."""
        ...

    def merge(self, later: Any) -> None:
        """Adds `later` (the tally of the pieces that follow) to this one, in place."""
        ...

    def to_json(self) -> dict[str, Any]: ...

    def kept(self) -> Any:
        """The tally a conversion keeps in memory once its done-record is written (text: without
        its documents' lengths, which the kind's `finish` reads back from the journal)."""
        ...


class SplitExtras(Protocol):
    """What a kind adds to a finished split besides its shards (text: the lengths file, the
    figures of its documents).

    Attributes:
      files: (name, local path) of the files committed with the split, after its shards.
      notes: what the split's manifest entry notes of them.
      fields: the fields of the split's manifest entry the kind fills (`manifest.Split`).
    """

    @property
    def files(self) -> tuple[tuple[str, str], ...]: ...

    @property
    def notes(self) -> tuple[str, ...]: ...

    @property
    def fields(self) -> dict[str, Any]: ...

    def check(self, src: str) -> None:
        """Refuses to commit the split (raises DataError) when what it holds is unusable."""
        ...

    def discard(self) -> None:
        """Removes the local files once committed or refused. Never raises."""
        ...


def no_split_extras(plan: Any, done: Any, tally_of: Any) -> None:
    """A kind that attaches nothing to a split (images, tables)."""
    return None


@dataclasses.dataclass(frozen=True)
class Kind:
    """One modality, as convert's core and the bench see it.

    Attributes:
      name: the manifest's `layout` group and the name a source carries (`Source.kind`).
      formats: the `--format` values (and manifest layouts) this kind reads.
      open: `open(src, fmt, cfg, joins, scan_table, dest) -> Source`: lists (and scans) the source.
      inputs_from_json: a shard's inputs (`ShardInputs.to_json()`) back from JSON, for a Beam worker.
      tally_from_json: its done-records' tally back from JSON; None if its pieces tally nothing.
      finish: `finish(plan, done, tally_of) -> SplitExtras | None`: what the split attaches once
        its shards are written; `tally_of(done)` reads a shard's whole tally from its journal.
      committed: `committed(source, manifest, split)`: called once the split is committed (images:
        warn of a class every image of which was skipped).
      manifest_fields: `manifest_fields(source) -> dict`: the dataset's manifest fields the kind
        fills (text: its tokenizer).
      options_left_out: the `ConvertConfig` options its manifest does not record (another
        kind's).
      rereads_inputs: the engine reads inputs again after the first pass (tables, text): the
        run refuses to commit if one changed meanwhile.
      missing_applies: the `missing` option is recorded in the manifest (tables).
      layouts: the manifest layouts its sources write (`Source.layout`); () means its formats.
    """

    name: str
    formats: tuple[str, ...]
    open: Callable[..., Any]
    inputs_from_json: Callable[[dict[str, Any]], Any]
    tally_from_json: Callable[[dict[str, Any]], Tally] | None = None
    finish: Callable[..., SplitExtras | None] = no_split_extras
    manifest_fields: Callable[[Any], dict[str, Any]] = lambda source: {}
    committed: Callable[[Any, Any, str], None] = lambda source, manifest, split: None
    options_left_out: tuple[str, ...] = TEXT_OPTIONS
    rereads_inputs: bool = False
    missing_applies: bool = False
    layouts: tuple[str, ...] = ()

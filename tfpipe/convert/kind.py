"""What a modality's convert half gives convert's core: its `Kind`.

The core (plan, engine, writer, run, and the Beam engine) names no modality: it opens a
source through the `Kind` of the modality that reads its format, encodes each piece by the
piece's own `Work.encode`, adds up the pieces' `Tally`s without knowing what they count, and
commits what the kind's `finish` attaches to the split. A modality (`tfpipe.modalities`) is
registered by name, as presets are; a new one brings its kind and touches none of the core.
This module is the base the kinds import.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, Self


@dataclasses.dataclass(frozen=True, slots=True)
class FormatChoice:
    """The source format `--format auto` picked, and why (for the user to check)."""

    format: str
    reason: str


@dataclasses.dataclass(frozen=True, slots=True)
class Folder:
    """A source folder as detection sees it: its visible subfolders and files (names), and the
    labels file given (`--labels`), if any."""

    path: str
    dirs: tuple[str, ...]
    files: tuple[str, ...]
    labels_file: str | None = None


Sign = tuple[int, Callable[[Folder], FormatChoice | None]]
"""A sign of a kind's source in a folder, and its rank: detection weighs every kind's signs
in rank order, the lowest first, and the first that answers picks the format (tables: a saved
dataset 10, Hive partitions 20, table files 40; images: class folders 30, a flat folder with a
labels file 50)."""

OnWorkers = Callable[[str, Callable[[Any], dict[str, Any]], Sequence[Any]], list[dict[str, Any]]]
"""An engine's `on_workers(name, fn, items)`: `fn` (picklable) run on each item on the engine's
workers, its JSON results in the items' order. A kind's first pass may run a file at a time on
it (tables); the local engine has none (None), and the pass runs in this process."""


class Tally(Protocol):
    """What a kind's pieces held beyond their records (text: documents, tokens, lengths), added
    up per shard by the writer and kept in the shard's done-record. A tally class makes its
    empty tally when called with no argument."""

    @property
    def kind(self) -> str:
        """Its kind's name: the key of a done-record's tally."""
        ...

    def merge(self, later: Self) -> None:
        """Adds `later` (the tally of the pieces that follow) to this one, in place."""
        ...

    def to_json(self) -> dict[str, Any]: ...

    def kept(self) -> Self:
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


def no_split_extras(plan: object, done: object, tally_of: object) -> None:
    """A kind that attaches nothing to a split (images, tables)."""
    return None


@dataclasses.dataclass(frozen=True)
class Kind:
    """One modality, as convert's core and the bench see it.

    Attributes:
      name: the manifest's `layout` group and the name a source carries (`Source.kind`).
      formats: the `--format` values (and manifest layouts) this kind reads.
      open: `open(src, fmt, cfg, joins, dest, on_workers) -> Source`: lists (and scans) the
        source; `on_workers` is the engine's (`OnWorkers`), or None.
      inputs_from_json: a shard's inputs (`ShardInputs.to_json()`) back from JSON, for a Beam worker.
      tally_from_json: its done-records' tally back from JSON; None if its pieces tally nothing.
      finish: `finish(plan, done, tally_of) -> SplitExtras | None`: what the split attaches once
        its shards are written; `tally_of(done)` reads a shard's whole tally from its journal.
      committed: `committed(source, manifest, split)`: called once the split is committed (images:
        warn of a class every image of which was skipped).
      manifest_fields: `manifest_fields(source) -> dict`: the dataset's manifest fields the kind
        fills (text: its tokenizer).
      options: the `ConvertConfig` fields only its sources take, each with the formats of its
        own it applies to (() for all); set for another modality's source, they are refused
        (`config.check_applies`).
      own_options_only: its manifest records its own options and the shared ones only (text);
        else every option but those of such a kind (`config.options_left_out`).
      sources: what it calls its sources of a tuple of its formats, for those messages ("image
        folders"); its formats' entry is its word for all of them.
      nouns: what one source of each of its formats is ("a CSV table").
      unused: `unused(cfg) -> {option: where}`: options it takes that `cfg` makes it ignore,
        refused naming where they apply (images: seed with a labels file).
      split_files: `split_files(split) -> names`: the files its `finish` commits beside a split's
        shards (text: the lengths file), which an interrupted run may leave behind.

    On the command line (`tfpipe convert`):
      add_flags: `add_flags(group)`: adds its options' flags to the argparse group of its name.
      flag_options: `flag_options(args) -> dict`: the options its flags give `convert()` in
        another form than one flag each (tables: --null-values, --column-type).

    How `--format auto` finds it (convert/detect.py weighs every kind's answers):
      claims: `claims(src, cfg, joins) -> reason | None`: it reads the source whatever it holds
        (text: a tokenizer option was given, or the dataset joined is text).
      detect_file: `detect_file(src) -> FormatChoice | None`: the format of one file (a local
        file by its content, a gs:// object by its name), or None.
      signs: `Sign`s of its sources in a folder, each with its rank.
      check_auto: `check_auto(choice, src, cfg)`: refuses a format picked by content that is its
        own yet not what the source is (tables: JSON Lines whose records hold text in the text
        field are a corpus whose tokenizer was forgotten).
      explains: `explains(src) -> Exception | None`: why nothing could be picked, when the
        source is its own yet needs an option (text: a corpus needs a tokenizer).
      expects: what its sources look like, for the refusal of a source no kind detects.
      split_folder: `split_folder(name, entries) -> (flags, why) | None`: what a split folder
        (`train/`) of its sources needs besides the split (images: a flat folder of images,
        `--labels FILE`), with a comment why; entries are (name, is_dir).
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
    options: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    own_options_only: bool = False
    sources: Mapping[tuple[str, ...], str] = dataclasses.field(default_factory=dict)
    nouns: Mapping[str, str] = dataclasses.field(default_factory=dict)
    unused: Callable[[Any], Mapping[str, str]] = lambda cfg: {}
    split_files: Callable[[str], tuple[str, ...]] = lambda split: ()
    add_flags: Callable[[Any], None] = lambda group: None
    flag_options: Callable[[Any], dict[str, Any]] = lambda args: {}
    claims: Callable[[str, Any, Any], str | None] = lambda src, cfg, joins: None
    detect_file: Callable[[str], FormatChoice | None] = lambda src: None
    signs: tuple[Sign, ...] = ()
    check_auto: Callable[[FormatChoice, str, Any], None] = lambda choice, src, cfg: None
    explains: Callable[[str], Exception | None] = lambda src: None
    expects: str = ""
    split_folder: Callable[[str, Sequence[tuple[str, bool]]], tuple[str, str] | None] = lambda name, entries: (
        None
    )
    rereads_inputs: bool = False
    missing_applies: bool = False
    layouts: tuple[str, ...] = ()

"""Sources: what a scanned input holds, and the inputs of each shard, for any engine.

A `Source` is listed (and for tables and text, read once to check it) before anything is
written, by the kind of the modality that reads its format (`open_source`, `kind.Kind.open`).
It then hands out, per shard, a self-contained and picklable description of that shard's inputs
(`ShardInputs`: a kind's `ImageInputs`, `TableRows`, `TextInputs`), which turns into `Piece`s of
encoding work that carry their own shard index and first item. Nothing here imports TensorFlow,
nor names a modality.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from tfpipe.convert.config import ConvertConfig, ShardConfig, check_applies
from tfpipe.convert.encode import Piece
from tfpipe.convert.kind import OnWorkers
from tfpipe.errors import DestinationError
from tfpipe.format.jsonobject import JsonObject
from tfpipe.format.manifest import Manifest, SkippedInput
from tfpipe.format.schema import Schema
from tfpipe.modalities import modality_of_format


class ShardInputs(Protocol):
    """The inputs of one shard, and how they split into pieces of encoding work. `kind`: its
    kind's name; `to_json()` is read back by the kind's `inputs_from_json` (a Beam worker)."""

    kind: str

    def to_json(self) -> JsonObject: ...

    def pieces(self, shard: int, first: int, count: int) -> Iterator[Piece]:
        """The pieces of shard `shard`, which holds items first..first+count-1, in order."""
        ...


class PlannedShard(Protocol):
    """What a source needs of a planned shard (`plan.ShardTask`): its place and its pieces."""

    index: int
    first: int
    count: int

    def pieces(self) -> Iterator[Piece]: ...


class Source(Protocol):
    """A listed input of any kind that convert can plan and execute.

    Attributes:
      kind: the name of its kind (`kind.Kind`), which the core looks up and never compares.
      layout: the manifest's layout ("imagenet", "images", "table", "text").
      unit: what an item is, "images", "rows" or "documents".
      fingerprint: a digest of the listing, so a resumed run knows the inputs are the same.
      inputs, identities: each input (image file or table file) and its `storage.identity`
        (size, modification time, and for tables a content checksum), so a resumed run
        refuses an input that changed, by name.
      skipped: inputs left out while listing or scanning the source.
      dropped_rows: table rows left out before planning (null label, missing_label="drop").
      notes: what the summary says of how the source was read (a column kept as text).
      attachments: (name, bytes) of files stored in the dataset before its shards (a text
        corpus's tokenizer).
    """

    kind: str
    layout: str
    schema: Schema
    n_items: int
    estimated_bytes: int
    class_names: tuple[str, ...]
    label_offset: int
    fingerprint: str
    unit: str
    skipped: tuple[SkippedInput, ...]
    dropped_rows: int
    inputs: tuple[str, ...]
    identities: tuple[str, ...]
    notes: tuple[str, ...]
    attachments: tuple[tuple[str, bytes], ...]

    def shard_inputs(self, first: int, end: int) -> ShardInputs:
        """The inputs of the shard holding items first..end-1."""
        ...

    def pieces(self, tasks: Sequence[PlannedShard]) -> Iterator[Piece]:
        """The pieces of all `tasks` (in shard order), reading each input once."""
        ...

    def with_schema(self, schema: Schema) -> Source:
        """The source written with `schema`, that of the dataset it joins (`joining`)."""
        ...


def relative(path: str, src: str) -> str:
    """`path` (listed under `src`) relative to `src`: a listing's digest does not depend on how
    the source was spelled (`data/` or `/home/u/data/`)."""
    return path[len(src) :] if path.startswith(src) else path


def joining(existing: Manifest | None, source: Source, shard_cfg: ShardConfig, dest: str) -> Source:
    """The source of a new split, written with the schema of the dataset it joins (`existing`:
    None when it joins none).

    Raises:
      DestinationError: the split does not fit the dataset, naming what differs.
    """
    if existing is None:
        return source
    for what, have, new in (
        ("layout", existing.layout, source.layout),
        ("compression", existing.compression, shard_cfg.compression),
        ("label_offset", existing.label_offset, source.label_offset),
        ("class_names", existing.class_names, source.class_names),
    ):
        if have != new:
            raise DestinationError(
                f"{dest} holds splits {sorted(existing.splits)} with {what} {have!r}; the new split "
                f"{shard_cfg.split!r} would have {what} {new!r}. Write it to another destination."
            )
    schema, differences = existing.schema.joined_by(source.schema)
    if schema is None:
        raise DestinationError(_schema_differs(existing, shard_cfg.split, differences, dest))
    return source if schema == source.schema else source.with_schema(schema)


_DIFFERENCES_NAMED = 3


def _schema_differs(existing: Manifest, split: str, differences: list[str], dest: str) -> str:
    named = "; ".join(differences[:_DIFFERENCES_NAMED])
    more = (
        f"; and {len(differences) - _DIFFERENCES_NAMED} more" if len(differences) > _DIFFERENCES_NAMED else ""
    )
    masks = any("has nulls in this split" in d for d in differences)
    way = (
        " A split with nulls beside splits without them: convert the split with nulls first, with "
        "--missing fill, into a new destination, then the others beside it (a split without "
        "nulls in a column writes the dataset's null mask as all 0), or convert every split with "
        "nulls filled in the source."
        if masks
        else " Write it to another destination, or make the source's columns match."
    )
    return (
        f"{dest} holds splits {sorted(existing.splits)}, whose records the new split {split!r} "
        f"would not match: {named}{more}.{way}"
    )


def open_source(
    src: str,
    fmt: str,
    cfg: ConvertConfig,
    joins: Manifest | None,
    dest: str = "",
    on_workers: OnWorkers | None = None,
) -> Source:
    """Lists (and for tables and text, scans) the source, by the convert half of the modality
    that reads `fmt`.

    Args:
      joins: the dataset the new split joins, whose classes it keeps; None if none.
      dest: the dataset directory (a text corpus's tokenizer is stored there).
      on_workers: the engine's way to run a first pass a file at a time on its workers.

    Raises:
      DataError: the source does not fit the rules, naming the file, column and row.
      ConfigError: an option of another modality's sources.
    """
    check_applies(cfg, fmt)
    source: Source = modality_of_format(fmt).convert.open(src, fmt, cfg, joins, dest, on_workers)
    return source

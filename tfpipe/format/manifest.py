"""The manifest, `tfpipe.json`: what a converted dataset holds. Plain JSON, never pickle.

Readers trust the manifest, never a directory listing. Writing it is the commit point of a
conversion. Shard names are checked on load: absolute names and `..` are refused.
"""

from __future__ import annotations

import dataclasses
import json

from tfpipe import storage
from tfpipe._version import __version__
from tfpipe.errors import ManifestError
from tfpipe.format.jsonobject import JsonObject
from tfpipe.format.manifest_checks import check_checksum, check_relative_name, is_count
from tfpipe.format.manifest_text import SplitText, TokenizerInfo
from tfpipe.format.schema import Schema
from tfpipe.format.shardnames import ShardName, check_shard_sets

MANIFEST_NAME = "tfpipe.json"
FORMAT = "tfpipe.manifest"
FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True, slots=True)
class ShardInfo:
    """One finished shard: relative name, example count, size in bytes, and a checksum of the
    file as `<algorithm>:<hex>` (tfpipe writes crc32c, as GCS does; sha256 is read too)."""

    name: str
    examples: int
    bytes: int
    checksum: str

    def __post_init__(self) -> None:
        check_relative_name(self.name)
        for what in ("examples", "bytes"):
            value = getattr(self, what)
            if not is_count(value):
                raise ManifestError(
                    f"shard {self.name!r}: expected {what} to be an int in 0..2**63-1. "
                    f"Received: {what}={value!r}"
                )
        check_checksum(f"shard {self.name!r}", self.checksum)

    def to_json(self) -> JsonObject:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, obj: JsonObject) -> ShardInfo:
        try:
            return cls(str(obj["name"]), obj["examples"], obj["bytes"], str(obj["checksum"]))
        except ManifestError:
            raise
        except (KeyError, TypeError, ValueError) as e:
            raise ManifestError(f"Malformed shard entry: {e!r}. Received: {str(obj)[:200]}") from e


@dataclasses.dataclass(frozen=True, slots=True)
class SkippedInput:
    """An input left out of the dataset, and why."""

    input: str
    reason: str


@dataclasses.dataclass(frozen=True, slots=True)
class Split:
    """The shards of one split (train, validation, ...)."""

    shards: tuple[ShardInfo, ...]
    skipped: tuple[SkippedInput, ...] = ()
    dropped_rows: int = 0  # table rows left out for a null label (missing_label="drop")
    source: str = ""
    options: JsonObject = dataclasses.field(default_factory=dict)
    seconds: float = 0.0
    # How the source was read where it differs from pandas (a column kept as text).
    notes: tuple[str, ...] = ()
    # Storage requests the converting process retried before this manifest's commit (HTTP 429,
    # 5xx, dropped connections), by kind: the local engine's writes and listings, not the encode
    # workers' reads of a gs:// source. None when not counted (Beam's workers retry on their own).
    retries: dict[str, int] | None = None
    # A text split's documents, tokens and length histogram (layout "text"), else None.
    text: SplitText | None = None

    @property
    def examples(self) -> int:
        return sum(s.examples for s in self.shards)

    @property
    def bytes(self) -> int:
        return sum(s.bytes for s in self.shards)

    def to_json(self) -> JsonObject:
        return {
            "examples": self.examples,
            "bytes": self.bytes,
            "shards": [s.to_json() for s in self.shards],
            "skipped": [dataclasses.asdict(s) for s in self.skipped],
            "dropped_rows": self.dropped_rows,
            "source": self.source,
            "options": self.options,
            "seconds": round(self.seconds, 3),
            **({} if self.retries is None else {"retries": self.retries}),
            **({} if self.text is None else {"text": self.text.to_json()}),
        } | ({"notes": list(self.notes)} if self.notes else {})

    @classmethod
    def from_json(cls, obj: JsonObject) -> Split:
        shards = tuple(ShardInfo.from_json(s) for s in obj.get("shards", []))
        declared = obj.get("examples")
        total = sum(s.examples for s in shards)
        if declared is not None and declared != total:
            raise ManifestError(f"Split declares {declared!r} examples but its shards hold {total}")
        return cls(
            shards=shards,
            skipped=tuple(SkippedInput(str(s["input"]), str(s["reason"])) for s in obj.get("skipped", [])),
            dropped_rows=int(obj.get("dropped_rows", 0)),
            source=str(obj.get("source", "")),
            options=dict(obj.get("options", {})),
            seconds=float(obj.get("seconds", 0.0)),
            notes=tuple(str(n) for n in obj.get("notes", [])),
            retries=_retries(obj.get("retries")),
            text=None if obj.get("text") is None else SplitText.from_json(obj["text"]),
        )


def _retries(obj: object) -> dict[str, int] | None:
    if obj is None:
        return None
    if not (isinstance(obj, dict) and all(isinstance(k, str) and is_count(v) for k, v in obj.items())):
        raise ManifestError(f"Expected retries as {{kind: count}}. Received: {str(obj)[:200]}")
    return dict(obj)


@dataclasses.dataclass(frozen=True, slots=True)
class Manifest:
    """A converted dataset.

    Attributes:
      root: the directory (local or gs://) the manifest was loaded from or written to.
      layout: "imagenet", "images", "table" or "text".
      schema: the record features and the label.
      label_offset: the value of the first class's label (1 for imagenet_to_gcs layout).
      class_names: class (synset) names by label - label_offset.
      compression: "none" or "gzip".
      splits: split name -> Split.
      missing: "error" or "fill": how nulls in tables were handled.
      tokenizer: the tokenizer of a text dataset (layout "text"), else None.
    """

    root: str
    layout: str
    schema: Schema
    label_offset: int = 0
    class_names: tuple[str, ...] = ()
    compression: str = "none"
    splits: dict[str, Split] = dataclasses.field(default_factory=dict)
    missing: str = "error"
    tokenizer: TokenizerInfo | None = None
    tfpipe_version: str = __version__

    def split(self, name: str) -> Split:
        try:
            return self.splits[name]
        except KeyError:
            raise ManifestError(
                f"{storage.join(self.root, MANIFEST_NAME)} has no split {name!r}; "
                f"it has {sorted(self.splits)}"
            ) from None

    def shard_paths(self, split: str) -> list[str]:
        return [storage.join(self.root, s.name) for s in self.split(split).shards]

    def lengths_path(self, split: str) -> str | None:
        """The path of a text split's lengths file, or None (not text, or converted without one)."""
        text = self.split(split).text
        return storage.join(self.root, text.lengths.file) if text and text.lengths else None

    def split_file_paths(self, split: str) -> list[str]:
        """The files other than shards committed with a split (a text split's lengths file)."""
        path = self.lengths_path(split)
        return [path] if path else []

    @property
    def tf_compression(self) -> str:
        """The `compression_type` argument for `tf.data.TFRecordDataset`."""
        return "GZIP" if self.compression == "gzip" else ""

    def to_json(self) -> JsonObject:
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "tfpipe_version": self.tfpipe_version,
            "layout": self.layout,
            "schema": self.schema.to_json(),
            "label_offset": self.label_offset,
            "class_names": list(self.class_names),
            "compression": self.compression,
            "missing": self.missing,
            "splits": {k: v.to_json() for k, v in self.splits.items()},
        } | ({} if self.tokenizer is None else {"tokenizer": self.tokenizer.to_json()})

    @classmethod
    def from_json(cls, obj: JsonObject, root: str) -> Manifest:
        where = storage.join(root, MANIFEST_NAME)
        if not isinstance(obj, dict) or obj.get("format") != FORMAT:
            raise ManifestError(f"{where}: expected a {FORMAT!r} JSON object. Received: {str(obj)[:200]}")
        version = obj.get("format_version")
        if version != FORMAT_VERSION:
            raise ManifestError(
                f"{where}: expected format_version {FORMAT_VERSION}. Received: {version!r} "
                "(written by a different tfpipe; upgrade tfpipe or re-convert)"
            )
        try:
            label_offset = obj.get("label_offset", 0)
            is_int = isinstance(label_offset, int) and not isinstance(label_offset, bool)
            if not (is_int and abs(label_offset) <= 2**31):
                raise ManifestError(f"expected label_offset to be a small int. Received: {label_offset!r}")
            splits = {str(k): Split.from_json(v) for k, v in obj.get("splits", {}).items()}
            for name, split in splits.items():
                check_shard_list(name, split.shards)
            _check_unique([s.name for split in splits.values() for s in split.shards], "the manifest")
            return cls(
                root=root,
                layout=str(obj["layout"]),
                schema=Schema.from_json(obj["schema"]),
                label_offset=label_offset,
                class_names=tuple(obj.get("class_names", ())),
                compression=str(obj.get("compression", "none")),
                splits=splits,
                missing=str(obj.get("missing", "error")),
                tokenizer=None if obj.get("tokenizer") is None else TokenizerInfo.from_json(obj["tokenizer"]),
                tfpipe_version=str(obj.get("tfpipe_version", "")),
            )
        except ManifestError as e:
            raise ManifestError(f"{where}: {e}") from None
        except (KeyError, TypeError, ValueError) as e:
            raise ManifestError(f"{where}: malformed manifest: {e!r}") from e

    @classmethod
    def load(cls, root: str) -> Manifest:
        """Reads `root/tfpipe.json`.

        Raises:
          ManifestError: there is no manifest, it is not valid JSON, or it is unsafe.
        """
        manifest = cls.find(root)
        if manifest is None:
            raise ManifestError(
                f"Expected a tfpipe dataset at {root}: no {MANIFEST_NAME} there. "
                "Convert one with `tfpipe convert`, or pass shard files or a glob."
            )
        return manifest

    @classmethod
    def find(cls, root: str) -> Manifest | None:
        """Reads `root/tfpipe.json` if there is one: None when `root` holds no manifest.

        Raises:
          ManifestError: the manifest is not valid JSON, or it is unsafe.
        """
        path = storage.join(root, MANIFEST_NAME)
        try:
            text = storage.read_bytes(path)
        except (FileNotFoundError, NotADirectoryError):  # no manifest, or `root` is a file
            return None
        try:
            obj = json.loads(text)
        except ValueError as e:
            raise ManifestError(f"{path} is not valid JSON: {e}") from None
        return cls.from_json(obj, root)

    def save(self, overwrite: bool = True) -> None:
        """Writes the manifest atomically. This is the commit point of a conversion."""
        data = json.dumps(self.to_json(), indent=1, sort_keys=False).encode() + b"\n"
        storage.write_atomic(storage.join(self.root, MANIFEST_NAME), data, overwrite=overwrite)


CHECKSUM_ALGORITHM = "crc32c"
"""crc32c: what GCS stores for every object, and ~10x faster than sha256 here (6.4 GB/s against
0.65 GB/s on one core), so the single writer process is never bound by it."""


class Checksum:
    """A running file checksum, printed as `<algorithm>:<hex>`."""

    def __init__(self, algorithm: str = CHECKSUM_ALGORITHM) -> None:
        if algorithm == "crc32c":
            import google_crc32c

            self._h = google_crc32c.Checksum()
        elif algorithm == "sha256":
            import hashlib

            self._h = hashlib.sha256()
        else:
            raise ManifestError(f"Expected a crc32c or sha256 checksum. Received: algorithm {algorithm!r}")
        self.algorithm = algorithm

    @classmethod
    def like(cls, checksum: str) -> Checksum:
        """A new Checksum of the algorithm that `checksum` (e.g. "crc32c:1a2b3c4d") names."""
        return cls(checksum.partition(":")[0])

    def update(self, data: bytes) -> None:
        self._h.update(data)

    def __str__(self) -> str:
        return f"{self.algorithm}:{self._h.hexdigest() if self.algorithm == 'sha256' else self._h.digest().hex()}"


def _check_unique(names: list[str], where: str) -> None:
    seen: set[str] = set()
    twice = sorted({n for n in names if n in seen or seen.add(n)})  # type: ignore[func-returns-value]
    if twice:
        raise ManifestError(
            f"{where} lists shard(s) {twice[:5]} more than once; each shard must appear once "
            "(a reader would yield its records twice)"
        )


def check_shard_list(split: str, shards: tuple[ShardInfo, ...]) -> None:
    """Refuses a split that lists a shard twice, or whose tfpipe-named shards are not one
    whole set in order (`check_shard_sets`): a list with one of them missing or repeated
    would silently drop or duplicate its records."""
    _check_unique([s.name for s in shards], f"split {split!r}")
    names = [ShardName.parse(s.name) for s in shards]
    if not shards or not all(n is not None and n.stem == split for n in names):
        return  # names from another tool: nothing to check them against
    check_shard_sets([s.name for s in shards], f"split {split!r}", ManifestError, listed=True)

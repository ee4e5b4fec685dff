"""`tfpipe inspect --verify`: read every shard and check it against the manifest.

Checks, per shard: the file exists, its size and checksum match, every TFRecord's length and data
CRCs are right, and the record count matches. A text dataset's lengths files are checked by size
and checksum, and its tokenizer file against the fingerprint its manifest records. Reads with
tfpipe.format.codec (no TensorFlow), so a mismatch can be named by shard and record index.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import zlib
from collections.abc import Callable, Iterator

from tfpipe import storage
from tfpipe.errors import DataError, ManifestError
from tfpipe.format.manifest import Checksum, Manifest, ShardInfo
from tfpipe.format.tfrecord import read_records


@dataclasses.dataclass(frozen=True, slots=True)
class ShardCheck:
    split: str
    name: str
    records: int
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclasses.dataclass(frozen=True, slots=True)
class VerifyReport:
    """Each shard's check, each text split's lengths file's (its `records` are the lengths it
    holds), and a text dataset's tokenizer file's."""

    manifest: Manifest
    shards: tuple[ShardCheck, ...]
    tokenizer: ShardCheck | None = None
    lengths: tuple[ShardCheck, ...] = ()

    @property
    def checks(self) -> tuple[ShardCheck, ...]:
        """Every check: the shards, the lengths files, the tokenizer file."""
        return (*self.shards, *self.lengths, *((self.tokenizer,) if self.tokenizer else ()))

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def problems(self) -> list[str]:
        return [f"{c.name}: {p}" for c in self.checks for p in c.problems]


class _HashingReader:
    def __init__(self, f, checksum: Checksum) -> None:
        self._f = f
        self.checksum = checksum
        self.bytes = 0

    def read(self, n: int = -1) -> bytes:
        data = self._f.read(n)
        self.checksum.update(data)
        self.bytes += len(data)
        return data

    def drain(self) -> None:
        while self.read(1 << 20):
            pass


def check_shard(
    manifest: Manifest, split: str, shard: ShardInfo, owners: dict[str, str] | None = None
) -> ShardCheck:
    """Reads one shard and compares it with its manifest entry.

    Args:
      owners: checksum -> shard name for every shard of the manifest, so that a file holding
        another shard's bytes (swapped or copied) is named as such.
    """
    path = storage.join(manifest.root, shard.name)
    problems: list[str] = []
    records = 0
    try:
        raw = storage.open_read(path)
    except OSError as e:
        return ShardCheck(split, shard.name, 0, (f"missing or unreadable: {e}",))
    with raw:
        try:
            hashing = _HashingReader(raw, Checksum.like(shard.checksum))
        except ManifestError as e:
            return ShardCheck(split, shard.name, 0, (str(e),))
        stream = gzip.GzipFile(fileobj=hashing, mode="rb") if manifest.compression == "gzip" else hashing
        try:
            for _ in read_records(stream, where=f"{shard.name}"):  # type: ignore[arg-type]
                records += 1
        except DataError as e:
            problems.append(str(e).removeprefix(f"{shard.name}: "))
        except (OSError, EOFError, zlib.error) as e:
            problems.append(f"record {records}: cannot decompress ({e})")
        hashing.drain()
    if records != shard.examples and not problems:
        problems.append(f"found {records} records, where the manifest says {shard.examples}")
    if hashing.bytes != shard.bytes:
        problems.append(f"found {hashing.bytes} bytes, where the manifest says {shard.bytes}")
    digest = str(hashing.checksum)
    if digest != shard.checksum:
        other = (owners or {}).get(digest)
        whose = (
            f" (the file holds the bytes of shard {other}: swapped or copied)"
            if other and other != shard.name
            else ""
        )
        problems.append(f"checksum mismatch: manifest {shard.checksum}, file {digest}{whose}")
    return ShardCheck(split, shard.name, records, tuple(problems))


def check_lengths(manifest: Manifest, split: str) -> ShardCheck | None:
    """Reads a text split's lengths file and compares it with its manifest entry (None: the
    split has none)."""
    text = manifest.split(split).text
    if text is None or text.lengths is None:
        return None
    entry = text.lengths
    try:
        data = storage.read_bytes(storage.join(manifest.root, entry.file))
    except OSError as e:
        return ShardCheck(split, entry.file, 0, (f"missing or unreadable: {e}",))
    problems = []
    if len(data) != entry.bytes:
        problems.append(f"found {len(data)} bytes, where the manifest says {entry.bytes}")
    checksum = Checksum.like(entry.checksum)
    checksum.update(data)
    if str(checksum) != entry.checksum:
        problems.append(f"checksum mismatch: manifest {entry.checksum}, file {checksum}")
    return ShardCheck(split, entry.file, len(data) // 4, tuple(problems))


def check_tokenizer(manifest: Manifest) -> ShardCheck | None:
    """Compares a text dataset's stored tokenizer file with the fingerprint its manifest
    records (None: the dataset has no tokenizer). A replaced file would detokenize, and
    re-tokenize a new split, with other ids in silence."""
    info = manifest.tokenizer
    if info is None:
        return None
    try:
        data = storage.read_bytes(storage.join(manifest.root, info.file))
    except (OSError, storage.StorageError) as e:
        return ShardCheck("", info.file, 0, (f"missing or unreadable: {e}",))
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    if digest == info.fingerprint:
        return ShardCheck("", info.file, 0, ())
    return ShardCheck(
        "",
        info.file,
        0,
        (
            f"fingerprint mismatch: manifest {info.fingerprint}, file {digest}: not the tokenizer the "
            "dataset was converted with (replaced or changed after it). Put that tokenizer back, or "
            "convert the corpus again",
        ),
    )


def verify(root: str, on_shard: Callable[[ShardCheck], None] | None = None) -> VerifyReport:
    """Checks every shard of every split of the dataset at `root`, each text split's lengths
    file (its `records` are the lengths it holds), and a text dataset's tokenizer file."""
    manifest = Manifest.load(root)
    shards: list[ShardCheck] = []
    lengths: list[ShardCheck] = []
    for check, is_shard in _checks(manifest):
        (shards if is_shard else lengths).append(check)
        if on_shard:
            on_shard(check)
    return VerifyReport(manifest, tuple(shards), check_tokenizer(manifest), tuple(lengths))


def _checks(manifest: Manifest) -> Iterator[tuple[ShardCheck, bool]]:
    """Each split's shards' checks, then its lengths file's: (check, whether it is a shard's)."""
    owners = {s.checksum: s.name for split in manifest.splits.values() for s in split.shards}
    for split_name, split in manifest.splits.items():
        for shard in split.shards:
            yield check_shard(manifest, split_name, shard, owners), True
        lengths = check_lengths(manifest, split_name)
        if lengths is not None:
            yield lengths, False

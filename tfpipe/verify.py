"""`tfpipe inspect --verify`: read every shard and check it against the manifest.

Checks, per shard: the file exists, its size and checksum match, every TFRecord's length and data
CRCs are right, and the record count matches. Reads with tfpipe.codec (no TensorFlow), so a
mismatch can be named by shard and record index.
"""

from __future__ import annotations

import dataclasses
import gzip
import zlib
from collections.abc import Callable

from tfpipe import storage
from tfpipe.codec import read_records
from tfpipe.errors import DataError, ManifestError
from tfpipe.manifest import Checksum, Manifest, ShardInfo


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
    manifest: Manifest
    shards: tuple[ShardCheck, ...]

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.shards)

    @property
    def problems(self) -> list[str]:
        return [f"{s.name}: {p}" for s in self.shards for p in s.problems]


class _HashingReader:
    def __init__(self, f, checksum: Checksum) -> None:  # noqa: ANN001
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


def check_shard(manifest: Manifest, split: str, shard: ShardInfo) -> ShardCheck:
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
        problems.append(f"expected {shard.examples} records (manifest), found {records}")
    if hashing.bytes != shard.bytes:
        problems.append(f"expected {shard.bytes} bytes (manifest), found {hashing.bytes}")
    digest = str(hashing.checksum)
    if digest != shard.checksum:
        problems.append(f"checksum mismatch: manifest {shard.checksum}, file {digest}")
    return ShardCheck(split, shard.name, records, tuple(problems))


def verify(root: str, on_shard: Callable[[ShardCheck], None] | None = None) -> VerifyReport:
    """Checks every shard of every split of the dataset at `root`."""
    manifest = Manifest.load(root)
    checks = []
    for split_name, split in manifest.splits.items():
        for shard in split.shards:
            check = check_shard(manifest, split_name, shard)
            checks.append(check)
            if on_shard:
                on_shard(check)
    return VerifyReport(manifest, tuple(checks))

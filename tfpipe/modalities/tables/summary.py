"""What `tfpipe convert` says of a converted table: rows dropped (a null label with
missing_label='drop'), not files skipped."""

from __future__ import annotations

from tfpipe.bench.fmt import human_bytes
from tfpipe.format.manifest import Manifest
from tfpipe.plural import counted


def converted(manifest: Manifest, split_name: str) -> tuple[str, ...]:
    split = manifest.split(split_name)
    dropped = split.dropped_rows
    lines = [
        f"converted {counted(split.examples, 'example')} into {counted(len(split.shards), 'shard')}, "
        f"{human_bytes(split.bytes)}, {dropped:,} row{'' if dropped == 1 else 's'} dropped, in "
        f"{split.seconds:.1f} s -> {manifest.root}"
    ]
    lines += [f"  {s.input}: {s.reason}" for s in split.skipped]
    lines += [f"  note: {note}" for note in split.notes]
    return tuple(lines)

"""`tfpipe inspect DEST [--verify]`: summarise a converted dataset, optionally check every byte."""

from __future__ import annotations

import argparse

from tfpipe.bench.fmt import human_bytes
from tfpipe.cli import add_common
from tfpipe.cli.render import console


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "inspect",
        help="summarise a converted dataset; --verify checks every shard",
        description="Print a dataset's manifest summary. With --verify, read every shard and check "
        "record counts, TFRecord CRCs and checksums; exit 1 on any mismatch.",
        epilog="Example: tfpipe inspect gs://my-bucket/imagenet --verify",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("dest", help="dataset directory holding tfpipe.json, local or gs://")
    p.add_argument("--verify", action="store_true", help="read every shard and check it")
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from tfpipe.manifest import Manifest
    from tfpipe.verify import verify

    out = console(args.quiet)
    manifest = Manifest.load(args.dest)
    out.print(
        f"{manifest.root}: layout {manifest.layout}, compression {manifest.compression}, "
        f"tfpipe {manifest.tfpipe_version}"
    )
    if manifest.class_names:
        names = ", ".join(manifest.class_names[:5]) + (", ..." if len(manifest.class_names) > 5 else "")
        out.print(f"  {len(manifest.class_names)} classes (label offset {manifest.label_offset}): {names}")
    label = manifest.schema.label
    out.print(
        "  features: "
        + ", ".join(
            f"{f.name}:{f.dtype}{'*' if f.name == label else ''}{'+mask' if f.has_mask else ''}"
            for f in manifest.schema.fields
        )
    )
    for name, split in manifest.splits.items():
        out.print(
            f"  split {name}: {split.examples:,} examples in {len(split.shards)} shards, "
            f"{human_bytes(split.bytes)}, {len(split.skipped)} skipped (source {split.source})"
        )
        for note in split.notes:
            out.print(f"    note: {note}")
    if not args.verify:
        return 0
    report = verify(args.dest)
    for check in report.shards:
        status = "ok" if check.ok else "FAILED"
        if not check.ok or not args.quiet:
            out.print(f"  {check.split}/{check.name}: {check.records} records {status}")
        for problem in check.problems:
            out.print(f"    {problem}")
    n_bad = sum(1 for c in report.shards if not c.ok)
    out.print(f"verify: {len(report.shards) - n_bad} of {len(report.shards)} shards ok")
    return 0 if report.ok else 1

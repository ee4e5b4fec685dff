"""`tfpipe inspect DEST [--verify]`: summarise a converted dataset, optionally check every byte."""

from __future__ import annotations

import argparse

from tfpipe.bench.fmt import human_bytes
from tfpipe.cli import add_common
from tfpipe.cli.render import console
from tfpipe.format.manifest import Manifest
from tfpipe.modalities import modality_of_layout
from tfpipe.plural import counted


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
    # ~40 ms that `tfpipe --help` (which imports this module) need not pay
    from tfpipe.format.verify import verify

    out = console(args.quiet)
    manifest = Manifest.load(args.dest)
    out.print(
        f"{manifest.root}: layout {manifest.layout}, compression {manifest.compression}, "
        f"tfpipe {manifest.tfpipe_version}"
    )
    if manifest.class_names:
        names = ", ".join(manifest.class_names[:5]) + (", ..." if len(manifest.class_names) > 5 else "")
        classes = counted(len(manifest.class_names), "class", "classes")
        out.print(f"  {classes} (label offset {manifest.label_offset}): {names}")
    label = manifest.schema.label
    out.print(
        "  features: "
        + ", ".join(
            f"{f.name}:{f.dtype}{'[any length]' if f.variable else ''}{'*' if f.name == label else ''}"
            f"{'+mask' if f.has_mask else ''}"
            for f in manifest.schema.fields
        )
    )
    modality = modality_of_layout(manifest.layout)
    for line in modality.about_dataset(manifest):  # text: its tokenizer
        out.print(line)
    for name, split in manifest.splits.items():
        out.print(
            f"  split {name}: {counted(split.examples, 'example')} in {counted(len(split.shards), 'shard')}, "
            f"{human_bytes(split.bytes)}, {len(split.skipped)} skipped (source {split.source})"
        )
        for line in modality.about_split(manifest, name):  # text: its documents and lengths
            out.print(line)
        for note in split.notes:
            out.print(f"    note: {note}")
    if not args.verify:
        return 0
    report = verify(args.dest)
    for check, what in [(c, "record") for c in report.shards] + [(c, "length") for c in report.lengths]:
        status = "ok" if check.ok else "FAILED"
        if not check.ok or not args.quiet:
            out.print(f"  {check.split}/{check.name}: {counted(check.records, what)} {status}")
        for problem in check.problems:
            out.print(f"    {problem}")
    tok = report.tokenizer
    if tok is not None:
        out.print(f"  {tok.name}: fingerprint {'ok' if tok.ok else 'FAILED'}")
        for problem in tok.problems:
            out.print(f"    {problem}")
    out.print(f"verify: {_verified(report)}")
    return 0 if report.ok else 1


def _verified(report) -> str:
    """The verdict line: the shards ok of all, then the lengths files and the tokenizer file."""
    told = [f"{sum(c.ok for c in report.shards)} of {counted(len(report.shards), 'shard')} ok"]
    if report.lengths:
        n, bad = len(report.lengths), sum(not c.ok for c in report.lengths)
        if n == 1:
            told.append(f"the lengths file {'FAILED' if bad else 'ok'}")
        else:
            told.append(f"{bad} of {n} lengths files FAILED" if bad else f"the {n} lengths files ok")
    if report.tokenizer is not None:
        told.append("the tokenizer ok" if report.tokenizer.ok else "the tokenizer FAILED")
    return "; ".join(told)

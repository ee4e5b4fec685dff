"""`tfpipe convert SRC DEST`: raw data to sharded TFRecords with a manifest."""

from __future__ import annotations

import argparse
import signal
import sys
import time

from tfpipe.bench.fmt import human_bytes
from tfpipe.cli import add_common
from tfpipe.cli.render import console

EXAMPLES = """examples:
  tfpipe convert ILSVRC/Data/CLS-LOC/train gs://my-bucket/imagenet --num-shards 1024
  tfpipe convert ILSVRC/val gs://my-bucket/imagenet --split validation --labels val_labels.txt
  tfpipe convert photos/ out/ --resize-shorter 320 --quality 90
  tfpipe convert table.parquet out/ --label target --missing fill
  tfpipe convert survey.csv out/ --label answer --missing-label drop --encoding latin-1
  tfpipe convert gs://b/raw gs://b/imagenet --engine beam \
      --beam-options="--runner=DataflowRunner --project=P --region=us-central1 --temp_location=gs://b/tmp"
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "convert",
        help="turn image folders, CSV or Parquet into sharded TFRecords (local or gs://)",
        description="Convert raw data into sharded TFRecords plus a tfpipe.json manifest. "
        "Shards appear atomically; the manifest is written last. Interrupted runs --resume.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("src", help="image folder tree, flat validation folder, or CSV/Parquet file or folder")
    p.add_argument("dest", help="output directory, local or gs://bucket/prefix")
    p.add_argument(
        "--format",
        default="auto",
        choices=["auto", "imagenet", "images", "csv", "parquet"],
        help="source format (default: auto, by content)",
    )
    p.add_argument("--split", default="train", help="split name and shard prefix (default: train)")
    p.add_argument("--num-shards", type=int, help="exact number of shards (counts differ by at most one)")
    p.add_argument(
        "--shard-size",
        default="128MiB",
        help="target shard size when --num-shards is not given (default: 128MiB)",
    )
    p.add_argument("--workers", type=int, help="encoding processes (default: all cores)")
    p.add_argument("--compression", default="none", choices=["none", "gzip"], help="shard compression")
    p.add_argument(
        "--resize-shorter",
        type=int,
        metavar="PX",
        help="re-encode images whose shorter side is larger than PX",
    )
    p.add_argument("--quality", type=int, default=90, help="JPEG quality for re-encoded images (default: 90)")
    p.add_argument(
        "--check",
        default="decode",
        choices=["decode", "header"],
        help="how RGB JPEGs that pass through unchanged are checked: decode (default; "
        "finds any damage) or header (structure only: bytes are just copied, ~10x faster)",
    )
    p.add_argument("--label", metavar="COLUMN", help="the label column of a table")
    p.add_argument(
        "--missing",
        default="error",
        choices=["error", "fill"],
        help="nulls in tables: fail (default) or fill with a default plus a <column>/missing mask",
    )
    p.add_argument(
        "--missing-label",
        default="error",
        choices=["error", "drop"],
        help="nulls in the --label column: fail (default; a label is never filled) or drop "
        "those rows (counted in the manifest and the summary)",
    )
    p.add_argument(
        "--encoding",
        default="utf-8",
        help="text encoding of CSV files, e.g. latin-1 or utf-16 (default: utf-8)",
    )
    p.add_argument(
        "--label-offset", type=int, help="label of the first class (default: 1 for imagenet, 0 for images)"
    )
    p.add_argument(
        "--labels", dest="labels_file", metavar="FILE", help="synset labels for a flat validation folder"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the shuffle before sharding (default: 0)")
    p.add_argument(
        "--chunk-rows", type=int, default=8192, help="table rows read and encoded at once (default: 8192)"
    )
    p.add_argument(
        "--strict", action="store_true", help="fail on an undecodable image instead of skipping it"
    )
    p.add_argument(
        "--engine",
        default="local",
        choices=["local", "beam"],
        help="local: a process pool here (default); beam: Apache Beam (needs the beam extra), the same bytes",
    )
    p.add_argument(
        "--beam-options",
        metavar="FLAGS",
        help="Beam pipeline options for --engine beam, one quoted string after '=' "
        '(--beam-options="--runner=DataflowRunner ..."; default: the DirectRunner with '
        "--workers processes)",
    )
    p.add_argument("--resume", action="store_true", help="finish an interrupted conversion")
    p.add_argument("--overwrite", action="store_true", help="replace the split if DEST already has it")
    p.add_argument(
        "--break-lock",
        action="store_true",
        help="take over a gs:// DEST's lock left by a dead run on another host "
        "(a dead run on this host is detected without it)",
    )
    add_common(p)
    p.set_defaults(run=run)


def _terminated(signum: int, frame: object) -> None:
    # SIGTERM's default ends the process at once; raising instead runs the cleanup (the
    # unfinished shard, the spool, the destination's lock) on the way out.
    print(
        "tfpipe convert: terminated (SIGTERM). Committed shards are kept: run the same "
        "command with --resume to finish.",
        file=sys.stderr,
    )
    raise SystemExit(128 + signum)


# The flags passed through to convert() under their own names.
_OPTIONS = (
    "format",
    "split",
    "num_shards",
    "shard_size",
    "workers",
    "compression",
    "resize_shorter",
    "quality",
    "label",
    "missing",
    "label_offset",
    "labels_file",
    "check",
    "seed",
    "strict",
    "chunk_rows",
    "missing_label",
    "encoding",
    "engine",
)


def run(args: argparse.Namespace) -> int:
    from tfpipe.convert import Tick, convert

    signal.signal(signal.SIGTERM, _terminated)
    out = console(args.quiet)
    shown: list[str] = []

    def show_plan(t: Tick) -> None:
        if t.plan and not shown:
            shown.append(t.plan)
            out.print(f"{args.src}: {t.plan}")

    options = {name: getattr(args, name) for name in _OPTIONS} | {"pipeline_options": args.beam_options}
    if args.quiet or not out.is_terminal:
        last = [0.0]

        def progress(t: Tick) -> None:
            show_plan(t)
            now = time.monotonic()
            if now - last[0] >= 5 or t.items_done == t.items_total:
                last[0] = now
                out.print(f"{t.items_done}/{t.items_total} {t.unit}, {t.shards_done}/{t.shards_total} shards")

        manifest = convert(
            args.src,
            args.dest,
            resume=args.resume,
            overwrite=args.overwrite,
            break_lock=args.break_lock,
            progress=progress,
            **options,
        )
    else:
        from tfpipe.cli.render import ConvertProgressBar

        with ConvertProgressBar(out) as bar:

            def progress(t: Tick) -> None:
                show_plan(t)
                bar.update(t)

            manifest = convert(
                args.src,
                args.dest,
                resume=args.resume,
                overwrite=args.overwrite,
                break_lock=args.break_lock,
                progress=progress,
                **options,
            )
    split = manifest.split(args.split)
    dropped = split.dropped_rows
    left_out = (
        f"{dropped:,} row{'' if dropped == 1 else 's'} dropped"
        if manifest.layout == "table"
        else f"{len(split.skipped)} skipped"
    )
    out.print(
        f"converted {split.examples:,} examples into {len(split.shards)} shards, "
        f"{human_bytes(split.bytes)}, {left_out}, in {split.seconds:.1f} s -> {manifest.root}"
    )
    for s in split.skipped:
        out.print(f"  {'' if manifest.layout == 'table' else 'skipped '}{s.input}: {s.reason}")
    return 0

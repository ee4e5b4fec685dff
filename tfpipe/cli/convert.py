"""`tfpipe convert SRC DEST`: raw data to sharded TFRecords with a manifest."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from tfpipe import storage
from tfpipe.bench.fmt import human_bytes
from tfpipe.cli import add_common
from tfpipe.cli.render import ConvertProgressBar, console
from tfpipe.convert import convert
from tfpipe.modalities import modalities, modality_of_layout
from tfpipe.plural import counted

if TYPE_CHECKING:
    from tfpipe.convert import Tick
    from tfpipe.format.manifest import Manifest

EXAMPLES = """examples:
  tfpipe convert ILSVRC/Data/CLS-LOC/train gs://my-bucket/imagenet --num-shards 1024
  tfpipe convert ILSVRC/val gs://my-bucket/imagenet --split validation --labels val_labels.txt
  tfpipe convert photos/ out/ --resize-shorter 320 --quality 90
  tfpipe convert table.parquet out/ --label target --missing fill
  tfpipe convert survey.csv out/ --label answer --missing-label drop --encoding latin-1
  tfpipe convert airquality.csv out/ --label Temp --null-values NA --missing fill --column-type zip=string
  tfpipe convert hive_parquet/ out/ --label y      # year=2021/part-0.parquet: year is a column
  tfpipe convert corpus/ out/ --train-tokenizer sentencepiece --vocab-size 32000   # .jsonl/.txt/.parquet
  tfpipe convert reviews.jsonl out/ --tokenizer tokenizer.json --label sentiment
  tfpipe convert web.jsonl out/ --tokenizer tokenizer.json --special-tokens eos=[EOS],bos=[BOS]
  tfpipe convert books/ out/ --lines --tokenizer spm.model    # .txt files, one document per line
  tfpipe convert gs://b/raw gs://b/imagenet --engine beam \
      --beam-options="--runner=DataflowRunner --project=P --region=us-central1 --temp_location=gs://b/tmp"
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "convert",
        help="turn image folders, CSV or Parquet tables, or text corpora into sharded TFRecords (local or gs://)",
        description="Convert raw data into sharded TFRecords plus a tfpipe.json manifest. "
        "Shards appear atomically; the manifest is written last. Interrupted runs --resume.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "src",
        help="image folder tree, flat validation folder, CSV/Parquet/Arrow (Feather) file or folder, or a "
        "text corpus (.jsonl, .jsonl.gz, .txt or .parquet files: one, a folder or a glob)",
    )
    p.add_argument("dest", help="output directory, local or gs://bucket/prefix")
    _add_source_flags(p.add_argument_group("source"))
    _add_shard_flags(p.add_argument_group("shards"))
    for m in modalities():  # each modality's own options, in a group of its name
        m.convert.add_flags(p.add_argument_group(m.name))
    _add_engine_flags(p.add_argument_group("engine"))
    _add_run_flags(p.add_argument_group("run"))
    add_common(p)
    p.set_defaults(run=run)


def _add_source_flags(g: argparse._ArgumentGroup) -> None:
    g.add_argument(
        "--format",
        default="auto",
        choices=["auto", *(f for m in modalities() for f in m.convert.formats)],
        help="source format (default: auto, by content; text when a tokenizer option is given)",
    )
    g.add_argument("--split", default="train", help="split name and shard prefix (default: train)")
    g.add_argument(
        "--label-offset", type=int, help="label of the first class (default: 1 for imagenet, 0 for images)"
    )
    g.add_argument(
        "--labels", dest="labels_file", metavar="FILE", help="synset labels for a flat validation folder"
    )


def _add_shard_flags(g: argparse._ArgumentGroup) -> None:
    g.add_argument("--num-shards", type=int, help="exact number of shards (counts differ by at most one)")
    g.add_argument(
        "--shard-size",
        default="128MiB",
        help="target shard size when --num-shards is not given (default: 128MiB)",
    )
    g.add_argument("--compression", default="none", choices=["none", "gzip"], help="shard compression")
    g.add_argument("--seed", type=int, default=0, help="seed of the shuffle before sharding (default: 0)")


def _add_engine_flags(g: argparse._ArgumentGroup) -> None:
    g.add_argument(
        "--engine",
        default="local",
        choices=["local", "beam"],
        help="local: a process pool here (default); beam: Apache Beam (needs the beam extra), the same bytes",
    )
    g.add_argument("--workers", type=int, help="encoding processes (default: all cores)")
    g.add_argument(
        "--beam-options",
        metavar="FLAGS",
        help="Beam pipeline options for --engine beam, one quoted string after '=' "
        '(--beam-options="--runner=DataflowRunner ..."; default: the DirectRunner with '
        "--workers processes)",
    )


def _add_run_flags(g: argparse._ArgumentGroup) -> None:
    g.add_argument("--resume", action="store_true", help="finish an interrupted conversion")
    g.add_argument("--overwrite", action="store_true", help="replace the split if DEST already has it")
    g.add_argument(
        "--break-lock",
        action="store_true",
        help="take over a gs:// DEST's lock left by a dead run on another host "
        "(a dead run on this host is detected without it)",
    )


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
    "tokenizer",
    "train_tokenizer",
    "vocab_size",
    "text_field",
    "lines",
)


def run(args: argparse.Namespace) -> int:
    signal.signal(signal.SIGTERM, _terminated)
    retried_before = storage.retries()
    out = console(args.quiet)
    options = {name: getattr(args, name) for name in _OPTIONS} | {"pipeline_options": args.beam_options}
    for m in modalities():  # the options of its flags that convert() takes in another form
        options |= m.convert.flag_options(args)

    def convert_with(progress: Callable[[Tick], None]) -> Manifest:
        return convert(
            args.src,
            args.dest,
            resume=args.resume,
            overwrite=args.overwrite,
            break_lock=args.break_lock,
            progress=_showing_plan(out, args.src, progress),
            **options,
        )

    if args.quiet or not out.is_terminal:
        manifest = convert_with(_progress_lines(out))
    else:
        with ConvertProgressBar(out) as bar:
            manifest = convert_with(bar.update)
    _print_summary(out, manifest, args.split)
    if args.engine == "local":  # Beam's workers retry in their own processes, uncounted here
        _print_retries(out, storage.retries(), retried_before)
    return 0


def _showing_plan(out, src: str, progress: Callable[[Tick], None]) -> Callable[[Tick], None]:
    """Wraps `progress` to print the conversion's plan once, from the first tick that has it."""
    shown: list[str] = []

    def show_plan_then(t: Tick) -> None:
        if t.plan and not shown:
            shown.append(t.plan)
            out.print(f"{src}: {t.plan}")
        progress(t)

    return show_plan_then


def _progress_lines(out) -> Callable[[Tick], None]:
    """Progress as a plain line every 5 s and at the end (for --quiet and non-terminals)."""
    last = [0.0]

    def progress(t: Tick) -> None:
        now = time.monotonic()
        if now - last[0] >= 5 or t.items_done == t.items_total:
            last[0] = now
            items = counted(t.items_total, t.unit.removesuffix("s"), t.unit)
            out.print(f"{t.items_done:,}/{items}, {t.shards_done}/{counted(t.shards_total, 'shard')}")

    return progress


def _print_summary(out, manifest: Manifest, split_name: str) -> None:
    """What the conversion made: its modality's words (`Modality.summary`), or the examples,
    shards, bytes and what was skipped."""
    summary = modality_of_layout(manifest.layout).summary
    lines = summary(manifest, split_name) if summary is not None else _summary(manifest, split_name)
    for line in lines:
        out.print(line)


def _summary(manifest: Manifest, split_name: str) -> tuple[str, ...]:
    split = manifest.split(split_name)
    lines = [
        f"converted {counted(split.examples, 'example')} into {counted(len(split.shards), 'shard')}, "
        f"{human_bytes(split.bytes)}, {len(split.skipped)} skipped, in {split.seconds:.1f} s -> {manifest.root}"
    ]
    lines += [f"  skipped {s.input}: {s.reason}" for s in split.skipped]
    lines += [f"  note: {note}" for note in split.notes]
    return tuple(lines)


def _print_retries(out, after: dict[str, int], before: dict[str, int]) -> None:
    """The storage requests the whole run retried (the manifest counts those before its commit)."""
    retried = {kind: n - before.get(kind, 0) for kind, n in sorted(after.items()) if n > before.get(kind, 0)}
    if retried:
        kinds = ", ".join(f"{kind}: {n}" for kind, n in retried.items())
        out.print(f"retried {sum(retried.values())} storage requests ({kinds}), with backoff")

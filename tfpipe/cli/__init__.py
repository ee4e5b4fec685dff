"""The `tfpipe` command. Each command group lives in its own module with two functions:
`add_parser(subparsers)` registers its flags and `run(args) -> int` calls the library and renders
the result. No logic lives only in the CLI."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from tfpipe._version import __version__
from tfpipe.errors import TfpipeError

# Command modules, in the order `tfpipe --help` lists them.
COMMANDS = ("convert", "inspect", "bench", "serve")


def _modules() -> list:
    out = []
    for name in COMMANDS:
        try:
            out.append(importlib.import_module(f"tfpipe.cli.{name}"))
        except ModuleNotFoundError as e:
            if e.name != f"tfpipe.cli.{name}":
                raise
    return out


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tfpipe",
        description="Sharded TFRecords, tuned tf.data pipelines, and a benchmark that says "
        "whether training is input-bound.",
        epilog="Example: tfpipe bench --pipeline=imagenet",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"tfpipe {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _modules():
        module.add_parser(sub)
    return parser


def add_common(parser: argparse.ArgumentParser) -> None:
    """Flags every command takes."""
    parser.add_argument("--verbose", action="store_true", help="show TensorFlow's C++ logs")
    parser.add_argument("--quiet", action="store_true", help="plain output, no progress bar")


def say(line: str) -> None:
    """Prints and flushes a status line; a closed stdout (the reader went away) is not an error."""
    try:
        print(line, flush=True)
    except BrokenPipeError:
        # Later writes, and the flush at exit, would fail the same way.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    from tfpipe import _tf

    # The command, unlike the library, hides TensorFlow's log noise unless --verbose.
    _tf.set_quiet(not getattr(args, "verbose", False))
    try:
        return int(args.run(args) or 0)
    except TfpipeError as e:
        print(f"tfpipe {args.command}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"tfpipe {args.command}: interrupted", file=sys.stderr)
        return 130

"""The `tfpipe` command. Each command group lives in its own module with two functions:
`add_parser(subparsers)` registers its flags and `run(args) -> int` calls the library and renders
the result. No logic lives only in the CLI."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from types import ModuleType

from tfpipe import _tf
from tfpipe._version import __version__
from tfpipe.errors import CommandUnavailable, TfpipeError

# Command modules, in the order `tfpipe --help` lists them.
COMMANDS = ("convert", "inspect", "bench", "serve")


def _modules() -> list:
    return [_load(name) for name in COMMANDS]


def _load(name: str) -> ModuleType | _Unavailable:
    """The command module `tfpipe.cli.<name>`.

    A missing module of tfpipe's own is a broken installation and fails at once. A missing
    third-party package leaves the command listed, and running it says which package to
    install.
    """
    try:
        return importlib.import_module(f"tfpipe.cli.{name}")
    except ModuleNotFoundError as e:
        missing = e.name or "?"
        if missing == "tfpipe" or missing.startswith("tfpipe."):
            raise ImportError(
                f"tfpipe's command module tfpipe.cli.{name} cannot be imported: tfpipe's own "
                f"module {missing} is missing, so this installation is incomplete; reinstall "
                f"tfpipe. Received: {e}"
            ) from e
        return _Unavailable(name, missing)


class _Unavailable:
    """Stands in for a command module whose optional dependency is missing."""

    def __init__(self, name: str, package: str) -> None:
        self.name, self.package = name, package

    def add_parser(self, sub: argparse._SubParsersAction) -> None:
        help_ = f"(unavailable: needs the {self.package!r} package)"
        p = sub.add_parser(self.name, help=help_, description=help_, add_help=True)
        p.set_defaults(run=self.run)

    def run(self, args: argparse.Namespace) -> int:
        raise CommandUnavailable(
            f"this command needs the Python package {self.package!r}, which is not installed: "
            f"pip install {self.package}. Received: ModuleNotFoundError for {self.package!r}"
        )


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

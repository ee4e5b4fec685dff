"""Shared terminal rendering helpers for the CLI (the library never prints)."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console  # imported where a console is made

    from tfpipe.convert import Tick


def console(quiet: bool = False) -> Console:
    """A rich console on stdout; plain (no colour, no live widgets) with --quiet or no TTY."""
    from rich.console import Console

    plain = quiet or not sys.stdout.isatty()
    return Console(no_color=plain, force_terminal=False if plain else None, highlight=False, soft_wrap=plain)


class ConvertProgressBar:
    """The rich progress bar `tfpipe convert` shows on a terminal: items, rate, MB/s, shards.

    Example:
      >>> with ConvertProgressBar(out) as bar:
      ...     convert(src, dest, progress=bar.update)
    """

    def __init__(self, out: Console) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

        columns = (
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total} {task.fields[unit]}"),
            TextColumn("{task.fields[rate]}"),
            TextColumn("{task.fields[mbps]}"),
            TextColumn("shards {task.fields[shards]}"),
            TimeRemainingColumn(),
        )
        self._bar = Progress(*columns, console=out, transient=False)
        self._started = time.monotonic()
        self._task = self._bar.add_task("convert", total=None, unit="", rate="", mbps="", shards="")

    def __enter__(self) -> ConvertProgressBar:
        self._bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._bar.__exit__(*exc)

    def update(self, tick: Tick) -> None:
        """Shows a conversion's progress."""
        elapsed = max(time.monotonic() - self._started, 1e-6)
        self._bar.update(
            self._task,
            completed=tick.items_done,
            total=tick.items_total,
            unit=tick.unit,
            rate=f"{tick.items_done / elapsed:,.0f} {tick.unit}/s",
            mbps=f"{tick.bytes_in / elapsed / 1e6:,.1f} MB/s",
            shards=f"{tick.shards_done}/{tick.shards_total}",
        )

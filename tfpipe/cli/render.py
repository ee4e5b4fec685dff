"""Shared terminal rendering helpers for the CLI (the library never prints)."""

from __future__ import annotations

import sys


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def console(quiet: bool = False):  # -> rich.console.Console
    """A rich console on stdout; plain (no colour, no live widgets) with --quiet or no TTY."""
    from rich.console import Console

    plain = quiet or not sys.stdout.isatty()
    return Console(no_color=plain, force_terminal=False if plain else None, highlight=False,
                   soft_wrap=plain)

"""The tables modality's `tfpipe convert` flags (the tables group): its options as the command line
takes them, and those it passes to `convert()` in another form."""

from __future__ import annotations

import argparse


def add_flags(g: argparse._ArgumentGroup) -> None:
    g.add_argument(
        "--label",
        metavar="COLUMN",
        help="the label column of a table, or the label field of a text corpus (text labels become "
        "class indices, numbers are kept)",
    )
    g.add_argument(
        "--missing",
        default="error",
        choices=["error", "fill"],
        help="nulls in tables: fail (default) or fill with a default plus a <column>/missing mask",
    )
    g.add_argument(
        "--missing-label",
        default="error",
        choices=["error", "drop"],
        help="nulls in the --label column: fail (default; a label is never filled) or drop "
        "those rows (counted in the manifest and the summary)",
    )
    g.add_argument(
        "--encoding",
        default="utf-8",
        help="text encoding of CSV files, e.g. latin-1 or utf-16 (default: utf-8)",
    )
    g.add_argument(
        "--null-values",
        action="append",
        default=[],
        metavar="[COLUMN=]TEXT,...",
        help="CSV text that means missing, for every column or for one (repeatable). Only an "
        "empty field is missing otherwise: NA, None or null are kept as written",
    )
    g.add_argument(
        "--column-type",
        action="append",
        default=[],
        metavar="COLUMN=TYPE",
        help="declare a CSV (or Hive partition) column's type: int, float, bool or string "
        "(repeatable). Otherwise text like 01234 or 1E5 stays text, and the summary says so",
    )
    g.add_argument(
        "--chunk-rows", type=int, default=8192, help="table rows read and encoded at once (default: 8192)"
    )


def _pairs(flag: str, values: list[str]) -> list[tuple[str, str]]:
    """`COLUMN=VALUE` arguments as pairs (COLUMN "" when there is no `=`)."""
    out = []
    for value in values:
        column, eq, rest = value.rpartition("=") if "=" in value else ("", "", value)
        if eq and not column:
            raise SystemExit(f"tfpipe convert: error: {flag} expects COLUMN=VALUE. Received: {value!r}")
        out.append((column, rest))
    return out


def flag_options(args: argparse.Namespace) -> dict[str, object]:
    """--null-values and --column-type as convert() takes them."""
    nulls: dict[str, list[str]] = {}
    for column, tokens in _pairs("--null-values", args.null_values):
        nulls.setdefault(column or "*", []).extend(t for t in tokens.split(",") if t)
    types = dict(_pairs("--column-type", args.column_type))
    if "" in types:
        raise SystemExit(f"tfpipe convert: error: --column-type expects COLUMN=TYPE. Received: {types['']!r}")
    return {"null_values": nulls, "column_types": types}

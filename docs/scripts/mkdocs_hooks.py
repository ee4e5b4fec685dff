"""mkdocs hooks: the reference pages that are generated from the code, so they follow it.

A page holds a placeholder comment; `on_page_markdown` replaces it before the page is rendered:
- `<!-- generated: api -->`: a mkdocstrings directive for every name in `tfpipe.__all__` (from
  the module that defines it, so a move in the code moves nothing here), grouped by package,
  then the public submodules' names.
- `<!-- generated: cli -->`: `tfpipe <command> --help` for every command and `serve` role,
  from the real argparse parser (`tfpipe.cli.make_parser`), at 100 columns.
- `<!-- generated: report-schema -->`: every field of `tfpipe/bench/report.schema.json` with its
  type and description, one table per top-level object.
The hooks import the tfpipe of this tree (not an installed one) and no TensorFlow.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import sys
from collections.abc import Iterator
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

HELP_COLUMNS = "100"
# The groups of the API page, by the package that defines a name, in page order.
API_GROUPS = (
    ("Convert", ("tfpipe.convert",)),
    ("The dataset", ("tfpipe.format",)),
    ("Build", ("tfpipe.pipeline", "tfpipe.presets", "tfpipe.modalities")),
    ("Bench", ("tfpipe.bench",)),
    ("Devices", ("tfpipe.devices",)),
    ("Errors and warnings", ("tfpipe.errors",)),
)
# Public submodules (outside `tfpipe.__all__`, loaded on first use) and the names to document.
SUBMODULES = {
    # tfpipe.presets finds the preset objects through the modality registry: griffe needs their homes
    "tfpipe.modalities.text.preset": ("Text",),
    "tfpipe.modalities.images.preset": ("ImageNet",),
    "tfpipe.modalities.tables.preset": ("Tabular",),
    "tfpipe.resume": ("Position", "KerasCallback"),
    "tfpipe.service": ("distribute",),
    "tfpipe.beam.write": ("WriteDataset",),  # tfpipe.beam loads it lazily: griffe needs its home
    "tfpipe.testing": ("LocalGCS",),
}


def on_page_markdown(markdown: str, **_: Any) -> str:
    for name, render in (("api", api_markdown), ("cli", cli_markdown), ("report-schema", schema_markdown)):
        placeholder = f"<!-- generated: {name} -->"
        if placeholder in markdown:
            markdown = markdown.replace(placeholder, render())
    return markdown


# ---- the Python API ----


def public_names() -> dict[str, str]:
    """Each name of `tfpipe.__all__` (but `__version__`) -> the dotted path that defines it."""
    import tfpipe

    out = {}
    for name in tfpipe.__all__:
        if name == "__version__":
            continue
        obj = getattr(tfpipe, name)
        out[name] = f"{obj.__module__}.{obj.__qualname__}"
    return out


def api_markdown() -> str:
    names = public_names()
    lines, placed = [], set()
    for title, packages in API_GROUPS:
        group = [n for n, path in names.items() if path.startswith(tuple(p + "." for p in packages))]
        if not group:
            continue
        lines.append(f"## {title}\n")
        lines += [f"::: {names[n]}\n" for n in sorted(group, key=lambda n: (n[0].islower(), n.lower()))]
        placed |= set(group)
    if rest := sorted(set(names) - placed):
        lines.append("## Other\n")
        lines += [f"::: {names[n]}\n" for n in rest]
    lines.append("## Submodules\n")
    for module, members in SUBMODULES.items():
        lines += [f"::: {module}.{m}\n" for m in members]
    return "\n".join(lines)


# ---- the command line ----


@contextlib.contextmanager
def _columns(n: str) -> Iterator[None]:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = n
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def command_helps() -> list[tuple[str, str]]:
    """(command line, its --help text) for `tfpipe` and every command and role under it."""
    from tfpipe.cli import make_parser

    out = []
    with _columns(HELP_COLUMNS):
        todo = [("tfpipe", make_parser())]
        while todo:
            name, parser = todo.pop(0)
            out.append((name, parser.format_help()))
            todo += [(f"{name} {sub}", p) for sub, p in _subparsers(parser).items()]
    return out


def cli_markdown() -> str:
    parts = []
    for name, text in command_helps():
        level = "#" * min(4, 1 + name.count(" ") + 1)
        parts.append(f"{level} `{name}`\n\n```text\n{text.rstrip()}\n```\n")
    return "\n".join(parts)


# ---- the bench report's JSON ----


def _type(node: dict[str, Any]) -> str:
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    if "enum" in node:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in node["enum"])
    kinds = node.get("type", "any")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    if "array" in kinds and isinstance(node.get("items"), dict) and "type" in node["items"]:
        item = node["items"]["type"]
        kinds = [f"array of {item}" if k == "array" else k for k in kinds]
    return " or ".join(kinds)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _rows(node: dict[str, Any], path: str, required: bool) -> Iterator[tuple[str, str, str, str]]:
    yield path, _type(node), "yes" if required else "", _cell(node.get("description", ""))
    inner = node.get("items") if "array" in str(node.get("type")) else node
    if isinstance(inner, dict) and "properties" in inner:
        suffix = "[]" if inner is not node else ""
        need = set(inner.get("required", ()))
        for key, child in inner["properties"].items():
            yield from _rows(child, f"{path}{suffix}.{key}", key in need)


def schema_markdown() -> str:
    schema = json.loads((ROOT / "tfpipe" / "bench" / "report.schema.json").read_text())
    need = set(schema.get("required", ()))
    out = [
        f"The schema's id is `{schema['$id']}` (JSON Schema 2020-12). {schema['description']}\n",
        "| field | type | required | what it holds |",
        "|---|---|---|---|",
    ]
    nested = []
    for key, node in schema["properties"].items():
        rows = list(_rows(node, key, key in need))
        out.append("| `{}` | {} | {} | {} |".format(*rows[0]))
        if len(rows) > 1:
            nested.append((key, rows))
    for key, rows in nested:
        out += [f"\n### `{key}`\n", "| field | type | required | what it holds |", "|---|---|---|---|"]
        out += ["| `{}` | {} | {} | {} |".format(*row) for row in rows[1:]]
    return "\n".join(out) + "\n"

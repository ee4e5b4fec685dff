"""The registry of kinds (modalities), as presets have theirs: convert's core finds a source's
kind here, by its name or by a `--format` it reads, and never names one itself.

  >>> from tfpipe.convert.kinds import get_kind, register_kind
  >>> get_kind("text").default_preset
  'text'

A new modality registers a `kind.Kind` (its opener, its inputs and their encoding, its tally
and what it attaches to a split) and is converted by the same plan, engines, writer and
journal. The built-in kinds import `kind.py`, the base, so that no kind imports the registry
that loads it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tfpipe.convert.config import ConvertConfig, check_applies
from tfpipe.convert.kind import Kind
from tfpipe.convert.sources import Source
from tfpipe.errors import ConfigError
from tfpipe.format.manifest import Manifest
from tfpipe.modalities.tables.convert.scan import TableScan, scan

_REGISTRY: dict[str, Kind] = {}


def register_kind(kind: Kind, *, overwrite: bool = False) -> Kind:
    """Registers `kind` under its name, and its formats.

    Raises:
      ConfigError: a kind of that name, or one reading one of its formats, is registered already.
    """
    _load_builtins()
    taken = [k.name for k in _REGISTRY.values() if k.name != kind.name and set(k.formats) & set(kind.formats)]
    if (kind.name in _REGISTRY and not overwrite) or taken:
        raise ConfigError(
            f"A kind named {kind.name!r} or reading one of the formats {list(kind.formats)} is already "
            f"registered ({taken or [kind.name]}); pass overwrite=True to replace a kind of the same name."
        )
    _REGISTRY[kind.name] = kind
    return kind


def unregister_kind(name: str) -> None:
    """Removes a registered kind (a test's own)."""
    _REGISTRY.pop(name, None)


def get_kind(name: str) -> Kind:
    """The kind of that name (`Source.kind`, `ShardInputs.kind`).

    Raises:
      ConfigError: no kind has that name; lists the registered names.
    """
    _load_builtins()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ConfigError(f"kind must be one of {sorted(_REGISTRY)}. Received: {name!r}") from None


def kind_of_format(fmt: str) -> Kind:
    """The kind that reads `--format fmt` (or a manifest's layout).

    Raises:
      ConfigError: no kind reads it.
    """
    _load_builtins()
    for kind in _REGISTRY.values():
        if fmt in kind.formats:
            return kind
    known = sorted(f for k in _REGISTRY.values() for f in k.formats)
    raise ConfigError(f"format must be one of {known}. Received: {fmt!r}")


def kind_names() -> list[str]:
    _load_builtins()
    return sorted(_REGISTRY)


def open_source(
    src: str,
    fmt: str,
    cfg: ConvertConfig,
    joins: Manifest | None,
    scan_table: Callable[..., TableScan] = scan,
    dest: str = "",
) -> Source:
    """Lists (and for tables and text, scans) the source, by the kind that reads `fmt`.

    Args:
      joins: the dataset the new split joins, whose classes it keeps; None if none.
      scan_table: a table's first pass, `tables.scan(src, fmt, TableOptions)` (the Beam
        engine runs it on its workers).
      dest: the dataset directory (a text corpus's tokenizer is stored there).

    Raises:
      DataError: the source does not fit the rules, naming the file, column and row.
      ConfigError: an option of another kind of source.
    """
    check_applies(cfg, fmt)
    source: Any = kind_of_format(fmt).open(src, fmt, cfg, joins, scan_table, dest)
    return source


def _load_builtins() -> None:
    if "images" in _REGISTRY:
        return
    from tfpipe.modalities.images.convert.kind import IMAGES
    from tfpipe.modalities.tables.convert.kind import TABLES
    from tfpipe.modalities.text.convert.kind import TEXT

    for kind in (IMAGES, TABLES, TEXT):
        _REGISTRY.setdefault(kind.name, kind)

"""The modalities: one kind of data each (images, tables, text), whole, registered by name as
presets are. A `Modality` (modality.py) owns its three halves: how its sources are converted
(`Modality.convert`, a `tfpipe.convert.kind.Kind`), how its records are read (`Modality.preset`,
whose Decoder carries the stages between reading and the final ones), and how bench measures
and words it (`Modality.bench`). Convert's core, `build()`, bench and the command line ask a
dataset's modality here and never name one.

  >>> from tfpipe.modalities import modality_of_layout
  >>> modality_of_layout("table").preset.name
  'tabular'

A built-in modality lives in its own folder (`tfpipe/modalities/<name>/`: `convert/`, the
preset, the bench half, and `modality.py` tying them), loaded here by its module's name the
first time the registry is asked, as convert's core finds an optional engine: nothing that
dispatches to a modality imports one. A new modality registers a `Modality`
(`register_modality`).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tfpipe.errors import ConfigError

if TYPE_CHECKING:
    from tfpipe.modalities.modality import Modality

# The built-in modalities: each module's `MODALITY`, in the order detection weighs them.
BUILTINS = (
    "tfpipe.modalities.images.modality",
    "tfpipe.modalities.tables.modality",
    "tfpipe.modalities.text.modality",
)

_REGISTRY: dict[str, Modality] = {}
_LOADED: list[bool] = []


def register_modality(modality: Modality, *, overwrite: bool = False) -> Modality:
    """Registers `modality` under its name, with its formats, layouts and preset.

    Raises:
      ConfigError: a modality of that name, or one reading one of its formats or layouts or
        naming its preset, is registered already (`overwrite` replaces one of the same name).
    """
    _load_builtins()
    taken = [
        m.name
        for m in _REGISTRY.values()
        if m.name != modality.name
        and (
            set(m.convert.formats) & set(modality.convert.formats)
            or set(m.layouts) & set(modality.layouts)
            or m.preset.name == modality.preset.name
        )
    ]
    if (modality.name in _REGISTRY and not overwrite) or taken:
        raise ConfigError(
            f"A modality named {modality.name!r}, or reading one of the formats "
            f"{list(modality.convert.formats)} or naming the preset {modality.preset.name!r}, is "
            f"already registered ({taken or [modality.name]}); pass overwrite=True to replace a "
            "modality of the same name."
        )
    _REGISTRY[modality.name] = modality
    return modality


def unregister_modality(name: str) -> None:
    """Removes a registered modality (a test's own)."""
    _REGISTRY.pop(name, None)


def modalities() -> tuple[Modality, ...]:
    """Every registered modality, the built-ins first."""
    _load_builtins()
    return tuple(_REGISTRY.values())


def modality_names() -> list[str]:
    return sorted(m.name for m in modalities())


def get_modality(name: str) -> Modality:
    """The modality of that name (`Source.kind`, `ShardInputs.kind`, a done-record's tally).

    Raises:
      ConfigError: no modality has that name; lists the registered names.
    """
    _load_builtins()
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise ConfigError(f"kind must be one of {modality_names()}. Received: {name!r}") from None


def modality_of_format(fmt: str) -> Modality:
    """The modality that converts `--format fmt`.

    Raises:
      ConfigError: none does; lists every format one does.
    """
    for m in modalities():
        if fmt in m.convert.formats:
            return m
    known = sorted(f for m in modalities() for f in m.convert.formats)
    raise ConfigError(f"format must be one of {known}. Received: {fmt!r}")


def modality_of_layout(layout: str) -> Modality:
    """The modality whose datasets a manifest of `layout` holds.

    Raises:
      ConfigError: none writes that layout.
    """
    for m in modalities():
        if layout in m.layouts:
            return m
    known = sorted(layout for m in modalities() for layout in m.layouts)
    raise ConfigError(f"layout must be one of {known}. Received: {layout!r}")


def modality_of_preset(name: str) -> Modality:
    """The modality whose preset is named `name` (what bench's `pipeline` names).

    Raises:
      ConfigError: no modality's preset has that name; lists those that do.
    """
    for m in modalities():
        if m.preset.name == name:
            return m
    raise field_choice_error("pipeline", preset_names(), name)


def preset_names() -> list[str]:
    """The presets of the registered modalities, in registration order."""
    return [m.preset.name for m in modalities()]


def modality_of_records(
    manifest: Any, keys: Mapping[str, str], tfds: Any = None, options: Mapping[str, Any] | None = None
) -> Modality | None:
    """The modality of records: their manifest's layout's, else the first that recognizes
    records without one by their features (images: `image/encoded`, a TFDS image feature, or
    an `image_key` option given); None when no modality does."""
    if manifest is not None:
        return modality_of_layout(manifest.layout)
    for m in modalities():
        if m.recognizes(keys, tfds, options or {}):
            return m
    return None


def field_choice_error(name: str, choices: list[str], value: object) -> ConfigError:
    return ConfigError(f"{name} must be one of {choices}. Received: {name}={value!r}")


def _load_builtins() -> None:
    if _LOADED:
        return
    _LOADED.append(True)
    for module in BUILTINS:
        modality = importlib.import_module(module).MODALITY
        _REGISTRY.setdefault(modality.name, modality)

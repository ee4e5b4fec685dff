"""Presets: how a record becomes `(features, labels)`. A small registry users can add to.

A preset is bound to one dataset and one set of options, and returns a `Decoder`: the parse
spec for `tf.io.parse_example`, the keys the records must hold, and the decode function.
The simplest preset is a parse spec plus a map function:

Example:
  >>> import tensorflow as tf, tfpipe
  >>> tfpipe.register_preset(tfpipe.Preset(
  ...     name="points",
  ...     spec={"xy": tf.io.FixedLenFeature([2], tf.float32),
  ...           "label": tf.io.FixedLenFeature([], tf.int64)},
  ...     map_fn=lambda f, training: (f["xy"], tf.cast(f["label"], tf.int32)),
  ... ))
  >>> ds = tfpipe.build("data/points", preset="points", batch_size=512)

Each modality's preset is registered with it (tfpipe/modalities/: "imagenet", "tabular" and
"text" are the built-in modalities', each in its folder's preset.py); `preset=None` picks the
manifest's modality's. A built-in preset is a frozen object that carries its options, and its
class is here by name (`tfpipe.presets.Text`, `ImageNet`, `Tabular`, found through the registry
on first use): `build(data, preset=tfpipe.presets.Text(sequence_length=512))`, or by name with
the options as keywords, `build(data, preset="text", sequence_length=512)`. The types a preset is
made of are in tfpipe/presets/base.py (which the modalities' presets import, so that no preset
imports the registry that finds it); this module is the registry.
"""

from __future__ import annotations

from tfpipe.errors import ConfigError
from tfpipe.modalities import modalities
from tfpipe.presets.base import Decoder, Preset, PresetContext, PresetLike, declared_options, with_options

__all__ = [
    "Decoder",
    "ImageNet",
    "Preset",
    "PresetContext",
    "PresetLike",
    "Tabular",
    "Text",
    "declared_options",
    "get_preset",
    "preset_names",
    "register_preset",
    "with_options",
]


_REGISTRY: dict[str, PresetLike] = {}


def register_preset(preset: PresetLike, *, overwrite: bool = False) -> PresetLike:
    """Adds a preset to the registry so `build(..., preset=name)` finds it.

    Raises:
      ConfigError: the object is not a preset, or the name is taken and `overwrite` is False.
    """
    if not isinstance(preset, PresetLike):
        raise ConfigError(
            "register_preset expects a Preset (name, spec, map_fn) or an object with `name` and "
            f"`bind(ctx, options)`. Received: {type(preset).__name__}"
        )
    if preset.name in _presets() and not overwrite:
        raise ConfigError(
            f"A preset named {preset.name!r} is already registered; pass overwrite=True to replace it."
        )
    _REGISTRY[preset.name] = preset
    return preset


def get_preset(name: str | PresetLike) -> PresetLike:
    """Looks a preset up by name (a preset object is returned as is).

    Raises:
      ConfigError: no preset has that name; lists the registered names.
    """
    if isinstance(name, type):
        raise ConfigError(
            f"preset must be a preset object or a name; {name.__name__} is a class: pass an instance, "
            f"e.g. preset={name.__name__}(...). Received: preset={name!r}"
        )
    if isinstance(name, PresetLike):
        return name
    presets = _presets()
    try:
        return presets[name]
    except (KeyError, TypeError):
        raise ConfigError(
            f"preset must be one of {sorted(presets)} or a Preset object. Received: preset={name!r}"
        ) from None


def preset_names() -> list[str]:
    return sorted(_presets())


def _presets() -> dict[str, PresetLike]:
    """The registered presets: the modalities' own, and those registered here (which replace a
    modality's of the same name only with overwrite=True)."""
    return {m.preset.name: m.preset for m in modalities()} | _REGISTRY


def __getattr__(name: str) -> type:
    """A registered modality's preset class by its name (`tfpipe.presets.Text`, `ImageNet`,
    `Tabular`: the built-ins'), found through the registry, which loads the modalities by name."""
    for m in modalities():
        if type(m.preset).__name__ == name:
            return type(m.preset)
    raise AttributeError(f"module 'tfpipe.presets' has no attribute {name!r}")

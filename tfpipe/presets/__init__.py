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

Built-in presets: "imagenet" (`ImageNet`, tfpipe/presets/imagenet.py), "tabular" (`Tabular`,
tfpipe/presets/tabular.py) and "text" (`Text`, tfpipe/presets/text.py), each a frozen object
that carries its options: `build(data, preset=Text(sequence_length=512))`, or by name with the
options as keywords, `build(data, preset="text", sequence_length=512)`. `preset=None` picks one
from the manifest's layout. The types a preset is made of are in tfpipe/presets/base.py (which
the built-ins import, so that no preset module imports this registry); this module is the
registry, and `tfpipe.presets` the public home of the preset objects.
"""

from __future__ import annotations

from tfpipe.errors import ConfigError
from tfpipe.presets.base import Decoder, Preset, PresetContext, PresetLike, declared_options, with_options
from tfpipe.presets.imagenet import IMAGENET, ImageNet
from tfpipe.presets.tabular import TABULAR, Tabular
from tfpipe.presets.text import TEXT, Text

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


_REGISTRY: dict[str, PresetLike] = {p.name: p for p in (IMAGENET, TABULAR, TEXT)}


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
    if preset.name in _REGISTRY and not overwrite:
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
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise ConfigError(
            f"preset must be one of {sorted(_REGISTRY)} or a Preset object. Received: preset={name!r}"
        ) from None


def preset_names() -> list[str]:
    return sorted(_REGISTRY)

"""What a preset is made of: the `PresetContext` it is bound to, the `Decoder` it returns, the
`PresetLike` protocol and the simple `Preset`; the options a preset declares and takes from
`build()`'s keywords. The registry is tfpipe/presets/__init__.py."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar, runtime_checkable

from tfpipe._tf import Feature, Nest, Tensor
from tfpipe.errors import ConfigError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from tfpipe.format.manifest import Manifest
    from tfpipe.format.schema import Schema

    class _OptionsPreset(DataclassInstance, Protocol):
        """A preset that is a dataclass of its options (`with_options`)."""

        @property
        def name(self) -> str: ...


P = TypeVar("P", bound="_OptionsPreset")


@dataclasses.dataclass(frozen=True, slots=True)
class PresetContext:
    """What a preset may know about the data it is bound to.

    Attributes:
      manifest: the dataset's manifest, or None for foreign TFRecord files.
      schema: the manifest's schema, or one inferred from the first record of foreign files.
      keys: every feature key the records hold (mask features included), with its dtype.
      training: training or evaluation semantics.
      where: the data argument, for error messages.
      split: the manifest split read, or None.
      suggested: preset options the data's own description names (a TFDS dataset's image and
        label keys): defaults a preset takes where it has such an option and none is given.
    """

    manifest: Manifest | None
    schema: Schema | None
    keys: Mapping[str, str]
    training: bool
    where: str
    split: str | None = None
    suggested: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, slots=True)
class Decoder:
    """A preset bound to a dataset: everything the parse, decode and map stages need.

    Attributes:
      spec: the `tf.io.parse_example` spec.
      required: feature keys the records must hold; checked before any TF work starts.
      decode: `(features, seed, source) -> element`. With `batched`, `features` is a batch
        and `seed` is None; otherwise one record, and `seed` is a `[2]` int64 tensor for
        stateless random ops (None when `random` is False). `source` is the shard path
        (a string tensor) when `needs_source`, else None.
      finalize: the final map on batches (e.g. normalisation on the host), or None.
      batched: parse and decode after batching (vectorised); False decodes one record at a time
        and batches after decode (images).
      random: decode uses random augmentation, so it takes a per-record seed and nothing
        after it may be cached.
      needs_source: records carry their shard path so decode errors can name it.
      check: `features -> bool tensor`, a cheap validity test run before decode (e.g. "is a
        complete JPEG"). A failing record raises an error naming its shard, or with
        `skip_corrupt=True` is dropped and counted. It must not raise itself.
      describe: `features -> list of tensors` added to that error (e.g. the file name).
      notes: what the preset decided for this data, for `Pipeline.describe()`.
      warnings: the notes that are defaults changing the data (e.g. a label offset chosen for
        records without a manifest): `plan()` warns them.
      packing: how documents are packed into rows (the text modality's `TextPacking`), or
        None; read by the modality's own stages.
      batching: how the records become batches (`pipeline.stages.stage.Batching`: the stages
        between reading and the final ones, where a resumed run starts, what a batch counts);
        None: a record is an example (`pipeline.stages.batching.Records`). Text packs documents
        into rows (`modalities.text.rows.TextRows`).
    """

    spec: Mapping[str, Feature]
    required: tuple[str, ...]
    decode: Callable[[Mapping[str, Tensor], Tensor | None, Tensor | None], Nest]
    finalize: Callable[..., Nest] | None = None  # tf.data hands a tuple element as its arguments
    batched: bool = True
    random: bool = False
    needs_source: bool = False
    check: Callable[[Mapping[str, Tensor]], Tensor] | None = None
    describe: Callable[[Mapping[str, Tensor]], list[Tensor]] | None = None
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    packing: Any = None
    batching: Any = None


@runtime_checkable
class PresetLike(Protocol):
    """What the registry accepts: a name, and `bind` returning a Decoder.

    `bind` gets the preset's options given as keywords of `build()` (`options`, empty when none
    are). A preset declares the names it takes with an `option_names` attribute, or as a
    dataclass whose fields are its options (the built-in `Text`, `ImageNet`, `Tabular`): `build()`
    then refuses a keyword that both the preset and one of its own options claim. A preset that
    declares none gets every keyword that is not one of build()'s own.
    """

    @property
    def name(self) -> str: ...

    def bind(self, ctx: PresetContext, options: Mapping[str, object]) -> Decoder: ...


@dataclasses.dataclass(frozen=True)
class Preset:
    """A user preset: a parse spec plus a map function.

    Args:
      name: the registry name.
      spec: a `tf.io.parse_example` spec, or a function of the PresetContext returning one.
      map_fn: `(features, training) -> (features, labels)`. With `batched=True` it gets a
        batch of parsed records and must be vectorised.
      batched: parse after batching (fast for small records); False maps one record at a time.
    """

    name: str
    spec: Mapping[str, Feature] | Callable[[PresetContext], Mapping[str, Feature]]
    map_fn: Callable[[Mapping[str, Tensor], bool], Nest]
    batched: bool = True
    option_names: ClassVar[frozenset[str]] = frozenset()  # it takes none

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"Preset name must be a non-empty string. Received: name={self.name!r}")
        if not callable(self.map_fn):
            raise ConfigError(f"Preset {self.name!r}: map_fn must be callable. Received: {self.map_fn!r}")

    def bind(self, ctx: PresetContext, options: Mapping[str, object]) -> Decoder:
        if options:
            raise ConfigError(f"Preset {self.name!r} takes no options. Received: {sorted(options)}")
        spec = dict(self.spec(ctx) if callable(self.spec) else self.spec)
        map_fn, training = self.map_fn, ctx.training
        return Decoder(
            spec=spec,
            required=tuple(spec),
            decode=lambda features, seed, source: map_fn(features, training),
            batched=self.batched,
        )


def declared_options(preset: PresetLike) -> frozenset[str] | None:
    """The option names `preset` takes: its `option_names`, else a dataclass's fields; None when
    it declares none (it then gets every keyword that is not one of build()'s own)."""
    names = getattr(preset, "option_names", None)
    if names is not None:
        return frozenset(names)
    if dataclasses.is_dataclass(preset):
        return frozenset(f.name for f in dataclasses.fields(preset))
    return None


def with_options(preset: P, options: Mapping[str, object]) -> P:
    """`preset` (a dataclass of its options) with `options` in place of its own: a named preset's
    defaults overridden by build()'s keywords, as keras-hub's `from_preset(name, **overrides)`.

    Raises:
      ConfigError: a name the preset does not take (the message lists those it takes).
    """
    if not options:
        return preset
    names = {f.name for f in dataclasses.fields(preset)}
    unknown = sorted(set(options) - names)
    if unknown:
        raise ConfigError(
            f"Unknown option(s) {unknown} for preset {preset.name!r}. It takes: {sorted(names)}; "
            "the pipeline's own options are build()'s (seed, cache, num_hosts, ...: "
            "docs/reference/api.md, the short forms)."
        )
    return dataclasses.replace(preset, **options)

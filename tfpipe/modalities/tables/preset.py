"""The tabular preset: one Example per row -> ({column: [B, ...]}, labels [B]).

Rows are batched while still serialized and parsed with one `tf.io.parse_example` call per
batch: one kernel call per 1024 rows instead of 1024 (benchmarks/test_pipeline_speed.py
measures it against per-row `parse_single_example` and `make_csv_dataset`).

Columns whose nulls were filled at convert time (`missing="fill"`) carry an int64
`<col>/missing` feature; the preset returns it as a bool feature named
`<col>` + `mask_suffix`, so a model can tell a filled value from a real one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import ModuleType
from typing import ClassVar

from tfpipe._tf import Feature, Tensor, tf
from tfpipe.errors import ConfigError, field_error
from tfpipe.format.schema import MISSING_SUFFIX
from tfpipe.presets.base import Decoder, PresetContext, with_options
from tfpipe.validation import check_bool, check_str


@dataclasses.dataclass(frozen=True, slots=True)
class Tabular:
    """The tabular preset with its options: `preset=tfpipe.presets.Tabular(label="price")`.

    `build(data, label="price")` on a table is the same: the keywords override the named
    preset's options, as keras-hub's `from_preset(name, ...)` does.

    Attributes:
      label: the label column. None: the manifest's label (required for foreign records).
      features: columns to return; None: every column but the label.
      mask_suffix: name suffix of the returned null masks. "/missing" keeps the record's
        names; Keras 3 Input names cannot hold "/", so pass "_missing" for a dict-input model.
      int_labels: cast int64 labels to int32 (what Keras losses and TPUs expect).
    """

    name: ClassVar[str] = "tabular"
    label: str | None = None
    features: tuple[str, ...] | None = None
    mask_suffix: str = MISSING_SUFFIX
    int_labels: bool = True

    def __post_init__(self) -> None:
        check_str("label", self.label, optional=True)
        if self.features is not None:
            if (
                isinstance(self.features, (str, bytes))
                or not isinstance(self.features, (list, tuple))
                or not all(isinstance(c, str) and c for c in self.features)
            ):
                raise field_error(ConfigError, "features", "a list of column names", self.features)
            object.__setattr__(self, "features", tuple(self.features))
        check_str("mask_suffix", self.mask_suffix)
        check_bool("int_labels", self.int_labels)

    def bind(self, ctx: PresetContext, options: Mapping[str, object]) -> Decoder:
        """This preset, with `options` over its own, bound to the table `ctx` describes."""
        tf_ = tf()
        opts = with_options(self, options)
        schema = ctx.schema
        if schema is None:
            raise ConfigError(f"The tabular preset needs a schema; none could be read from {ctx.where}")
        label = opts.label or schema.label
        if label is None:
            raise ConfigError(
                f"The tabular preset needs a label column: the records at {ctx.where} name none. "
                f"Pass label=<column>; columns are {schema.names}"
            )
        columns = opts.features if opts.features is not None else tuple(n for n in schema.names if n != label)
        for column in (*columns, label):
            if column not in schema.names:
                raise ConfigError(
                    f"Column {column!r} is not in the records at {ctx.where}. "
                    f"Received columns: {schema.names}"
                )
        full = schema.parse_spec()
        spec: dict[str, Feature] = {}
        masks: dict[str, str] = {}
        for column in (*columns, label):
            spec[column] = full[column]
            field = schema[column]
            if field.has_mask and column != label:
                spec[field.mask_name] = full[field.mask_name]
                masks[field.mask_name] = column + opts.mask_suffix
        label_is_int = schema[label].dtype == "int64"

        def decode(
            features: Mapping[str, Tensor], seed: Tensor | None, source: Tensor | None
        ) -> tuple[dict[str, Tensor], Tensor]:
            out = {c: features[c] for c in columns}
            for key, name in masks.items():
                out[name] = tf_.cast(features[key], tf_.bool)
            labels = features[label]
            if label_is_int and opts.int_labels:
                labels = _to_int32(tf_, labels, label, ctx.where)
            return out, labels

        return Decoder(spec=spec, required=tuple(spec), decode=decode, batched=True)


def _to_int32(tf_: ModuleType, labels: Tensor, column: str, where: str) -> Tensor:
    """int64 labels as int32, refusing values a cast would wrap around."""
    fits = tf_.reduce_all((labels >= -(2**31)) & (labels < 2**31))
    message = (
        f"Label column {column!r} at {where} holds values outside int32, which "
        "int_labels=True would wrap around; pass int_labels=False. Received min/max:"
    )
    check = tf_.debugging.Assert(fits, [message, tf_.reduce_min(labels), tf_.reduce_max(labels)])
    with tf_.control_dependencies([check]):
        return tf_.cast(labels, tf_.int32)


TABULAR = Tabular()  # the registry's "tabular": its options come from build()'s keywords

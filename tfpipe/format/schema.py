"""Schema: which features a record holds, their dtypes and shapes.

A schema is inferred from the source at convert time, written into the manifest, and used to
encode (`tfpipe.format.codec`) and to parse (`Schema.parse_spec`). Encoding and parsing are exact
inverses; tests/format/test_codec.py proves it for every dtype.

This module is also the one home of the dtype vocabulary: `Dtype` names the three
tf.train.Example list types, and the maps below say how each is spelled as a `tf.DType`, as a
`tf.train.Feature` list, and which table column kinds are written as it.
"""

from __future__ import annotations

import dataclasses
from typing import Literal, get_args

from tfpipe._tf import DType, Feature, tf
from tfpipe.errors import DataError, ManifestError
from tfpipe.format.jsonobject import JsonObject

Dtype = Literal["int64", "float32", "bytes"]
VARIABLE: tuple[None] = (None,)
"""The shape of a field holding a list of any length, written `[null]` in the manifest."""
DTYPES: tuple[str, ...] = get_args(Dtype)
MISSING_SUFFIX = "/missing"
# A null mask `<name>/missing` is an int64 feature (1 where the value was filled).
MASK_DTYPE: Dtype = "int64"
# The tf.DType each dtype parses to, by name (`tf.string` holds bytes).
TF_DTYPE_NAMES: dict[Dtype, str] = {"int64": "int64", "float32": "float32", "bytes": "string"}
# The `tf.train.Feature` list (its protobuf oneof name) that holds each dtype.
FEATURE_LISTS: dict[Dtype, str] = {"int64": "int64_list", "float32": "float_list", "bytes": "bytes_list"}
# A table column's kind, as the table reader sees its values, and the dtype it is written as.
ColumnKind = Literal["int", "float", "bool", "string", "category"]
KIND_DTYPES: dict[str, Dtype] = {
    "int": "int64",
    "float": "float32",
    "bool": "int64",
    "string": "bytes",
    "category": "bytes",
}


def tf_dtype(dtype: Dtype) -> DType:
    """The `tf.DType` a dtype parses to."""
    return getattr(tf(), TF_DTYPE_NAMES[dtype])


def dtype_of_tf(tf_dtype: object) -> Dtype | None:
    """The dtype of a `tf.DType` (or its name); None for a tf.DType no Example list holds."""
    name = getattr(tf_dtype, "name", tf_dtype)
    return next((d for d, n in TF_DTYPE_NAMES.items() if n == name), None)


def dtype_of_feature_list(kind: str) -> Dtype:
    """The dtype held by a `tf.train.Feature` list ("bytes_list", "float_list", "int64_list")."""
    return next(d for d, k in FEATURE_LISTS.items() if k == kind)


@dataclasses.dataclass(frozen=True, slots=True)
class Field:
    """One feature of a record.

    Args:
      name: the feature key, e.g. `image/encoded` or a table column name.
      dtype: the tf.train.Example list type: int64, float32 or bytes.
      shape: fixed shape of the value; `()` is a scalar, and `(None,)` a list of any length
        (a text document's token ids), parsed as a `tf.io.RaggedFeature`.
      has_mask: a `<name>/missing` int64 feature marks rows whose value was filled.
      source_dtype: the dtype the value had in the source, for the record only.
    """

    name: str
    dtype: Dtype
    shape: tuple[int | None, ...] = ()
    has_mask: bool = False
    source_dtype: str = ""

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ManifestError(
                f"Field {self.name!r}: dtype must be one of {DTYPES}. Received: dtype={self.dtype!r}"
            )
        shape = tuple(None if d is None else int(d) for d in self.shape)
        if None in shape and shape != VARIABLE:
            raise ManifestError(
                f"Field {self.name!r}: expected a fixed shape, or {list(VARIABLE)} for a list of any "
                f"length. Received: shape={list(shape)}"
            )
        object.__setattr__(self, "shape", shape)

    @property
    def variable(self) -> bool:
        """Whether the field holds a list of any length (shape `(None,)`)."""
        return self.shape == VARIABLE

    @property
    def mask_name(self) -> str:
        return self.name + MISSING_SUFFIX

    def to_json(self) -> JsonObject:
        return dataclasses.asdict(self) | {"shape": list(self.shape)}

    @classmethod
    def from_json(cls, obj: JsonObject) -> Field:
        return cls(
            name=obj["name"],
            dtype=obj["dtype"],
            shape=tuple(obj.get("shape", ())),
            has_mask=bool(obj.get("has_mask", False)),
            source_dtype=obj.get("source_dtype", ""),
        )


@dataclasses.dataclass(frozen=True, slots=True)
class Schema:
    """The ordered fields of a record, and which one is the label."""

    fields: tuple[Field, ...]
    label: str | None = None

    def __post_init__(self) -> None:
        names = [f.name for f in self.fields]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise DataError(f"Schema has duplicate feature names: {dupes}")
        clash = sorted(f.mask_name for f in self.fields if f.has_mask and f.mask_name in names)
        if clash:
            raise DataError(
                f"Schema has feature(s) {clash} named like the null mask of another feature: one "
                "would overwrite the other in every record. Rename them."
            )
        if self.label is not None and self.label not in names:
            raise DataError(f"Label column {self.label!r} is not in the schema. Received columns: {names}")

    def __getitem__(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"No feature {name!r} in schema; features are {self.names}")

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.fields]

    def parse_spec(self) -> dict[str, Feature]:
        """The `tf.io.parse_example` spec: one FixedLenFeature per field (a RaggedFeature for a
        list of any length), plus mask features."""
        tf_ = tf()
        spec: dict[str, Feature] = {}
        for f in self.fields:
            if f.variable:
                spec[f.name] = tf_.io.RaggedFeature(tf_dtype(f.dtype))
            else:
                spec[f.name] = tf_.io.FixedLenFeature(f.shape, tf_dtype(f.dtype))
            if f.has_mask:
                spec[f.mask_name] = tf_.io.FixedLenFeature((), tf_dtype(MASK_DTYPE))
        return spec

    def feature_dtypes(self) -> dict[str, Dtype]:
        """Every feature key a record holds, null masks included, with its dtype."""
        keys = {f.name: f.dtype for f in self.fields}
        return keys | {f.mask_name: MASK_DTYPE for f in self.fields if f.has_mask}

    def joined_by(self, new: Schema) -> tuple[Schema | None, list[str]]:
        """The schema a new split with schema `new` is written with when it joins a dataset of
        this schema, and what differs.

        A split joins when it holds the same features with the same dtypes and label: it is
        written with this schema, so its features come in this order and a column it has no
        null in still gets the dataset's null mask (all 0). A null mask it would need that the
        dataset lacks cannot be added to the splits already written.

        Returns:
          (this schema, []) when `new` joins; else (None, the differences, one per column).
        """
        have, got = {f.name: f for f in self.fields}, {f.name: f for f in new.fields}
        found = [f"column {n!r} is not in this split" for n in have if n not in got]
        found += [f"column {n!r} is new in this split" for n in got if n not in have]
        for name in (n for n in have if n in got):
            a, b = have[name], got[name]
            if (a.dtype, a.shape) != (b.dtype, b.shape):
                found.append(f"column {name!r} is {_typed(a)} in the dataset, {_typed(b)} in this split")
            elif b.has_mask and not a.has_mask:
                found.append(
                    f"column {name!r} has nulls in this split (a {b.mask_name!r} mask), none in the dataset's"
                )
        if self.label != new.label:
            found.append(f"the label is {self.label!r} in the dataset, {new.label!r} in this split")
        return (None, found) if found else (self, [])

    def to_json(self) -> JsonObject:
        return {"fields": [f.to_json() for f in self.fields], "label": self.label}

    @classmethod
    def from_json(cls, obj: JsonObject) -> Schema:
        try:
            return cls(tuple(Field.from_json(f) for f in obj["fields"]), obj.get("label"))
        except (KeyError, TypeError) as e:
            raise ManifestError(f"Malformed schema in manifest: {e!r}. Received: {obj!r}") from e


def _typed(field: Field) -> str:
    return field.dtype + (f" of shape {list(field.shape)}" if field.shape else "")


IMAGE_SCHEMA = Schema(
    (
        Field("image/encoded", "bytes"),
        Field("image/format", "bytes"),
        Field("image/filename", "bytes"),
        Field("image/class/label", "int64"),
        Field("image/class/synset", "bytes"),
        Field("image/height", "int64"),
        Field("image/width", "int64"),
        Field("image/colorspace", "bytes"),
        Field("image/channels", "int64"),
    ),
    label="image/class/label",
)
"""The tensorflow/tpu `imagenet_to_gcs.py` layout, shared by the imagenet and images formats."""


def kind_for_pandas(column: str, dtype: object) -> ColumnKind:
    """The column kind of a pandas dtype (written as `KIND_DTYPES[kind]`): ints, bools, floats,
    strings and categoricals. Anything else is refused by column name.

    Raises:
      DataError: a dtype with no Example type (objects, lists, dates), naming the column.
    """
    import pandas as pd
    from pandas.api import types as pdt

    if isinstance(dtype, pd.CategoricalDtype):
        return "category"
    if pdt.is_bool_dtype(dtype):
        return "bool"
    if pdt.is_integer_dtype(dtype):
        return "int"  # uint64 too: the table reader refuses, by row, a value above int64's max
    if pdt.is_float_dtype(dtype):
        return "float"
    if pdt.is_string_dtype(dtype) and not pdt.is_object_dtype(dtype):
        return "string"
    raise DataError(
        f"column {column!r}: expected int, float, bool, string or categorical values. "
        f"Received: dtype={dtype}. Objects, nested lists, dates and other types are not "
        "supported; convert or drop the column."
    )

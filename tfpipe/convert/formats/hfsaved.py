"""Folders that Hugging Face `datasets` writes with `Dataset.save_to_disk(folder)`.

Such a folder holds Arrow IPC stream files (`data-00000-of-00002.arrow`, ...), `state.json`
(which lists them, in order, as `_data_files`) and `dataset_info.json` (the features: each
column's type, and a `ClassLabel`'s names). `DatasetDict.save_to_disk` writes one such folder per
split beside `dataset_dict.json`, which names the splits. Local or gs://.

- `saved_dataset(folder)` reads a saved dataset's files and features (None for another folder).
- `dataset_dict_splits(folder)` names a saved DatasetDict's splits, each converted on its own.
- `class_names(features, column)` are a `ClassLabel` feature's names (also in the Arrow and
  Parquet files' own `huggingface` schema metadata, `declared_labels`).
"""

from __future__ import annotations

import dataclasses
import json

from tfpipe import storage
from tfpipe.errors import DataError
from tfpipe.format.jsonobject import JsonObject

STATE = "state.json"
INFO = "dataset_info.json"
DICT = "dataset_dict.json"
METADATA = (STATE, INFO)
"""The files of a saved dataset that describe it: read, never converted."""


@dataclasses.dataclass(frozen=True, slots=True)
class SavedDataset:
    """A `save_to_disk` folder: its Arrow files in `state.json`'s order, and its features.

    Attributes:
      folder: the folder.
      files: the data files, as `state.json` lists them.
      features: `dataset_info.json`'s "features" (column name -> feature), {} without one.
    """

    folder: str
    files: tuple[str, ...]
    features: JsonObject

    def class_names(self, column: str) -> tuple[str, ...] | None:
        """The names of a `ClassLabel` column, or None (another feature, or no such column)."""
        return class_names(self.features, column)

    def describe(self, column: str) -> str:
        """A column's feature as `datasets` names it ("Value('string')", "ClassLabel"), or ""."""
        feature = self.features.get(column)
        if not isinstance(feature, dict):
            return "" if feature is None else type(feature).__name__
        kind = feature.get("_type", "?")
        return f"{kind}({feature['dtype']!r})" if "dtype" in feature else str(kind)


def _read_json(path: str) -> object:
    try:
        return json.loads(storage.read_bytes(path))
    except ValueError as e:
        raise DataError(f"{path}: expected the JSON that datasets writes. Received: {e}") from None


def saved_dataset(folder: str) -> SavedDataset | None:
    """The saved dataset in `folder`, or None when it holds no `state.json`.

    Raises:
      DataError: a `state.json` that lists no data file, or one that is missing.
    """
    state_path = storage.join(folder, STATE)
    if not storage.exists(state_path):
        return None
    state = _read_json(state_path)
    listed = state.get("_data_files") if isinstance(state, dict) else None
    if not isinstance(listed, list) or not listed or not all(isinstance(f, dict) for f in listed):
        raise DataError(
            f"{state_path}: expected the state.json of datasets' save_to_disk, listing its data files "
            f"as _data_files. Received: {str(state)[:200]}"
        )
    files = tuple(storage.join(folder, str(f.get("filename"))) for f in listed)
    missing = [f for f in files if not storage.exists(f)]
    if missing:
        raise DataError(
            f"{folder}: expected the data files its state.json lists. Received: {len(missing)} missing, "
            f"such as {missing[0]}"
        )
    info_path = storage.join(folder, INFO)
    info = _read_json(info_path) if storage.exists(info_path) else {}
    features = info.get("features") if isinstance(info, dict) else None
    return SavedDataset(folder, files, features if isinstance(features, dict) else {})


def dataset_dict_splits(folder: str) -> list[str] | None:
    """The splits of a saved `DatasetDict` (its `dataset_dict.json`), or None for another folder."""
    path = storage.join(folder, DICT)
    if not storage.exists(path):
        return None
    obj = _read_json(path)
    splits = obj.get("splits") if isinstance(obj, dict) else None
    return [str(s) for s in splits] if isinstance(splits, list) else []


def dataset_dict_error(folder: str, splits: list[str], options: str = "") -> DataError:
    """Why a saved DatasetDict is not one source, with a command per split."""
    way = "\n".join(f"  tfpipe convert {storage.join(folder, s)} DEST --split {s}{options}" for s in splits)
    return DataError(
        f"{folder}: a DatasetDict saved by datasets' save_to_disk (its dataset_dict.json names splits "
        f"{splits}). Expected one dataset: convert each split on its own into one destination:\n{way}"
    )


def class_names(features: JsonObject, column: str) -> tuple[str, ...] | None:
    """The names of `column` when `features` (datasets' JSON form) makes it a `ClassLabel`."""
    feature = features.get(column)
    if isinstance(feature, dict) and feature.get("_type") == "ClassLabel" and "names" in feature:
        return tuple(str(n) for n in feature["names"])
    return None


def schema_features(metadata: dict[bytes, bytes] | None) -> JsonObject:
    """The features in an Arrow or Parquet schema's `huggingface` metadata (datasets writes it
    into every file), or {}."""
    try:
        features = json.loads((metadata or {}).get(b"huggingface", b"{}"))["info"]["features"]
    except (ValueError, KeyError, TypeError):
        return {}
    return features if isinstance(features, dict) else {}

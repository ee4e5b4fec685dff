"""What `tfpipe bench` reads: the `data` option checked and described before anything is timed.

A tfpipe dataset (a directory with `tfpipe.json`) is read by split, and its manifest's example
count bounds the batch (a modality whose batch is records). Raw inputs are named for what they
are by the modality whose raw data they are (`BenchHalf.raw`), with the command that turns them
into a dataset: a CSV or Parquet table, an image folder, a text corpus. TFRecord files without
a manifest are read as they are unless the pipeline's modality needs one
(`BenchHalf.without_manifest`: the tabular pipeline its schema and label, the text pipeline its
length histogram and tokenizer). The data's modality is asked, never named.
"""

from __future__ import annotations

import dataclasses
import posixpath
from collections.abc import Callable

from tfpipe import storage
from tfpipe.bench.config import BenchConfig, pipeline_of
from tfpipe.bench.measure import synthetic
from tfpipe.bench.results import DatasetInfo
from tfpipe.errors import ConfigError, DataError
from tfpipe.format.manifest import MANIFEST_NAME, Manifest
from tfpipe.modalities import modalities, modality_of_preset
from tfpipe.pipeline.read import tfds_info
from tfpipe.pipeline.read.resolve import DataPath, data_path

DEFAULT_SPLIT = "train"


@dataclasses.dataclass(frozen=True, slots=True)
class BenchData:
    """The data a bench reads.

    Attributes:
      info: what the report says about it.
      root: what `plan()` reads: a dataset directory, TFRecord files or a glob.
      split: the manifest split, or None for TFRecord files without a manifest.
      manifest: the manifest, when there is one.
      sources: a mixture's names to their dataset directories (what `plan()` reads in place of
        `root`, the first's); None for one dataset.
    """

    info: DatasetInfo
    root: str
    split: str | None
    manifest: Manifest | None
    sources: dict[str, str] | None = None

    @property
    def planned(self) -> str | dict[str, str]:
        """What `plan()` reads: the mixture's mapping, or the one dataset."""
        return self.sources if self.sources is not None else self.root


def resolve(cfg: BenchConfig, say: Callable[[str], None]) -> BenchData:
    """Checks `cfg.data` (generating the synthetic dataset when it is None).

    Raises:
      DataError: `data` does not exist, is raw data (named, with what to run), or lacks
        the split. ConfigError: the global batch is larger than the split, or `split` is
        given for files that have no manifest.
    """
    if cfg.data is None:
        return _synthetic(cfg, say)
    if not isinstance(cfg.data, str):  # a mixture's names to paths
        return _mixture(cfg, dict(cfg.data), say)
    named = data_path(cfg.data)  # as build() reads it
    path, manifest = named.path, named.manifest
    if manifest is not None:
        split = cfg.split or DEFAULT_SPLIT
        if split not in manifest.splits:
            raise DataError(
                f"{storage.join(path, MANIFEST_NAME)} has no split {split!r}; it has "
                f"{sorted(manifest.splits)}. Pass split (--split)."
            )
        _check_pipeline(cfg, manifest, path)
        info = _info(manifest, split, synthetic=False, generated=0.0)
        if cfg.modality.bench.batch_counts_records:  # text's rows are checked once counted
            check_batch(cfg, info.examples, f"split {split!r} of {path}")
        return BenchData(info, path, split, manifest)
    if named.kind == "tfds":
        return _tfds(cfg, path)
    files = _tfrecord_files(named, cfg)
    if cfg.split is not None:
        raise ConfigError(
            f"split selects a split of a tfpipe dataset, but {cfg.data} has no "
            f"{MANIFEST_NAME}: leave split (--split) out for TFRecord files. "
            f"Received: split={cfg.split!r}"
        )
    sizes = sum(storage.size(f) for f in files)
    return BenchData(DatasetInfo(path, 0, len(files), sizes, False), path, None, None)


def _mixture(cfg: BenchConfig, data: dict[str, str], say: Callable[[str], None]) -> BenchData:
    """Each source of a mixture checked as one dataset is; the report's dataset is their sum,
    its path the sources by name."""
    parts = {n: resolve(dataclasses.replace(cfg, data=path, weights=None), say) for n, path in data.items()}
    first = next(iter(parts.values()))
    info = DatasetInfo(
        ", ".join(f"{n}={p.root}" for n, p in parts.items()),
        sum(p.info.examples for p in parts.values()),
        sum(p.info.shards for p in parts.values()),
        sum(p.info.bytes for p in parts.values()),
        False,
    )
    return BenchData(info, first.root, first.split, first.manifest, {n: p.root for n, p in parts.items()})


def _tfds(cfg: BenchConfig, path: str) -> BenchData:
    """A TFDS dataset folder: its images, counted by its dataset_info.json."""
    info = tfds_info.load(path)
    if not cfg.modality.bench.reads_tfds or info.image_key is None:
        raise ConfigError(
            f"{path} is a TFDS dataset; the bench reads TFDS images with the imagenet pipeline (a "
            f"dataset with one image feature, or supervised keys naming one). Received: pipeline="
            f"{cfg.pipeline!r}, image features {sorted(info.images)}"
        )
    split = cfg.split or DEFAULT_SPLIT
    s = info.split(split)
    examples = sum(s.counts) if s.counts is not None else 0
    size = s.bytes if s.bytes is not None else sum(storage.size(f) for f in s.files)
    check_batch(cfg, examples, f"split {split!r} of {path}")
    return BenchData(DatasetInfo(path, examples, len(s.files), size, False), path, split, None)


def _check_pipeline(cfg: BenchConfig, manifest: Manifest, path: str) -> None:
    """Refuses a pipeline that cannot read the dataset: an image pipeline on a table."""
    wanted = pipeline_of(manifest)
    if cfg.pipeline != wanted:
        kind = modality_of_preset(wanted).bench.noun.format(layout=manifest.layout)
        raise ConfigError(
            f"{path} is {kind}, which the {wanted} pipeline reads. Received: pipeline="
            f"{cfg.pipeline!r}; pass pipeline={wanted!r} (--pipeline {wanted}, the default of "
            "the command line for this data)."
        )


def check_batch(cfg: BenchConfig, examples: int, where: str) -> None:
    """Refuses a global batch larger than the data: one step would repeat examples. (Text
    batches hold rows, not records: build() checks them against the rows an epoch packs into.)"""
    unit = "examples"
    if examples and cfg.global_batch > examples:
        given = "" if cfg.batch_size is not None else "the default "
        raise ConfigError(
            f"{given}batch_size={cfg.global_batch} (--batch-size) is larger than the {examples} "
            f"{unit} in {where}: every batch would repeat {unit}. Pass a batch size of at "
            f"most {examples}, or bench more data. Received: batch_size={cfg.global_batch}"
        )


def _synthetic(cfg: BenchConfig, say: Callable[[str], None]) -> BenchData:
    spec = synthetic.SyntheticSpec.default(str(cfg.pipeline), cfg.synthetic_examples)
    if spec.examples < cfg.global_batch and cfg.modality.bench.batch_counts_records:  # text: documents
        if cfg.synthetic_examples is not None:
            check_batch(cfg, spec.examples, "the generated dataset (synthetic_examples)")
        # The default size is only a default: generate at least one global batch.
        spec = dataclasses.replace(spec, examples=cfg.global_batch)
    manifest, seconds = synthetic.ensure_dataset(spec, cfg.workdir, say)
    split = cfg.split or DEFAULT_SPLIT
    return BenchData(
        _info(manifest, split, synthetic=True, generated=seconds), manifest.root, split, manifest
    )


def _info(manifest: Manifest, split: str, *, synthetic: bool, generated: float) -> DatasetInfo:
    s = manifest.split(split)
    return DatasetInfo(manifest.root, s.examples, len(s.shards), s.bytes, synthetic, generated)


def _tfrecord_files(named: DataPath, cfg: BenchConfig) -> list[str]:
    """The TFRecord files `named` names, or a DataError saying what it is instead."""
    raw, path = str(cfg.data), named.path
    if named.kind == "glob":
        try:
            files = storage.glob(path)
        except FileNotFoundError:
            files = []
        if not files:
            raise DataError(f"No files match data={raw!r} (--data): expected TFRecord shards.")
    elif named.kind == "file":
        _refuse_raw_data(cfg, raw, path, None)
        files = [path]
    elif named.kind == "folder":
        names = [n for n in storage.listdir(path) if not n.startswith(".")]
        _refuse_raw_data(cfg, raw, path, names)
        raise DataError(
            f"{raw} has no {MANIFEST_NAME}, so it is not a tfpipe dataset: "
            + cfg.modality.bench.folder_advice(path)
        )
    else:
        raise DataError(
            f"data={raw!r} (--data) does not exist. Expected a tfpipe dataset directory (with "
            f"{MANIFEST_NAME}), local or gs://, or TFRecord files. Convert raw data with "
            "`tfpipe convert SRC DEST`, or leave data out to bench a generated dataset."
        )
    parent = posixpath.dirname(files[0]) if "/" in files[0] else "."
    if storage.exists(storage.join(parent, MANIFEST_NAME)):
        raise DataError(
            f"{raw} names shard files of the tfpipe dataset {parent}: pass the "
            f"dataset itself, --data {parent} (data={parent!r}), and choose its "
            "split with --split (split=)."
        )
    what = "is a TFRecord file" if files == [path] else f"names {len(files)} TFRecord files"
    refused = cfg.modality.bench.without_manifest(raw, what)
    if refused is not None:
        raise DataError(refused)
    return files


def _refuse_raw_data(cfg: BenchConfig, raw: str, path: str, names: list[str] | None) -> None:
    """Refuses raw data (a table, an image folder, a text corpus: not a dataset), named by the
    modality whose raw data it is, with the command that converts it; `names` is a folder's
    entries, None for a file.

    Raises:
      DataError: `path` is some modality's raw data.
    """
    asked = cfg.modality
    for m in sorted(modalities(), key=lambda m: -m.bench.raw_precedence):
        what = m.bench.raw(path, names, m is asked)
        if what is not None:
            raise DataError(m.bench.convert_advice(raw, what))

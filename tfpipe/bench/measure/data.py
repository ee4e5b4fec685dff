"""What `tfpipe bench` reads: the `data` option checked and described before anything is timed.

A tfpipe dataset (a directory with `tfpipe.json`) is read by split, and its manifest's example
count bounds the batch. Raw inputs are named for what they are, with the command that turns
them into a dataset: a CSV or Parquet table, an image folder. TFRecord files without a
manifest are read as they are by the imagenet pipeline (records that tensorflow/tpu tools
wrote), but the tabular pipeline needs the manifest's schema and label, and the text pipeline
its length histogram (the predicted fill) and tokenizer. A raw text corpus is named with the
command that tokenizes it at convert time.
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
from tfpipe.modalities.images.convert.decode import IMAGE_EXTENSIONS
from tfpipe.modalities.tables.convert.scan import TABLE_SUFFIXES
from tfpipe.modalities.text.convert.reader import kind_of
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
        if cfg.pipeline != "text":  # text rows are not records: checked once they are counted
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
    if cfg.pipeline != "imagenet" or info.image_key is None:
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
        kind = {"table": "a table", "text": "a tokenized text corpus"}.get(
            manifest.layout, f"an image dataset (layout {manifest.layout!r})"
        )
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
    spec = synthetic.SyntheticSpec.default(cfg.pipeline, cfg.synthetic_examples)
    if spec.examples < cfg.global_batch and cfg.pipeline != "text":  # text: documents, not rows
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
        kind = _file_kind(path, _corpus_kinds(cfg))
        if kind:
            raise _raw_data(raw, kind)
        files = [path]
    elif named.kind == "folder":
        kind = _folder_kind(path, _corpus_kinds(cfg))
        if kind:
            raise _raw_data(raw, kind)
        raise DataError(
            f"{raw} has no {MANIFEST_NAME}, so it is not a tfpipe dataset: "
            + (
                f"pass its TFRecord files as a glob such as '{storage.join(path, 'train-*')}', "
                "or convert the raw data with `tfpipe convert SRC DEST`."
                if cfg.pipeline == "imagenet"
                else "pass a tfpipe dataset directory, or convert "
                "the raw table with `tfpipe convert TABLE DEST --label COLUMN`."
                if cfg.pipeline == "tabular"
                else f"pass a tfpipe text dataset directory, or convert the corpus with `{TOKENIZE}`."
            )
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
    if cfg.pipeline == "tabular":
        what = "is a TFRecord file" if files == [path] else f"names {len(files)} TFRecord files"
        raise DataError(
            f"{raw} {what} without a {MANIFEST_NAME} manifest, and the tabular "
            "pipeline takes its schema and label from one: pass a tfpipe "
            "dataset directory, or convert the raw table with `tfpipe convert TABLE "
            "DEST --label COLUMN`."
        )
    if cfg.pipeline == "text":
        what = "is a TFRecord file" if files == [path] else f"names {len(files)} TFRecord files"
        raise DataError(
            f"{raw} {what} without a {MANIFEST_NAME} manifest, and the text pipeline's bench "
            "predicts the fill from the length histogram and tokenizer one holds: pass a tfpipe "
            f"text dataset directory, or convert the corpus with `{TOKENIZE}`."
        )
    return files


# How a raw text corpus becomes a dataset: tokenized once, at convert time, not every epoch.
TOKENIZE = "tfpipe convert CORPUS DEST --tokenizer PATH (or --train-tokenizer bpe --vocab-size 32000)"


def _raw_data(raw: str, kind: str) -> DataError:
    if "text corpus" in kind:
        return DataError(
            f"{raw} is {kind}, not a tfpipe dataset: tokenize it once, at convert time, with "
            f"`{TOKENIZE.replace('CORPUS', raw)}`, then `tfpipe bench --data DEST`. The pipeline "
            "then reads token ids; tokenizing in it would cost CPU every epoch."
        )
    table = "table" in kind
    return DataError(
        f"{raw} is {kind}, not a tfpipe dataset: run `tfpipe convert {raw} "
        f"DEST{' --label COLUMN' if table else ''}` first, then `tfpipe bench "
        f"--data DEST{' --pipeline tabular' if table else ''}`."
    )


def _suffix(name: str) -> str:
    return posixpath.splitext(name)[1].lower()


def _corpus_kinds(cfg: BenchConfig) -> tuple[str, ...]:
    """The text corpus kinds a raw file is named as: JSON Lines always; plain .txt files and
    Parquet only when the text pipeline is asked for (a .txt beside other data is a note, a
    Parquet file otherwise a table)."""
    return ("jsonl", "txt", "parquet") if cfg.pipeline == "text" else ("jsonl",)


_CORPUS_WORDS = {"jsonl": "JSON Lines", "txt": "plain text", "parquet": "Parquet"}


def _file_kind(path: str, corpus: tuple[str, ...] = ("jsonl",)) -> str | None:
    """ "a CSV table file" etc. for raw data; None for anything that may be a TFRecord file."""
    head = b"" if storage.is_gcs(path) else _head(path)  # on gs://, the name alone
    kind = kind_of(path)
    if kind in corpus:
        return f"a text corpus file ({_CORPUS_WORDS[kind]})"
    fmt = "parquet" if head == b"PAR1" else TABLE_SUFFIXES.get(_suffix(path))
    if fmt:
        return f"a {'Parquet' if fmt == 'parquet' else 'CSV'} table file"
    if _suffix(path) in IMAGE_EXTENSIONS:
        return "an image file"
    return None


def _head(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read(4)


def _folder_kind(path: str, corpus: tuple[str, ...] = ("jsonl",)) -> str | None:
    """ "a folder of images" etc. for a folder of raw data; None when it is something else."""
    names = [n for n in storage.listdir(path) if not n.startswith(".")]
    if any(kind_of(n) in corpus for n in names):
        return "a folder of text corpus files"
    tables = sorted({TABLE_SUFFIXES[_suffix(n)] for n in names if _suffix(n) in TABLE_SUFFIXES})
    if tables:
        kinds = " and ".join("CSV" if t == "csv" else "Parquet" for t in tables)
        return f"a folder of {kinds} table files"
    if any(_suffix(n) in IMAGE_EXTENSIONS for n in names):
        return "a folder of images"
    for sub in names[:3]:  # class folders: look inside the first few
        if any(_suffix(n) in IMAGE_EXTENSIONS for n in storage.listdir(storage.join(path, sub))):
            return "a folder of image class folders"
    return None

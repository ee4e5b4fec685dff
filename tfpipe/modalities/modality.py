"""What a modality is: `Modality`, one kind of data with its three halves, and `BenchHalf`, what
bench asks of it. The built-in modalities import this module, the registry
(tfpipe/modalities/__init__.py) loads them by name: no modality imports the registry, and
nothing that asks the registry imports a modality.

The halves, each where its own code is:
- convert: a `tfpipe.convert.kind.Kind` (its sources, their encoding, its tally, what it
  attaches to a split, its options and how it recognizes a source), the `convert/` folder.
- read: a preset (`tfpipe.presets.PresetLike`); the Decoder it binds carries the batching
  (`pipeline.stages.stage.Batching`) that makes the stages between reading and the final ones.
  The modality also says which records without a manifest are its own (`recognizes`), what an
  epoch holds (`epoch`, for `steps_per_epoch`) and how a split reads in a summary (`summary`).
- bench: a `BenchHalf`: its synthetic data, its units, its default batch and models, what it
  refuses, its advice and its section of the report.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tfpipe.errors import ConfigError

if TYPE_CHECKING:
    from tfpipe.convert.kind import Kind
    from tfpipe.format.manifest import Manifest
    from tfpipe.presets.base import PresetLike


def never(keys: Mapping[str, str], tfds: Any, options: Mapping[str, Any]) -> bool:
    """Records without a manifest are never this modality's (tables, text: their manifest says)."""
    return False


def records_in_epoch(src: Any, batch_size: int, options: Mapping[str, Any]) -> tuple[int, str]:
    """(what an epoch of the split `src` holds in units of a batch, how to name it): its records,
    for a modality whose batch is records.

    Raises:
      ConfigError: an option given (sequence_length, packing, a text option): they shape the
        rows of a modality that packs documents into rows.
    """
    if any(v is not None or k not in ("sequence_length", "packing") for k, v in options.items()):
        layout = src.manifest.layout if src.manifest is not None else "TFDS"
        raise ConfigError(
            f"sequence_length, packing and the text options count the rows of a text split; "
            f"{src.where} is {layout!r} data. Received: "
            + ", ".join(f"{k}={v!r}" for k, v in options.items() if v is not None)
        )
    return src.examples, f"{src.examples} records"


def says_nothing(manifest: Manifest, *split: str) -> tuple[str, ...]:
    """A modality that adds nothing to what `tfpipe inspect` says of every dataset."""
    return ()


@dataclasses.dataclass(frozen=True)
class Synthetic:
    """The dataset bench generates for a modality when no data is given, through `tfpipe.convert`
    (bench/measure/synthetic.py caches it).

    Attributes:
      examples: the default size (images, rows or documents).
      shards: the default number of shards.
      generate: `generate(spec, raw) -> src`: writes the raw data into the folder `raw`, returns
        what `tfpipe.convert` reads.
      convert_options: the options it is converted with.
      describe: `describe(spec) -> (verb, what)`, e.g. ("Generating", "synthetic ImageNet-like
        JPEGs"), for the progress line.
      key: what shapes its bytes besides the spec (a library's version), hashed into its name.
    """

    examples: int
    shards: int
    generate: Callable[[Any, str], str]
    describe: Callable[[Any], tuple[str, str]]
    convert_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    key: Callable[[], dict[str, str]] = dict


@dataclasses.dataclass(frozen=True)
class Units:
    """The words of a modality's rates in its advice: what a batch holds ("example",
    "sequence")."""

    example: str = "example"

    @property
    def examples(self) -> str:
        return self.example + "s"


@dataclasses.dataclass(frozen=True)
class BenchHalf:
    """What bench asks of a modality. Every function takes what bench has at that point; the
    defaults are those of a modality whose batch is records and that adds nothing.

    Attributes:
      default_batch: the per-host batch when none is given.
      models: the Keras models `--model` builds for it (bench/measure/models.py).
      max_consumer_rate: the most per host any accelerator takes in, in `rate_unit`s a second.
      rate_unit: what that rate counts ("examples", "slot tokens").
      slots: `slots(sequence_length) -> int`: `rate_unit`s an example is (text: the sequence
        length given, or its default).
      options: the BenchConfig fields only it takes (text: sequence_length, packing, truncate);
        given, they pick it.
      row_length: `row_length(cfg) -> int | None`: the tokens of a row (text), else None.
      plan_options: `plan_options(cfg) -> dict`: what `plan()` gets besides the batch.
      mixes: a mixture of its datasets can be benched (its shares measured).
      batch_counts_records: a batch is records, so a batch larger than the split is refused
        before anything is timed (text's batch is rows, checked when they are counted).
      reads_tfds: a TFDS dataset folder is read with its preset.
      noun: what one of its datasets is, for a refusal ("a table").
      without_manifest: `without_manifest(raw, what) -> str | None`: why TFRecord files without
        a manifest cannot be benched with it (None: they can).
      folder_advice: `folder_advice(path) -> str`: what to pass for a folder that is no dataset
        (the convert command).
      raw: `raw(path, names, asked) -> str | None`: what raw data (not a dataset) `path` is in
        its words ("a CSV table file"), when it is its own; `names` the folder's entries, None
        for a file; `asked` it is the pipeline asked for.
      raw_precedence: which modality names raw data first when several would (text's JSON Lines
        corpus over a JSON Lines table): the highest.
      convert_advice: `convert_advice(raw, what) -> str`: the command that converts raw data it
        named.
      synthetic: the dataset generated when no data is given.
      measure: `measure(pipe, cfg, say) -> section`: what it measures before the prefixes are
        timed (text: the fill and the rows a chunk packs into), or None.
      units: `units(section) -> dict | None`: examples an element of each prefix group holds
        before batching (text: rows per chunk), or None.
      storage_examples: `storage_examples(records, section) -> int`: the examples the storage
        read holds in the report's unit.
      baseline: `baseline(pipe, manifest, split, cfg, eps, say) -> Comparison`: the baseline
        pipeline `--compare` times on the same data, or None when it has none.
      reference_shape: `reference_shape(pipe) -> dict`: the shape a reference row's rate is
        converted at (text: the packing mode).
      figures: `figures(section, producer, consumer, stages, scaling, storage)`: the report's
        section from what was measured (judge), or None.
      stage_advice: `stage_advice(stage, share, data_on_gcs) -> Recommendation | None`: what to do
        about its own bottleneck stage (images: decode).
      advice: `advice(figures) -> list[Recommendation]`: advice that follows from its section,
        whatever the verdict.
      units_words: the words of its rates (advice).
      section_json: `section_json(figures) -> dict`: its section of the report's JSON (text's
        `text` object), {} for none.
      view: `view(report) -> ReportView | None`: the report as the table and plot show it in its
        own units, with its section's rows (present); None: in examples.
    """

    default_batch: int
    models: tuple[str, ...]
    max_consumer_rate: float
    synthetic: Synthetic
    noun: str
    rate_unit: str = "examples"
    slots: Callable[[int | None], int] = lambda sequence_length: 1
    options: tuple[str, ...] = ()
    row_length: Callable[[Any], int | None] = lambda cfg: None
    plan_options: Callable[[Any], dict[str, Any]] = lambda cfg: {}
    mixes: bool = False
    batch_counts_records: bool = True
    reads_tfds: bool = False
    without_manifest: Callable[[str, str], str | None] = lambda raw, what: None
    folder_advice: Callable[[str], str] = lambda path: "convert the raw data with `tfpipe convert SRC DEST`."
    raw: Callable[[str, Sequence[str] | None, bool], str | None] = lambda path, names, asked: None
    raw_precedence: int = 0
    convert_advice: Callable[[str, str], str] = lambda raw, what: ""
    measure: Callable[..., Any] = lambda pipe, cfg, say: None
    units: Callable[[Any], dict[str, float] | None] = lambda section: None
    storage_examples: Callable[[int, Any], int] = lambda records, section: records
    baseline: Callable[..., Any] | None = None
    reference_shape: Callable[[Any], dict[str, Any]] = lambda pipe: {}
    figures: Callable[..., Any] = lambda section, *measured: None
    stage_advice: Callable[[str, str, bool], Any] = lambda stage, share, on_gcs: None
    advice: Callable[[Any], list[Any]] = lambda figures: []
    units_words: Units = Units()
    section_json: Callable[[Any], dict[str, Any]] = lambda figures: {}
    view: Callable[[Any], Any] = lambda report: None


@dataclasses.dataclass(frozen=True)
class Modality:
    """One kind of data, whole: how its sources are converted, how its records are read, and how
    bench measures it.

    Attributes:
      name: its name: a source's and its inputs' (`Source.kind`), a done-record's tally's, and
        what messages call it ("text", "images", "tables").
      convert: the convert half (`Kind`).
      preset: the read half: the preset `build()` picks for its datasets and bench plans
        (bench's `pipeline` is its name).
      bench: the bench half.
      recognizes: `recognizes(keys, tfds, options) -> bool`: records without a manifest are its
        own (images: `image/encoded`, a TFDS image feature, an `image_key` option).
      epoch: `epoch(src, batch_size, options) -> (count, what)`: what an epoch of the split
        `src` holds in units of a batch (`steps_per_epoch`; text: rows as build() packs them).
      summary: `summary(manifest, split) -> lines`: what `tfpipe convert` says of a split it
        converted; None: the command's own lines.
      about_dataset, about_split: `(manifest) -> lines`, `(manifest, split) -> lines`: what
        `tfpipe inspect` says besides what it says of every dataset (text: its tokenizer, a
        split's documents, lengths and predicted fill).
    """

    name: str
    convert: Kind
    preset: PresetLike
    bench: BenchHalf
    recognizes: Callable[[Mapping[str, str], Any, Mapping[str, Any]], bool] = never
    epoch: Callable[[Any, int, Mapping[str, Any]], tuple[int, str]] = records_in_epoch
    summary: Callable[[Any, str], tuple[str, ...]] | None = None
    about_dataset: Callable[[Any], tuple[str, ...]] = says_nothing
    about_split: Callable[[Any, str], tuple[str, ...]] = says_nothing

    @property
    def layouts(self) -> tuple[str, ...]:
        """The manifest layouts its datasets carry (`Kind.layouts`, else its formats)."""
        return self.convert.layouts or self.convert.formats

    def __post_init__(self) -> None:
        if self.name != self.convert.name:
            raise ConfigError(
                f"A modality's convert half carries its name. Received: Modality {self.name!r} with "
                f"Kind {self.convert.name!r}"
            )

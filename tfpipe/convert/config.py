"""What a conversion should do: frozen, validated option dataclasses."""

from __future__ import annotations

import codecs
import dataclasses
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args

from tfpipe.errors import ConfigError, field_error
from tfpipe.format.jsonobject import JsonObject
from tfpipe.modalities.text.convert.specialtokens import check_named
from tfpipe.validation import as_int, check_choice, check_int

if TYPE_CHECKING:
    from tfpipe.convert.kind import Kind

Compression = Literal["none", "gzip"]
MissingPolicy = Literal["error", "fill"]
MissingLabelPolicy = Literal["error", "drop"]
ImageCheck = Literal["decode", "header"]
ColumnType = Literal["int", "float", "bool", "string"]
TokenizerTraining = Literal["sentencepiece", "sentencepiece-bpe", "bpe", "wordpiece"]
# How a text corpus gets its tokenizer, as every refusal of a corpus without one says it.
TOKENIZER_OPTIONS = (
    "--tokenizer PATH (a SentencePiece .model or a Hugging Face tokenizer.json) or --train-tokenizer "
    f"{'|'.join(get_args(TokenizerTraining))} --vocab-size N"
)

_FLAG_NAMES = {"labels_file": "--labels", "column_types": "--column-type"}


DEFAULT_SHARD_SIZE = 128 << 20
"""128 MiB: the TFRecord shard size TF's performance guide recommends (>100 MB per file, so
reads are sequential, and >= 10 files per reader host for interleave parallelism)."""

MIN_RESIZE_SHORTER = 8
"""The smallest `resize_shorter`: one JPEG block (8x8 pixels); below it the shorter side would
hold less than one block, which no image model trains on."""


def check_image_options(resize_shorter: int | None, quality: int) -> tuple[int | None, int]:
    """The rules for image re-encoding options, for ConvertConfig and `images.normalize_image`.

    Returns:
      (resize_shorter, quality) as Python ints.

    Raises:
      ConfigError: `resize_shorter` is not None or an int >= 8, or `quality` not an int in 1..100.
    """
    resize = check_int(
        "resize_shorter",
        resize_shorter,
        MIN_RESIZE_SHORTER,
        optional=True,
        what=f"an int >= {MIN_RESIZE_SHORTER} or None",
    )
    return resize, check_int("quality", quality, 1, 100, what="an int in 1..100")


_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)
_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "kib": 1 << 10,
    "m": 10**6,
    "mb": 10**6,
    "mib": 1 << 20,
    "g": 10**9,
    "gb": 10**9,
    "gib": 1 << 30,
    "t": 10**12,
    "tb": 10**12,
    "tib": 1 << 40,
    "ki": 1 << 10,
    "mi": 1 << 20,
    "gi": 1 << 30,
    "ti": 1 << 40,
}


def parse_size(text: str | int) -> int:
    """`128MiB`, `64MB`, `1g` or a plain byte count (an int of any integral type) -> bytes."""
    count = as_int(text)
    if count is not None:
        return count
    m = _SIZE_RE.match(str(text))
    unit = (m.group(2) or "").lower() if m else None
    if not m or unit not in _UNITS:
        raise ConfigError(f"Expected a size such as 128MiB, 64MB or 1000000. Received: {text!r}")
    return int(float(m.group(1)) * _UNITS[unit])


ALL_COLUMNS = "*"
"""The `null_values` key whose values mean missing in every column."""


def normalize_null_values(value: object) -> dict[str, tuple[str, ...]]:
    """`null_values` as {column or ALL_COLUMNS: tokens}, from a list (every column) or a mapping.

    Raises:
      ConfigError: anything else, or an empty token (the empty field is always missing).
    """
    if isinstance(value, str):
        value = [value]
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, (list, tuple)):
        items = [(ALL_COLUMNS, value)]
    else:
        items = None
    out: dict[str, tuple[str, ...]] = {}
    for column, tokens in items or []:
        tokens = (tokens,) if isinstance(tokens, str) else tokens
        if not isinstance(column, str) or not isinstance(tokens, (list, tuple)):
            items = None
            break
        if not all(isinstance(t, str) and t for t in tokens):
            raise ConfigError(
                "null_values must be non-empty strings (an empty field is always missing). "
                f"Received: null_values={value!r}"
            )
        out[column] = tuple(dict.fromkeys(tokens))
    if items is None:
        raise ConfigError(
            "null_values must be a list of strings (for every column) or a mapping of column "
            f"names (or '*', every column) to lists of strings. Received: null_values={value!r}"
        )
    return out


@dataclasses.dataclass(frozen=True, slots=True)
class ShardConfig:
    """How records are cut into shards.

    Args:
      split: the split name, the prefix of every shard name (`train-00000-of-00008`).
      num_shards: an exact shard count; example counts then differ by at most one.
      shard_size: target bytes per shard when `num_shards` is None; the count is chosen up
        front from the estimated output size, because every name carries `-of-{count}`.
      compression: "none" or "gzip" (shard names then end in `.gz`).
    """

    split: str = "train"
    num_shards: int | None = None
    shard_size: int = DEFAULT_SHARD_SIZE
    compression: Compression = "none"

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_]+", self.split or ""):
            raise field_error(ConfigError, "split", "a name of letters, digits and _", self.split)
        check = check_int("num_shards", self.num_shards, 1, optional=True, what="a positive int or None")
        object.__setattr__(self, "num_shards", check)
        check = check_int("shard_size", self.shard_size, 1, what="a positive number of bytes")
        object.__setattr__(self, "shard_size", check)
        check_choice("compression", self.compression, get_args(Compression))

    def count_for(self, n_items: int, estimated_bytes: int) -> int:
        """The number of shards: exact if asked for, else by size; never more than the items."""
        by_size = -(-max(estimated_bytes, 1) // self.shard_size)
        wanted = by_size if self.num_shards is None else self.num_shards
        return max(1, min(wanted, n_items))


@dataclasses.dataclass(frozen=True, slots=True)
class ConvertConfig:
    """Everything `tfpipe.convert` does besides sharding.

    Args:
      format: the source format; "auto" picks by content.
      workers: encoding processes; None means all cores. Output bytes do not depend on it.
      resize_shorter: re-encode images whose shorter side is larger, to this many pixels.
      quality: JPEG quality for re-encoded images.
      label: the label column of a table.
      missing: nulls in tables fail the run ("error") or are filled and masked ("fill").
      missing_label: a null in the label column fails the run ("error", even with
        missing="fill": a label is never made up) or drops the row ("drop"; the manifest
        counts the dropped rows and lists where they were).
      label_offset: the label of the first class; None means 1 for imagenet, 0 otherwise.
      labels_file: for a flat ImageNet validation folder, the synset of each file.
      strict: an undecodable image fails the run instead of being skipped.
      check: how an RGB JPEG that passes through unchanged is checked: "decode" (a 1/8-scale
        decode that reads the whole stream, ~1.4 ms per ImageNet image) or "header" (frame
        header and end marker only, so bytes are just copied; misses damage inside the data).
      seed: the seed of the file shuffle before sharding.
      chunk_rows: rows per table chunk read and encoded at once.
      encoding: the text encoding of CSV files, e.g. "latin-1" or "utf-16".
      null_values: CSV text that means missing besides the empty field (which always does):
        a list for every column (`["NA", "N/A"]`), or a mapping of column names, and "*" for
        every column, to lists (`{"Ozone": ["NA"]}`). Text such as NA or None is otherwise
        kept as written.
      column_types: declared types of CSV columns (and Hive partition columns), instead of
        the inferred ones: {"zip": "string"}; "int", "float", "bool" or "string".
      text_field: the JSON field (or Parquet column) holding a text corpus's documents.
      lines: a `.txt` file of a text corpus holds one document per line (else one per file).
      tokenizer: a SentencePiece `.model` or a Hugging Face `tokenizer.json` to tokenize a
        text corpus with (stored with the dataset).
      train_tokenizer: train one on the corpus instead: "sentencepiece" (unigram),
        "sentencepiece-bpe", "bpe" (byte-level, `tokenizers`) or "wordpiece"; with vocab_size.
      vocab_size: the trained tokenizer's vocabulary size.
      special_tokens: the roles of tokens the tokenizer does not declare, or declares otherwise,
        by their text: {"eos": "[EOS]", "bos": "[BOS]"} (roles: pad, unk, bos, eos, cls, sep,
        mask). The tokenizer's own declarations fill in the rest; the manifest records both.
    """

    format: str = "auto"
    workers: int | None = None
    resize_shorter: int | None = None
    quality: int = 90
    label: str | None = None
    missing: MissingPolicy = "error"
    label_offset: int | None = None
    labels_file: str | None = None
    strict: bool = False
    check: ImageCheck = "decode"
    seed: int = 0
    chunk_rows: int = 8192
    missing_label: MissingLabelPolicy = "error"
    encoding: str = "utf-8"
    null_values: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    column_types: Mapping[str, ColumnType] = dataclasses.field(default_factory=dict)
    text_field: str = "text"
    lines: bool = False
    tokenizer: str | None = None
    train_tokenizer: TokenizerTraining | None = None
    vocab_size: int | None = None
    special_tokens: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        self._check_text()
        object.__setattr__(self, "null_values", normalize_null_values(self.null_values))
        if not isinstance(self.column_types, Mapping) or not all(
            isinstance(c, str) and t in get_args(ColumnType) for c, t in self.column_types.items()
        ):
            raise field_error(
                ConfigError,
                "column_types",
                f"a mapping of column names to one of {get_args(ColumnType)}",
                self.column_types,
            )
        object.__setattr__(self, "column_types", dict(self.column_types))
        if not isinstance(
            self.format, str
        ):  # its value is checked against the modalities' (`modality_of_format`)
            raise ConfigError(f"format must be a string. Received: format={self.format!r}")
        check_choice("missing", self.missing, get_args(MissingPolicy))
        check_choice("missing_label", self.missing_label, get_args(MissingLabelPolicy))
        if self.missing_label == "drop" and self.label is None:
            raise ConfigError(
                "missing_label='drop' (--missing-label drop) drops rows whose label is null, so it "
                "needs a label column. Received: label=None; pass label=COLUMN (--label COLUMN)"
            )
        try:
            codecs.lookup(self.encoding)
        except (LookupError, TypeError):
            raise field_error(
                ConfigError,
                "encoding",
                "a text encoding Python knows, such as utf-8, latin-1 or utf-16",
                self.encoding,
            ) from None
        check_choice("check", self.check, get_args(ImageCheck))
        ints = {
            "workers": check_int("workers", self.workers, 1, optional=True, what="a positive int or None"),
            "chunk_rows": check_int("chunk_rows", self.chunk_rows, 1, what="a positive int"),
            "label_offset": check_int("label_offset", self.label_offset, None, optional=True),
            "seed": check_int("seed", self.seed, None),
        }
        ints["resize_shorter"], ints["quality"] = check_image_options(self.resize_shorter, self.quality)
        for name, value in ints.items():  # stored as Python ints (numpy's np.int64 too)
            object.__setattr__(self, name, value)

    @property
    def n_workers(self) -> int:
        return self.workers or os.cpu_count() or 1

    def _check_text(self) -> None:
        if not isinstance(self.text_field, str) or not self.text_field:
            raise field_error(ConfigError, "text_field", "a field name", self.text_field)
        if not isinstance(self.lines, bool):
            raise field_error(ConfigError, "lines", "a bool", self.lines)
        if self.tokenizer is not None and not isinstance(self.tokenizer, str):
            raise field_error(ConfigError, "tokenizer", "a path or None", self.tokenizer)
        if self.train_tokenizer is not None:
            check_choice("train_tokenizer", self.train_tokenizer, get_args(TokenizerTraining))
        if self.tokenizer is not None and self.train_tokenizer is not None:
            raise ConfigError(
                "Expected either tokenizer (--tokenizer PATH) or train_tokenizer (--train-tokenizer "
                f"KIND), not both. Received: tokenizer={self.tokenizer!r}, train_tokenizer={self.train_tokenizer!r}"
            )
        if (self.train_tokenizer is None) != (self.vocab_size is None):
            raise ConfigError(
                "train_tokenizer (--train-tokenizer KIND) and vocab_size (--vocab-size N) go together. "
                f"Received: train_tokenizer={self.train_tokenizer!r}, vocab_size={self.vocab_size!r}"
            )
        if self.vocab_size is not None:
            check_int("vocab_size", self.vocab_size, 2, 2**31 - 1, what="an int in 2..2**31-1")
        object.__setattr__(self, "special_tokens", check_named(self.special_tokens))

    def given(self, names: tuple[str, ...]) -> JsonObject:
        """The fields of `names` set to something other than their default, by name."""
        default = ConvertConfig()
        return {n: getattr(self, n) for n in names if getattr(self, n) != getattr(default, n)}


def recorded_options(shard_cfg: ShardConfig, cfg: ConvertConfig, left_out: tuple[str, ...]) -> JsonObject:
    """The options a split's manifest (and its plan record) keeps: those of its kind of source
    (all but its kind's `left_out`, `options_left_out`), `workers` left out (it changes no byte)."""
    chosen = dataclasses.asdict(shard_cfg) | dataclasses.asdict(cfg)
    return {k: v for k, v in chosen.items() if k != "workers" and k not in left_out}


def applies_to() -> dict[str, tuple[str, ...]]:
    """The source formats each ConvertConfig field applies to, when it applies to some only: the
    formats of every modality whose convert half takes it (`Kind.options`)."""
    from tfpipe.modalities import modalities  # the registry: it loads no modality to import

    out: dict[str, tuple[str, ...]] = {}
    for m in modalities():
        for name, formats in m.convert.options.items():
            out[name] = out.get(name, ()) + tuple(formats or m.convert.formats)
    return out


def options_left_out(kind: Kind) -> tuple[str, ...]:
    """The ConvertConfig fields a split of `kind` does not record: another modality's. A kind
    that records its own only (`Kind.own_options_only`, text) leaves out every option that
    does not apply to its formats; the others leave out the options of those kinds alone."""
    from tfpipe.modalities import modalities  # as in `applies_to`

    if kind.own_options_only:
        return tuple(n for n, formats in applies_to().items() if not set(formats) & set(kind.formats))
    takers: dict[str, list[Kind]] = {}
    for m in modalities():
        for name in m.convert.options:
            takers.setdefault(name, []).append(m.convert)
    return tuple(
        n for n, kinds in takers.items() if kind not in kinds and all(k.own_options_only for k in kinds)
    )


def check_applies(cfg: ConvertConfig, fmt: str) -> None:
    """Refuses options set (not at their default) for a source they do not apply to, naming
    the kind of source each applies to: an option ignored in silence would look as if it worked.

    Raises:
      ConfigError: naming every such option, its value, the source's format and where it applies.
    """
    from tfpipe.modalities import modalities  # as in `applies_to`

    defaults = ConvertConfig()
    unused = {name: where for m in modalities() for name, where in m.convert.unused(cfg).items()}
    wrong, values = [], []
    for name, formats in applies_to().items():
        value = getattr(cfg, name)
        if value == getattr(defaults, name) or (fmt in formats and name not in unused):
            continue
        where = unused.get(name) or _sources(formats, modalities())
        wrong.append(f"{name} ({_FLAG_NAMES.get(name, '--' + name.replace('_', '-'))}) applies to {where}")
        values.append(f"{name}={value!r}")
    if wrong:
        noun = next((m.convert.nouns[fmt] for m in modalities() if fmt in m.convert.nouns), fmt)
        raise ConfigError(
            f"{'; '.join(wrong)}. Received: {', '.join(values)} for {noun} "
            f"(format {fmt!r}). Drop {'it' if len(wrong) == 1 else 'them'}, or pass --format if the "
            "format is wrong."
        )


def _sources(formats: tuple[str, ...], modalities: tuple[Any, ...]) -> str:
    """ "tables and text corpora (--format csv, parquet, arrow, jsonl or text)": what each
    modality calls its sources of these formats (`Kind.sources`), and the formats."""
    words = []
    for m in modalities:
        mine = tuple(f for f in m.convert.formats if f in formats)
        if mine:
            words.append(m.convert.sources.get(mine) or m.convert.sources[m.convert.formats])
    listed = ", ".join(formats[:-1]) + " or " + formats[-1] if len(formats) > 1 else formats[0]
    return f"{' and '.join(words)} (--format {listed})"


def as_flags(*configs: ShardConfig | ConvertConfig, leave_out: tuple[str, ...] = ()) -> list[str]:
    """The `tfpipe convert` flags that set the configs' non-default fields (for a command to
    print), except the fields `leave_out` names."""
    import shlex

    flags: list[str] = []
    for cfg in configs:
        for field in dataclasses.fields(cfg):
            value = getattr(cfg, field.name)
            default = field.default_factory() if callable(field.default_factory) else field.default
            if field.name in leave_out or value == default:
                continue
            flag = _FLAG_NAMES.get(field.name, "--" + field.name.replace("_", "-"))
            if isinstance(value, bool):
                flags.append(flag)
            elif field.name == "null_values":
                for column, tokens in value.items():
                    named = ",".join(tokens) if column == ALL_COLUMNS else f"{column}={','.join(tokens)}"
                    flags.append(f"{flag}={shlex.quote(named)}")
            elif field.name == "column_types":
                flags += [f"{flag} {shlex.quote(f'{c}={t}')}" for c, t in value.items()]
            else:
                flags.append(f"{flag} {shlex.quote(str(value))}")
    return flags


def split_options(
    options: dict[str, Any], shards: ShardConfig | None = None, config: ConvertConfig | None = None
) -> tuple[ShardConfig, ConvertConfig]:
    """The two configs of `convert(src, dest, shards, config, **options)`.

    Keyword options fill in the config that was not given; a config given as an object is
    taken whole, so an option that names one of its fields is refused rather than guessed
    at (which one would win?).

    Raises:
      ConfigError: an unknown option, a config of the wrong type, or an option given twice.
    """
    shard_keys = {f.name for f in dataclasses.fields(ShardConfig)}
    convert_keys = {f.name for f in dataclasses.fields(ConvertConfig)}
    unknown = sorted(set(options) - shard_keys - convert_keys)
    if unknown:
        raise ConfigError(
            f"Unknown convert option(s) {unknown}. Expected some of {sorted(shard_keys | convert_keys)}"
        )
    if "shard_size" in options:
        options = options | {"shard_size": parse_size(options["shard_size"])}
    return (
        _one_config("shards", ShardConfig, shards, shard_keys, options),
        _one_config("config", ConvertConfig, config, convert_keys, options),
    )


C = TypeVar("C", ShardConfig, ConvertConfig)


def _one_config(name: str, cls: type[C], given: object, keys: set[str], options: dict[str, Any]) -> C:
    """`given` if it is a `cls` and no option names one of its fields; else `cls(**options)`."""
    mine = {k: v for k, v in options.items() if k in keys}
    if given is None:
        return cls(**mine)
    if not isinstance(given, cls):
        raise field_error(ConfigError, name, f"a {cls.__name__} or None", given)
    if mine:
        listed = ", ".join(f"{k}={v!r}" for k, v in mine.items())
        raise ConfigError(
            f"Expected each convert option once. Received: {name}={given!r} and {listed}. Set "
            f"{'it' if len(mine) == 1 else 'them'} in the {cls.__name__} (dataclasses.replace) or pass "
            f"keyword options only."
        )
    return given

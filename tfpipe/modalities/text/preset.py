"""The text preset: tokenized documents -> static `[B, L]` int32 batches, packed.

`build(data, batch_size=B, sequence_length=L)` on a dataset whose manifest says layout "text"
picks this preset. One record is one document (`tokens`: every token id, int64 list; `label`:
an int64 scalar for classification). The pipeline reads documents in chunks, packs each chunk
into rows of L (by tfpipe/packing/'s rules, in graph: packer.py) and batches the rows;
this preset says how (`TextPacking`) and shapes the batches for the model (`Decoder.finalize`).

Outputs (`output=`):
- "packed": `{"tokens", "segment_ids", "positions"}` int32 `[B, L]`. Segment ids are 1..n in a
  row and 0 on padding; positions restart at 0 in each segment. seqio's, Grain's and MaxText's
  layout. Padding is where `segment_ids == 0`: token id 0 is a token like any other.
- "causal_lm": `(packed, targets, loss_weights)`: the target of each token is the next token of
  the same segment; the weight is 0 on padding and on each segment's last token (no target
  across a document boundary). Each document ends with the tokenizer's EOS (`eos=`), as seqio
  appends it. Keras takes the triple as (x, y, sample_weight).
- "keras_causal_lm": `({"token_ids", "padding_mask"}, targets, loss_weights)`, what KerasHub's
  CausalLM preprocessors give. KerasHub backbones take no segment ids: attention crosses the
  documents of a packed row (see `attention_mask` for models that can take one).
- "keras_classifier": `({"token_ids", "padding_mask", "segment_ids"}, label)`, one document per
  row as `[CLS] tokens [SEP]`, what KerasHub's text classifier preprocessors give (their
  segment ids are sentence ids: 0 here).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import ClassVar, Literal

from tfpipe._tf import Feature, Nest, Tensor, tf
from tfpipe.errors import ConfigError, field_error
from tfpipe.format.manifest_text import SplitText, TokenizerInfo
from tfpipe.modalities.text.rows import TextRows
from tfpipe.modalities.text.stages import TextPacking
from tfpipe.packing.spec import MAX_SEQUENCE_LENGTH, MODES, Mode
from tfpipe.presets.base import Decoder, PresetContext, with_options
from tfpipe.validation import check_bool, check_choice, check_int, check_str

Output = Literal["packed", "causal_lm", "keras_causal_lm", "keras_classifier"]
OUTPUTS: tuple[str, ...] = ("packed", "causal_lm", "keras_causal_lm", "keras_classifier")
TOKENS = "tokens"


@dataclasses.dataclass(frozen=True, slots=True)
class Text:
    """The text preset with its options: `preset=tfpipe.presets.Text(sequence_length=512)`.

    `build(data, sequence_length=512, output="causal_lm")` on a text dataset is the same as
    `build(data, preset=Text(sequence_length=512, output="causal_lm"))`: the keywords override
    the named preset's options, as keras-hub's `from_preset(name, sequence_length=...)` does.

    Attributes:
      sequence_length: L, the tokens in a row. Required (by the time the preset is bound).
      packing: "first_fit" (several documents a row), "none" (one a row, padded) or "concat"
        (end to end, cut every L). None: "first_fit", or "none" for "keras_classifier".
      truncate: keep only the first L tokens of a longer document (said in `describe()`).
        False: a long document is cut into pieces of at most L, in order, each its own
        segment (for "keras_classifier" a document longer than L - 2 is then refused).
      output: see the module docstring. None: "keras_classifier" for records with a label,
        else "packed".
      eos: end each document with the tokenizer's EOS before packing (True), or with this
        token id (an int). None: True for the causal outputs, which refuse a tokenizer that
        declares no EOS (pass eos=False to pack documents with no separator).
      label: the label feature for "keras_classifier". None: the manifest's label.
      chunk: documents packed together (see stages.py). None: about 512 rows'
        worth at the split's mean length.
    """

    name: ClassVar[str] = "text"
    sequence_length: int | None = None
    packing: Mode | None = None
    truncate: bool = False
    output: Output | None = None
    eos: bool | int | None = None
    label: str | None = None
    chunk: int | None = None

    def __post_init__(self) -> None:
        check_int("sequence_length", self.sequence_length, 2, MAX_SEQUENCE_LENGTH, optional=True)
        if self.packing is not None:
            check_choice("packing", self.packing, MODES)
        if self.output is not None:
            check_choice("output", self.output, OUTPUTS)
        check_bool("truncate", self.truncate)
        if not (self.eos is None or isinstance(self.eos, bool)):
            check_int("eos", self.eos, 0, 2**31 - 1, what="True, False, None or a token id (an int >= 0)")
        check_str("label", self.label, optional=True)
        check_int("chunk", self.chunk, 1, 1 << 24, optional=True)

    def bind(self, ctx: PresetContext, options: Mapping[str, object]) -> Decoder:
        """This preset, with `options` over its own, bound to the text split `ctx` names."""
        tf_ = tf()
        opts = with_options(self, options)
        packing, output, notes = plan_packing(ctx, opts)
        spec: dict[str, Feature] = {TOKENS: tf_.io.RaggedFeature(tf_.int64, row_splits_dtype=tf_.int64)}
        if packing.label is not None:  # a classifier's
            spec[packing.label] = tf_.io.FixedLenFeature([], tf_.int64)
        return Decoder(
            spec=spec,
            required=tuple(spec),
            decode=lambda features, seed, source: features,
            finalize=output_form(output),
            batched=True,
            notes=(
                f"text: output {output!r}, packing {packing.mode!r}, sequence_length {packing.sequence_length}",
                *notes,
            ),
            packing=packing,
            batching=TextRows(packing),
        )


def plan_packing(ctx: PresetContext, opts: Text) -> tuple[TextPacking, str, list[str]]:
    """(how the pipeline packs, the output form, notes) for `opts` on the split `ctx` names;
    no TensorFlow, so `steps_per_epoch` counts the rows `build()` makes from the same packing.

    Raises:
      ConfigError: no sequence_length; options that do not fit each other or the dataset (a
        classifier without a label, [CLS] or [SEP]; eos=True without an EOS; documents longer
        than a classifier row).
    """
    if opts.sequence_length is None:
        raise ConfigError(
            "The text preset needs sequence_length=L, the tokens in a row (e.g. 512); "
            "documents are packed into rows of L. Received: sequence_length=None"
        )
    L = opts.sequence_length
    label = opts.label or (ctx.schema.label if ctx.schema is not None else None)
    output = opts.output or ("keras_classifier" if label else "packed")
    classify = output == "keras_classifier"
    mode = opts.packing or ("none" if classify else "first_fit")
    tokenizer = ctx.manifest.tokenizer if ctx.manifest is not None else None
    adds = dict(tokenizer.pipeline_adds) if tokenizer is not None else {}
    notes: list[str] = []
    if classify:
        _check_classify(ctx, opts, mode, label, adds, tokenizer)
        notes.append(_framing_note(tokenizer, adds))
    eos = _eos(opts, output, adds, tokenizer)
    if eos is not None:
        notes.append(_eos_note(tokenizer, eos, opts.eos))
    text = _split_text(ctx)
    if opts.truncate:
        notes.append(
            f"truncate=True: documents longer than {L} tokens keep their first {L} and lose the rest"
            + (f" ({_longer(text, L)} such documents in the split)" if text else "")
        )
    packing = TextPacking(
        sequence_length=L,
        mode=mode,
        truncate=opts.truncate or classify,
        eos=eos,
        classify=classify,
        cls=adds.get("cls"),
        sep=adds.get("sep"),
        label=label if classify else None,
        vocab_size=tokenizer.vocab_size if tokenizer is not None else None,
        mean_tokens=text.tokens / text.documents if text and text.documents else None,
        histogram=text.length_histogram if text else None,
        chunk=opts.chunk,
    )
    return packing, output, notes


def _split_text(ctx: PresetContext) -> SplitText | None:
    """The split's SplitText from the manifest (documents, tokens, histogram), or None."""
    manifest = ctx.manifest
    if manifest is None:
        return None
    split = manifest.splits.get(ctx.split) if ctx.split is not None else None
    return split.text if split is not None else None


def _longer(text: SplitText, limit: int) -> int:
    """Documents longer than `limit` tokens, from the length histogram."""
    h = text.length_histogram or {}
    return sum(c for lo, c in zip(h.get("lengths", []), h.get("counts", []), strict=True) if lo > limit)


def _eos(opts: Text, output: str, adds: Mapping[str, int], tokenizer: TokenizerInfo | None) -> int | None:
    """The id appended to each document, or None.

    Raises:
      ConfigError: an EOS asked for (eos=True, or a causal output by default) that the tokenizer
        does not declare; an id beyond the vocabulary; any EOS with output='keras_classifier'.
    """
    causal = output in ("causal_lm", "keras_causal_lm")
    if opts.eos is not None and opts.eos is not False and output == "keras_classifier":
        raise field_error(ConfigError, "eos", "None or False with output='keras_classifier'", opts.eos)
    if not isinstance(opts.eos, bool) and opts.eos is not None:
        vocab = tokenizer.vocab_size if tokenizer is not None else 2**31
        if opts.eos >= vocab:
            raise field_error(
                ConfigError, "eos", f"True, False, None or a token id in 0..{vocab - 1}", opts.eos
            )
        return int(opts.eos)
    want = opts.eos if opts.eos is not None else causal
    if want and "eos" not in adds:
        asked = "eos=True appends" if opts.eos else f"output={output!r} appends"
        raise ConfigError(
            f"{asked} the tokenizer's EOS to every document, so a model learns where documents end, but the "
            f"dataset's tokenizer declares none. Received: special tokens {_roles(tokenizer)}. Pass eos=ID "
            "(a token id of its vocabulary), convert with --special-tokens eos=TOKEN to name it, or pass "
            "eos=False to pack documents with no separator (their segment ids still keep them apart)."
        )
    return adds["eos"] if want else None


def _roles(tokenizer: TokenizerInfo | None) -> str:
    """The roles a dataset's tokenizer declares, for messages ("eos [EOS] (id 3), ...")."""
    if tokenizer is None or not tokenizer.special_ids:
        return "none"
    tokens = tokenizer.special_tokens
    return ", ".join(
        f"{role} {tokens[role]} (id {i})" if role in tokens else f"{role} id {i}"
        for role, i in tokenizer.special_ids.items()
    )


def _said(tokenizer: TokenizerInfo | None, role: str, i: int) -> str:
    """A role's token for notes: "[EOS] (id 3, a special token's name)", or "id 3"."""
    if tokenizer is None or role not in tokenizer.special_tokens or tokenizer.special_ids.get(role) != i:
        return f"id {i}"
    return f"{tokenizer.special_tokens[role]} (id {i}, {tokenizer.roles_from.get(role, 'declared')})"


def _eos_note(tokenizer: TokenizerInfo | None, eos: int, asked: bool | int | None) -> str:
    if not isinstance(asked, bool) and asked is not None:
        return f"each document ends with token id {eos} (eos={eos}) before packing"
    return f"each document ends with the tokenizer's EOS, {_said(tokenizer, 'eos', eos)}, before packing"


def _framing_note(tokenizer: TokenizerInfo | None, adds: Mapping[str, int]) -> str:
    cls, sep = adds["cls"], adds["sep"]
    ids = tokenizer.special_ids if tokenizer is not None else {}
    if ids.get("cls") == cls and ids.get("sep") == sep:
        return f"each document framed as CLS tokens SEP: {_said(tokenizer, 'cls', cls)}, {_said(tokenizer, 'sep', sep)}"
    return (
        f"each document framed as BOS tokens EOS, {_said(tokenizer, 'bos', cls)} and {_said(tokenizer, 'eos', sep)}: "
        "the tokenizer declares no CLS and SEP, and frames a sequence as RoBERTa does (<s> ... </s>)"
    )


def _check_classify(
    ctx: PresetContext,
    opts: Text,
    mode: str,
    label: str | None,
    adds: Mapping[str, int],
    tokenizer: TokenizerInfo | None,
) -> None:
    if mode != "none":
        raise ConfigError(
            "output='keras_classifier' gives one document a row with its label; it cannot pack "
            f"several. Received: packing={mode!r} (use packing='none' or leave it None)"
        )
    if not label:
        raise ConfigError(
            f"output='keras_classifier' needs a label feature: the records at {ctx.where} name none. "
            "Pass label=<feature>, or convert with --label."
        )
    if ctx.schema is not None and label not in ctx.schema.names:
        raise ConfigError(
            f"Label {label!r} is not in the records at {ctx.where}. Received: {ctx.schema.names}"
        )
    if "cls" not in adds or "sep" not in adds:
        raise ConfigError(
            "output='keras_classifier' frames each document as [CLS] tokens [SEP] (or <s> tokens </s>), "
            "but the dataset's tokenizer declares neither CLS and SEP nor BOS and EOS. Received: special "
            f"tokens {_roles(tokenizer)}. Convert with --special-tokens cls=TOKEN,sep=TOKEN to name them."
        )
    text = _split_text(ctx)
    room = int(opts.sequence_length or 0) - 2
    if not opts.truncate and text is not None and _longer(text, room):
        raise ConfigError(
            f"{_longer(text, room)} document(s) of {ctx.where} are longer than sequence_length - 2 = "
            f"{room} tokens (room for [CLS] and [SEP]); a classifier row holds one document. Pass "
            "truncate=True to keep their first tokens, or a larger sequence_length."
        )


def output_form(output: str) -> Callable[[Mapping[str, Tensor]], Nest] | None:
    """The final map from packed rows (`{"tokens", "segment_ids", "positions"}` [B, L], plus
    "label" when classifying) to what the model takes."""
    if output == "packed":
        return None
    return {
        "causal_lm": causal_lm,
        "keras_causal_lm": keras_causal_lm,
        "keras_classifier": keras_classifier,
    }[output]


def causal_lm(rows: Mapping[str, Tensor]) -> tuple[dict[str, Tensor], Tensor, Tensor]:
    """`(rows, targets, loss_weights)`: each token's target is the next token of its segment."""
    tf_ = tf()
    seg = rows["segment_ids"]
    pad = tf_.zeros_like(seg[:, :1])
    targets = tf_.concat([rows["tokens"][:, 1:], pad], 1)
    nxt = tf_.concat([seg[:, 1:], pad], 1)
    weights = tf_.cast(tf_.logical_and(tf_.equal(seg, nxt), tf_.not_equal(seg, 0)), tf_.float32)
    return dict(rows), targets * tf_.cast(weights, targets.dtype), weights


def keras_causal_lm(rows: Mapping[str, Tensor]) -> tuple[dict[str, Tensor], Tensor, Tensor]:
    """`({"token_ids", "padding_mask"}, targets, loss_weights)`, as KerasHub's CausalLM takes."""
    x, targets, weights = causal_lm(rows)
    return {"token_ids": x["tokens"], "padding_mask": tf().not_equal(x["segment_ids"], 0)}, targets, weights


def keras_classifier(rows: Mapping[str, Tensor]) -> tuple[dict[str, Tensor], Tensor]:
    """`({"token_ids", "padding_mask", "segment_ids"}, label)`, as KerasHub's classifiers take."""
    tf_ = tf()
    seg = rows["segment_ids"]
    x = {
        "token_ids": rows["tokens"],
        "padding_mask": tf_.not_equal(seg, 0),
        "segment_ids": tf_.zeros_like(seg),
    }
    return x, rows["label"]


def attention_mask(segment_ids: Tensor, causal: bool = False) -> Tensor:
    """The block-diagonal attention mask of packed rows: `[B, L, L]` bool, True where query i
    may attend to key j (same segment, not padding; with `causal`, also j <= i).

    KerasHub backbones take no document segment ids, so their attention crosses the documents
    of a packed row; a model with its own attention passes this mask instead. It is made of
    `keras.ops`, so it runs inside a model on any Keras backend (TensorFlow, JAX), on symbolic
    inputs too, and on a dynamic sequence length.

    Example:
      >>> mask = tfpipe.attention_mask(batch["segment_ids"], causal=True)
      >>> y = keras.layers.MultiHeadAttention(4, 32)(x, x, attention_mask=mask)
    """
    from keras import ops

    seg = ops.convert_to_tensor(segment_ids) if not _symbolic(segment_ids) else segment_ids
    same = ops.logical_and(
        ops.equal(ops.expand_dims(seg, 2), ops.expand_dims(seg, 1)), ops.expand_dims(ops.not_equal(seg, 0), 2)
    )
    if causal:
        # Positions 1..L along each row, from the row itself: no static length needed.
        position = ops.cumsum(ops.ones_like(seg, dtype="int32"), axis=1)
        same = ops.logical_and(same, ops.expand_dims(position, 2) >= ops.expand_dims(position, 1))
    return same


def _symbolic(x: object) -> bool:
    """A Keras functional model's input (a KerasTensor), which ops take as it is."""
    import keras

    return isinstance(x, keras.KerasTensor)


TEXT = Text()  # the registry's "text": its options come from build()'s keywords

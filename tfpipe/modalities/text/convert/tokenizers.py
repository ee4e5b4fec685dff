"""Tokenizers for text conversion: a SentencePiece model or a Hugging Face `tokenizer.json`,
behind one small interface. No TensorFlow.

- `read_file(path)` reads a tokenizer file and says which kind it is (`tokenizertrain.train`
  trains one).
- `load(file)` gives a `Tokenizer`: the plain encode (no special tokens added), decode, the
  tokenizer's documented normalisation (`canonical`: what a round trip may change), its
  vocabulary size and the roles of its special tokens (`specialtokens`).

`sentencepiece` and `tokenizers` are the `text` extra, imported only here and only on use.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from types import ModuleType
from typing import Literal

from tfpipe import storage
from tfpipe.errors import DataError, MissingExtraError
from tfpipe.format.manifest_text import TokenizerInfo
from tfpipe.modalities.text.convert import specialtokens
from tfpipe.modalities.text.convert.specialtokens import ROLES as ROLES
from tfpipe.modalities.text.convert.specialtokens import Roles

Kind = Literal["sentencepiece", "huggingface"]
FILE_NAMES: dict[str, str] = {"sentencepiece": "tokenizer.model", "huggingface": "tokenizer.json"}
"""The name a dataset stores its tokenizer under, beside the shards, by kind."""
INSTALL_HINT = 'pip install "tfpipe[text]"'
_META_SPACE = "\u2581"  # SentencePiece's visible space, '▁'


def require(module: str) -> ModuleType:
    """Imports `sentencepiece` or `tokenizers`, or says in one line to install the text extra.

    Raises:
      MissingExtraError: the module is not installed.
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingExtraError(
            f"Text conversion needs the {module} package, which is not installed "
            f"({type(e).__name__}: {e}). Install the extra: {INSTALL_HINT}"
        ) from e


@dataclasses.dataclass(frozen=True, slots=True)
class TokenizerFile:
    """A tokenizer's file: its kind and bytes. Stored as `FILE_NAMES[kind]` beside the shards."""

    kind: str
    data: bytes

    @property
    def name(self) -> str:
        return FILE_NAMES[self.kind]

    @property
    def fingerprint(self) -> str:
        return "sha256:" + hashlib.sha256(self.data).hexdigest()


def read_file(path: str) -> TokenizerFile:
    """Reads a SentencePiece `.model` or a Hugging Face `tokenizer.json`, local or gs://.

    The kind comes from the content: a JSON object with a "model" is a Hugging Face
    tokenizer, anything else is tried as a SentencePiece model.

    Raises:
      DataError: the file is missing, or neither kind of tokenizer loads from it.
    """
    try:
        data = storage.read_bytes(path)
    except (OSError, storage.StorageError) as e:
        raise DataError(f"{path}: cannot read the tokenizer file: {e}") from None
    if not data.strip():  # SentencePiece loads b"" as a model that fails its first call
        raise DataError(
            f"{path}: expected a SentencePiece model (.model) or a Hugging Face tokenizer.json. "
            f"Received: an empty file ({len(data)} bytes)"
        )
    kind = "huggingface" if data.lstrip()[:1] == b"{" else "sentencepiece"
    file = TokenizerFile(kind, data)
    try:
        tok = load(file)
    except MissingExtraError:
        raise
    except Exception as e:
        raise DataError(
            f"{path}: expected a SentencePiece model (.model) or a Hugging Face tokenizer.json. "
            f"Received: a file the {kind} loader refuses: {' '.join(str(e).split())[:300]}"
        ) from None
    _check_ids(path, tok)
    return file


def _check_ids(path: str, tok: Tokenizer) -> None:
    """Refuses a tokenizer whose ids are not 0..vocab_size-1: the manifest records its
    vocabulary size, and a model's embedding and the pipeline's checks trust it.

    Raises:
      DataError: naming the ids beyond the vocabulary and the first gap.
    """
    ids = sorted(tok.ids())
    if ids == list(range(len(ids))):
        return
    beyond = [i for i in ids if i >= len(ids)]
    gap = next(i for i, have in enumerate(ids) if i != have)
    raise DataError(
        f"{path}: expected token ids 0..{len(ids) - 1} (its vocabulary holds {len(ids):,} tokens). "
        f"Received: id(s) {beyond[:5]}{' ...' if len(beyond) > 5 else ''} beyond it, the first "
        f"missing id {gap}. A dataset records the vocabulary size, and a model sizes its "
        "embedding by it: number the tokenizer's tokens 0..N-1."
    )


class Tokenizer:
    """A loaded tokenizer: the plain encode and decode, and what they may change.

    Attributes:
      kind: "sentencepiece" or "huggingface".
      vocab_size: ids are 0..vocab_size-1.
      roles: the roles of its special tokens as it declares them (`specialtokens`).
      normalization: what `decode(encode(text))` may change, in words (for the manifest).
      specials: every id of a special or control token, or of a token holding a role (which
        plain text should not produce; <unk> aside, which the round trip counts).
    """

    kind: str
    vocab_size: int
    normalization: str
    _roles: Roles | None = None
    _specials: frozenset[int] | None = None

    @property
    def roles(self) -> Roles:
        # Worked out on first use: a conversion worker, which is handed the special ids
        # (`TextTask.specials`), never needs them, and a large vocabulary takes a moment.
        if self._roles is None:
            self._roles, self._specials = self._declared()
        return self._roles

    @property
    def specials(self) -> frozenset[int]:
        if self._specials is None:
            self._roles, self._specials = self._declared()
        return self._specials

    def _declared(self) -> tuple[Roles, frozenset[int]]:
        """The roles it declares, and its special ids (`specials`)."""
        raise NotImplementedError

    @property
    def special_ids(self) -> dict[str, int]:
        """Role -> id, for the roles it has (see `specialtokens.ROLES`)."""
        return dict(self.roles.ids)

    def token_id(self, token: str) -> int | None:
        """The id of a token of its vocabulary, or None."""
        raise NotImplementedError

    def special_tokens(self) -> list[str]:
        """Its special tokens' texts, for messages."""
        raise NotImplementedError

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Each text's token ids, with no special tokens added."""
        raise NotImplementedError

    def decode(self, ids: list[int]) -> str:
        """The text of `ids`, special tokens spelled out (never skipped)."""
        raise NotImplementedError

    def canonical(self, text: str) -> str:
        """`text` after the tokenizer's documented normalisation: a round trip is faithful when
        `canonical(decode(encode(text))) == canonical(text)`."""
        raise NotImplementedError

    def faithful(self, text: str, decoded: str) -> bool:
        """Whether `decoded` (the decode of `text`'s tokens) is `text` up to the documented
        normalisation. The cheap cases first: equal, or equal but for whitespace where the
        normalisation does not keep it; the normaliser runs only when they fail."""
        return (
            decoded == text
            or self._same_but_whitespace(text, decoded)
            or self.canonical(decoded) == self.canonical(text)
        )

    def _same_but_whitespace(self, text: str, decoded: str) -> bool:
        return False

    def ids(self) -> list[int]:
        """Every token id the tokenizer has (special ones included)."""
        return list(range(self.vocab_size))

    def named(self, names: dict[str, str]) -> Tokenizer:
        """This tokenizer with the roles the user names (`--special-tokens`) first.

        Raises:
          ConfigError: a named token it does not have.
        """
        if not names:
            return self
        roles = specialtokens.with_named(self.roles, names, self.token_id, self.special_tokens())
        self._roles, self._specials = (
            roles,
            self.specials | (frozenset(roles.ids.values()) - {roles.ids.get("unk")}),
        )
        return self

    def info(self, file: TokenizerFile) -> TokenizerInfo:
        return TokenizerInfo(
            kind=self.kind,
            file=file.name,
            fingerprint=file.fingerprint,
            vocab_size=self.vocab_size,
            special_ids=dict(self.roles.ids),
            normalization=self.normalization,
            special_tokens=dict(self.roles.tokens),
            roles_from=dict(self.roles.sources),
            pipeline_adds=specialtokens.framing(self.roles.ids),
        )


class _SentencePiece(Tokenizer):
    def __init__(self, data: bytes) -> None:
        spm = require("sentencepiece")
        self._sp = spm.SentencePieceProcessor(model_proto=data)
        sp = self._sp
        self._data = data
        self.kind = "sentencepiece"
        self.vocab_size = sp.get_piece_size()
        self.normalization = (
            "SentencePiece's own normalizer (SentencePieceProcessor.normalize; NFKC-based unless "
            "the model says otherwise); whitespace runs as one space, trimmed"
        )

    def _declared(self) -> tuple[Roles, frozenset[int]]:
        sp = self._sp
        declared = {"unk": sp.unk_id(), "bos": sp.bos_id(), "eos": sp.eos_id(), "pad": sp.pad_id()}
        control = [i for i in range(self.vocab_size) if sp.is_control(i)]
        user = [i for i, kind in enumerate(_piece_types(self._data)) if kind == _USER_DEFINED]
        roles = specialtokens.spm_roles(
            declared, ((i, sp.id_to_piece(i)) for i in sorted({*control, *user})), sp.id_to_piece
        )
        # A user-defined piece is read in text as itself: one that holds a role (a literal
        # "<sep>") is noted where a document spells it. <unk> stands for unknown text: counted
        # by the round trip instead.
        return roles, (frozenset(control) | frozenset(roles.ids.values())) - {sp.unk_id()}

    def token_id(self, token: str) -> int | None:
        i = self._sp.piece_to_id(token)
        return None if self._sp.is_unknown(i) and token != self._sp.id_to_piece(i) else int(i)

    def special_tokens(self) -> list[str]:
        sp = self._sp
        return [sp.id_to_piece(i) for i in range(self.vocab_size) if sp.is_control(i) or sp.is_unknown(i)]

    def encode(self, texts: list[str]) -> list[list[int]]:
        return self._sp.encode(texts, out_type=int, num_threads=1)

    def decode(self, ids: list[int]) -> str:
        return self._sp.decode(ids)

    def canonical(self, text: str) -> str:
        return " ".join(self._sp.normalize(text).replace(_META_SPACE, " ").split())

    def _same_but_whitespace(self, text: str, decoded: str) -> bool:
        return decoded == " ".join(text.split())  # runs collapsed, trimmed: what it documents


class _HuggingFace(Tokenizer):
    def __init__(self, data: bytes) -> None:
        tokenizers = require("tokenizers")
        self._tok = tokenizers.Tokenizer.from_str(data.decode("utf-8"))
        spec = json.loads(data)
        tok = self._tok
        self.kind = "huggingface"
        self.vocab_size = tok.get_vocab_size(with_added_tokens=True)
        self._spec = spec
        self._normalizer = tok.normalizer
        # Byte-level tokenizers keep every byte, whitespace included; the others split words
        # on whitespace, which their decoders do not restore exactly.
        self._byte_level = _type(spec.get("decoder")) == "ByteLevel"
        # The byte-level pre-tokenizer's add_prefix_space (its default) puts a space before a
        # text that does not start with one, and its decoder keeps it: a known normalisation.
        self._prefix_space = _adds_prefix_space(spec.get("pre_tokenizer"))
        what = _type(spec.get("normalizer"))
        self.normalization = (
            (f"the tokenizer's normalizer ({what})" if what else "none")
            + ("" if self._byte_level else "; whitespace not kept (words are split on it)")
            + (
                "; a space put before a text that starts with none (add_prefix_space)"
                if self._prefix_space
                else ""
            )
        )

    def _declared(self) -> tuple[Roles, frozenset[int]]:
        roles = specialtokens.hf_roles(self._spec, self._tok.token_to_id)
        # <unk> stands for unknown text: the round trip counts it, not as a spelled special.
        added = frozenset(t["id"] for t in self._spec.get("added_tokens", []) if t.get("special"))
        return roles, (added | frozenset(roles.ids.values())) - {roles.ids.get("unk")}

    def ids(self) -> list[int]:
        return list(self._tok.get_vocab(with_added_tokens=True).values())

    def token_id(self, token: str) -> int | None:
        return self._tok.token_to_id(token)

    def special_tokens(self) -> list[str]:
        return [t.content for t in self._tok.get_added_tokens_decoder().values() if t.special]

    def encode(self, texts: list[str]) -> list[list[int]]:
        # One text at a time: encode_batch would spread over every core, and each conversion
        # worker is meant to use one.
        return [self._tok.encode(t, add_special_tokens=False).ids for t in texts]

    def decode(self, ids: list[int]) -> str:
        return self._tok.decode(ids, skip_special_tokens=False)

    def canonical(self, text: str) -> str:
        if self._normalizer is not None:
            text = self._normalizer.normalize_str(text)
        if self._prefix_space:
            text = text.removeprefix(" ")
        return text if self._byte_level else "".join(text.replace(_META_SPACE, " ").split())

    def _same_but_whitespace(self, text: str, decoded: str) -> bool:
        if self._prefix_space and decoded == " " + text:
            return True
        return not self._byte_level and "".join(decoded.split()) == "".join(text.split())


def _type(component: object) -> str:
    """The type name of a tokenizer.json component ("ByteLevel", "Sequence[NFC, Lowercase]")."""
    if not isinstance(component, dict):
        return ""
    kind = str(component.get("type", ""))
    parts = [_type(c) for c in component.get("normalizers", component.get("decoders", []))]
    return f"{kind}[{', '.join(parts)}]" if parts else kind


def _adds_prefix_space(pre: object) -> bool:
    """Whether a tokenizer.json's pre-tokenizer is byte-level with add_prefix_space."""
    if not isinstance(pre, dict):
        return False
    if pre.get("type") == "Sequence":
        return any(_adds_prefix_space(p) for p in pre.get("pretokenizers") or [])
    return pre.get("type") == "ByteLevel" and bool(pre.get("add_prefix_space"))


_USER_DEFINED = 4  # sentencepiece_model.proto's SentencePiece.Type


def _piece_types(data: bytes) -> list[int]:
    """Each piece's type in a SentencePiece model (1 normal, 2 unknown, 3 control, 4 user
    defined, 5 unused, 6 byte), read from the ModelProto's wire format: the processor tells
    control and unknown pieces, not user-defined ones, and sentencepiece's generated proto
    module needs another protobuf runtime than TensorFlow's. The pieces are field 1; in each,
    the type is field 3 (absent: normal)."""
    types, at, n = [], 0, len(data)
    while at < n:
        key, at = _varint(data, at)
        wire = key & 7
        if wire == 2:
            size, at = _varint(data, at)
            if key >> 3 == 1:
                types.append(_piece_type(data, at, at + size))
            at += size
        elif wire == 0:
            _, at = _varint(data, at)
        else:
            at += {1: 8, 5: 4}[wire]
    return types


def _piece_type(data: bytes, at: int, end: int) -> int:
    """Field 3 (varint) of the SentencePiece message data[at:end], or 1."""
    kind = 1
    while at < end:
        key, at = _varint(data, at)
        wire = key & 7
        if wire == 0:
            value, at = _varint(data, at)
            kind = value if key >> 3 == 3 else kind
        elif wire == 2:
            size, at = _varint(data, at)
            at += size
        else:
            at += {1: 8, 5: 4}[wire]
    return kind


def _varint(data: bytes, at: int) -> tuple[int, int]:
    byte = data[at]
    if byte < 0x80:  # most keys and lengths: one byte
        return byte, at + 1
    value, shift = 0, 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def load(file: TokenizerFile) -> Tokenizer:
    """The tokenizer in `file`.

    Raises:
      MissingExtraError: its library is not installed.
      Exception: whatever its library raises for bytes it cannot load.
    """
    return _SentencePiece(file.data) if file.kind == "sentencepiece" else _HuggingFace(file.data)


def read_stored(path: str, fingerprint: str) -> TokenizerFile:
    """A dataset's stored tokenizer file, as it is now, checked against its fingerprint.

    Raises:
      DataError: the file's bytes are not those of `fingerprint` (replaced or changed after it
        was stored).
    """
    data = storage.read_bytes(path)
    kind = "huggingface" if data.lstrip()[:1] == b"{" else "sentencepiece"
    file = TokenizerFile(kind, data)
    if file.fingerprint != fingerprint:
        raise DataError(
            f"{path}: expected the tokenizer the dataset was converted with ({fingerprint}, in its "
            f"manifest). Received: a file of fingerprint {file.fingerprint}: it was replaced or "
            "changed after it was stored. Put back the tokenizer the dataset was converted with, "
            "or convert the corpus again."
        )
    return file


@functools.lru_cache(maxsize=4)
def load_stored(path: str, fingerprint: str) -> Tokenizer:
    """The tokenizer stored at `path` (a dataset's), read and loaded once per process: a
    conversion worker's way to it (it reads the file once, not once a task).

    Raises:
      DataError: as `read_stored`, when it is first read.
    """
    return load(read_stored(path, fingerprint))


def load_checked(path: str, fingerprint: str) -> Tokenizer:
    """The tokenizer stored at `path`, its file checked as it is now (a reader's way to it:
    one in a long-lived process must not keep using a tokenizer whose file was replaced).

    Raises:
      DataError: as `read_stored`.
    """
    read_stored(path, fingerprint)
    return load_stored(path, fingerprint)  # the same bytes as the cached one: same fingerprint

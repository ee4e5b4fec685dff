"""The roles of a tokenizer's special tokens (bos, eos, pad, cls, sep, unk, mask): the ones the
tokenizer declares, and the ones the user names (`--special-tokens eos=[EOS],bos=[BOS]`).

What a tokenizer declares, most binding first:
- a Hugging Face `tokenizer.json`: its post-processor (BERT's and RoBERTa's frame a sequence
  as CLS ... SEP; a template frames it with the tokens it names: one before and one after are
  CLS and SEP, one before alone is BOS (Llama), one after alone EOS), its model's `unk_token`,
  then its special added tokens by their names (`[BOS]`, `<s>`, `<|endoftext|>`...);
- a SentencePiece model: its `unk_id`, `bos_id`, `eos_id` and `pad_id`, then its control and
  user-defined pieces by their names (`<cls>`, `<sep>`, `<mask>`). A normal piece never
  holds a role, whatever its spelling.

A name is read without its brackets and case (`[EOS]`, `<eos>`, `<|eos|>` are one name), so a
role's spellings are listed once (`NAMES`). The user's names come before all of these, and are
recorded in the manifest with where every other role came from (`Roles.sources`). No TensorFlow,
no tokenizer library: the loaders in `tokenizers` hand plain values in.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from tfpipe.errors import ConfigError

ROLES = ("pad", "unk", "bos", "eos", "cls", "sep", "mask")
NAMES: dict[str, str] = {
    "pad": "pad",
    "unk": "unk",
    "bos": "bos",
    "s": "bos",  # <s>: RoBERTa, Llama, T5's SentencePiece
    "beginoftext": "bos",  # <|begin_of_text|>: Llama 3
    "startoftext": "bos",
    "eos": "eos",
    "/s": "eos",  # </s>
    "endoftext": "eos",  # <|endoftext|>: GPT-2 (also its BOS), <|end_of_text|>: Llama 3
    "cls": "cls",
    "sep": "sep",
    "mask": "mask",
}
"""Role by a special token's name, read without brackets, underscores and case (`name_of`)."""

NAMED = "named at convert (--special-tokens)"
POST_PROCESSOR = "the tokenizer's post-processor"
MODEL = "the tokenizer's model"
BY_NAME = "a special token's name"


def name_of(token: str) -> str:
    """A token's name as `NAMES` reads it: `[EOS]`, `<eos>`, `<|eos|>`, `<|end_of_text|>` ->
    `eos`, `endoftext`."""
    inner = token.strip()
    inner = re.sub(r"^(\[|<\|?)|(\]|\|?>)$", "", inner) if re.match(r"^(\[.*\]|<.*>)$", inner) else ""
    return inner.replace("_", "").replace("-", "").lower()


def role_by_name(token: str) -> str | None:
    """The role a special token's name says it holds, or None."""
    return NAMES.get(name_of(token))


@dataclasses.dataclass(frozen=True, slots=True)
class Roles:
    """Role -> token id, the token's text, and where the role came from (for the manifest).

    Attributes:
      ids: role -> id, for the roles the tokenizer has (see ROLES).
      tokens: role -> the token's text.
      sources: role -> where it was declared (NAMED, POST_PROCESSOR, MODEL, BY_NAME).
    """

    ids: dict[str, int] = dataclasses.field(default_factory=dict)
    tokens: dict[str, str] = dataclasses.field(default_factory=dict)
    sources: dict[str, str] = dataclasses.field(default_factory=dict)

    def add(self, role: str, token_id: int, token: str, source: str) -> None:
        """Sets a role not set yet (the first declaration binds)."""
        if role in ROLES and role not in self.ids and token_id >= 0:
            self.ids[role], self.tokens[role], self.sources[role] = int(token_id), token, source

    def ordered(self) -> Roles:
        """The same roles, in ROLES order (a manifest reads alike whatever declared them first)."""
        keep = [r for r in ROLES if r in self.ids]
        return Roles(
            {r: self.ids[r] for r in keep},
            {r: self.tokens[r] for r in keep},
            {r: self.sources[r] for r in keep},
        )


def hf_roles(spec: Mapping[str, Any], token_to_id: Callable[[str], int | None]) -> Roles:
    """The roles a `tokenizer.json` (`spec`, its parsed JSON) declares."""
    roles = Roles()
    for role, token in _post_processor_roles(spec.get("post_processor")):
        i = token_to_id(token)
        if i is not None:
            roles.add(role, i, token, POST_PROCESSOR)
    unk = (spec.get("model") or {}).get("unk_token")
    if isinstance(unk, str) and token_to_id(unk) is not None:
        roles.add("unk", token_to_id(unk), unk, MODEL)  # type: ignore[arg-type]
    for added in sorted(spec.get("added_tokens") or [], key=lambda t: t.get("id", 0)):
        named = role_by_name(str(added.get("content", "")))
        if added.get("special") and named:
            roles.add(named, int(added["id"]), str(added["content"]), BY_NAME)
    return roles.ordered()


def _post_processor_roles(post: object) -> list[tuple[str, str]]:
    """(role, token) of what a post-processor frames a sequence with."""
    if not isinstance(post, dict):
        return []
    kind = post.get("type")
    if kind == "Sequence":
        return [r for p in post.get("processors") or [] for r in _post_processor_roles(p)]
    if kind in ("BertProcessing", "RobertaProcessing"):
        return [("cls", str(post["cls"][0])), ("sep", str(post["sep"][0]))]
    if kind != "TemplateProcessing":
        return []
    single = post.get("single") or []
    at = next((k for k, item in enumerate(single) if "Sequence" in item), None)
    if at is None:
        return []
    before = [item["SpecialToken"]["id"] for item in single[:at] if "SpecialToken" in item]
    after = [item["SpecialToken"]["id"] for item in single[at + 1 :] if "SpecialToken" in item]
    if len(before) == 1 and len(after) == 1:
        return [("cls", before[0]), ("sep", after[0])]
    if len(before) == 1 and not after:
        return [("bos", before[0])]
    if len(after) == 1 and not before:
        return [("eos", after[0])]
    return []


def spm_roles(
    declared: Mapping[str, int], pieces: Iterable[tuple[int, str]], id_to_piece: Callable[[int], str]
) -> Roles:
    """The roles a SentencePiece model declares.

    Args:
      declared: its `unk_id()`, `bos_id()`, `eos_id()`, `pad_id()` by role (-1: none).
      pieces: (id, piece) of its control and user-defined pieces.
    """
    roles = Roles()
    for role, i in declared.items():
        if i >= 0:
            roles.add(role, i, id_to_piece(i), MODEL)
    for i, piece in pieces:
        named = role_by_name(piece)
        if named:
            roles.add(named, i, piece, BY_NAME)
    return roles.ordered()


def parse(text: str | Sequence[str]) -> dict[str, str]:
    """`--special-tokens eos=[EOS],bos=[BOS]` as a mapping (a token may hold `=`, not `,`); the
    flag given more than once (a list of its values) is merged.

    Raises:
      ConfigError: an item that is not ROLE=TOKEN, or a role named twice, in one flag or two.
    """
    texts = [text] if isinstance(text, str) else list(text)
    out: dict[str, str] = {}
    where: dict[str, str] = {}
    for given in texts:
        for item in (i.strip() for i in given.split(",")):
            role, eq, token = item.partition("=")
            if not eq or not role.strip() or not token.strip():
                raise ConfigError(
                    f"special_tokens (--special-tokens) expects ROLE=TOKEN pairs, such as eos=[EOS],bos=[BOS]. "
                    f"Received: {item!r} in {given!r}"
                )
            role = role.strip()
            if role in out:
                both = f"in {given!r}" if where[role] == given else f"in {where[role]!r} and in {given!r}"
                raise ConfigError(
                    f"special_tokens (--special-tokens) names role {role!r} twice, {both}: "
                    f"{out[role]!r} and {token.strip()!r}. Name each role once."
                )
            out[role], where[role] = token.strip(), given
    return out


def check_named(named: object) -> dict[str, str]:
    """The user's names as a plain mapping, each role one of ROLES.

    Raises:
      ConfigError: not a mapping of roles to token strings.
    """
    if not isinstance(named, Mapping) or not all(
        isinstance(r, str) and isinstance(t, str) and t for r, t in named.items()
    ):
        raise ConfigError(
            "special_tokens (--special-tokens) expects a mapping of roles to tokens, such as "
            f"{{'eos': '[EOS]', 'bos': '[BOS]'}}. Received: {named!r}"
        )
    unknown = sorted(set(named) - set(ROLES))
    if unknown:
        raise ConfigError(
            f"special_tokens (--special-tokens) names roles among {list(ROLES)}. Received: {unknown}"
        )
    return dict(named)


def with_named(
    roles: Roles, named: Mapping[str, str], token_to_id: Callable[[str], int | None], specials: Iterable[str]
) -> Roles:
    """`roles` with the user's names first.

    Raises:
      ConfigError: a named token the tokenizer does not have, naming its special tokens.
    """
    if not named:
        return roles
    out = Roles()
    for role, token in named.items():
        i = token_to_id(token)
        if i is None:
            raise ConfigError(
                f"special_tokens (--special-tokens): expected tokens the tokenizer has. Received: {role}={token!r}, "
                f"which it does not; its special tokens: {sorted(specials)[:20]}"
            )
        out.add(role, i, token, NAMED)
    for role in roles.ids:
        out.add(role, roles.ids[role], roles.tokens[role], roles.sources[role])
    return out.ordered()


def framing(ids: Mapping[str, int]) -> dict[str, int]:
    """The ids `build()` adds: "eos" after each document for the causal outputs; "cls" and
    "sep" around each document for `keras_classifier` (the BOS and EOS where the tokenizer has
    no CLS and SEP, as RoBERTa frames a sequence <s> ... </s>)."""
    out = {"eos": ids["eos"]} if "eos" in ids else {}
    if "cls" in ids and "sep" in ids:
        out |= {"cls": ids["cls"], "sep": ids["sep"]}
    elif "bos" in ids and "eos" in ids:
        out |= {"cls": ids["bos"], "sep": ids["eos"]}
    return out

"""Shard names: `{stem}-{index}-of-{count}{suffix}`, formatted, parsed and checked in one place.

tfpipe names its shards `{split}-{index:05d}-of-{count:05d}` (plus `.gz`); TFDS and
imagenet_to_gcs follow the same convention. A set of such names must be whole: a glob or list
that holds part of one, or a manifest listing one with gaps, would read without error while
records are missing, so both are refused by `check_shard_sets`, in the same words.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from tfpipe.errors import TfpipeError

SHARD_DIGITS = 5
_SHARD_NAME_RE = re.compile(r"(?P<stem>.+)-(?P<index>\d+)-of-(?P<count>\d+)(?P<suffix>(?:\.[A-Za-z0-9]+)*)")
_SHARD_SET_ADVICE = (
    "Refused: such a set reads without error, with records missing or repeated (an interrupted "
    "write leaves one); pass every shard of it, each once."
)


@dataclasses.dataclass(frozen=True, slots=True)
class ShardName:
    """A file name of a sharded set, `{stem}-{index}-of-{count}{suffix}`: tfpipe's shards
    (`train-00003-of-00008`, `.gz` under gzip), TFDS's (`mnist-train.tfrecord-00000-of-00001`)
    and imagenet_to_gcs's (`train-00000-of-01024`). The one place shard names are formatted,
    parsed (`parse`) and checked (`check_shard_sets`), as TFDS's ShardedFileTemplate.

    Attributes:
      stem: the name before the index: the split, for tfpipe's shards.
      index: the shard's index, from 0.
      count: the shards in its set.
      suffix: extensions after the count (".gz").
      digits: digits of the count as written (SHARD_DIGITS for tfpipe's).
    """

    stem: str
    index: int
    count: int
    suffix: str = ""
    digits: int = SHARD_DIGITS

    @classmethod
    def of(cls, split: str, index: int, count: int, compression: str = "none") -> ShardName:
        """tfpipe's name of shard `index` of `count` of a split."""
        return cls(split, index, count, ".gz" if compression == "gzip" else "")

    @classmethod
    def parse(cls, path: str) -> ShardName | None:
        """The shard name of a path's last part, or None when it does not follow the convention."""
        m = _SHARD_NAME_RE.fullmatch(str(path).rstrip("/").rsplit("/", 1)[-1])
        if m is None:
            return None
        return cls(m["stem"], int(m["index"]), int(m["count"]), m["suffix"], len(m["count"]))

    def __str__(self) -> str:
        d = self.digits
        return f"{self.stem}-{self.index:0{d}d}-of-{self.count:0{d}d}{self.suffix}"

    @property
    def pattern(self) -> str:
        """The names of its set, as a message says them: `train-NNNNN-of-00008`."""
        return f"{self.stem}-{'N' * self.digits}-of-{self.count:0{self.digits}d}{self.suffix}"


def shard_name(split: str, index: int, count: int, compression: str = "none") -> str:
    """`{split}-{index:05d}-of-{count:05d}`, plus `.gz` under gzip (see `ShardName`)."""
    return str(ShardName.of(split, index, count, compression))


def check_shard_sets(
    paths: Sequence[str], where: str, error: type[TfpipeError], *, listed: bool = False
) -> None:
    """Refuses sharded sets that are not whole. The paths named `{stem}-NNNNN-of-{count}` in one
    folder are a set: it must hold every index 0..count-1, each once. With `listed` (a
    manifest's list), all the paths are one set, in index order. Other names are not checked.

    Raises:
      error: naming the set, its folder, and the indices missing, out of range, repeated or
        out of order; always in the same words.
    """
    sets: dict[tuple[str, ShardName], list[int]] = {}
    for path in paths:
        name = ShardName.parse(path)
        if name is not None:
            folder = str(path).rstrip("/").rsplit("/", 1)[0] if "/" in str(path) else "."
            sets.setdefault((folder, dataclasses.replace(name, index=0)), []).append(name.index)
    for (folder, key), indices in sorted(sets.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        problems = _set_problems(indices, key.count, listed)
        if listed and len(sets) > 1:
            problems.append(f"listed beside shards of another set ({len(sets)} sets in one list)")
        if problems:
            k = len({i for i in indices if i < key.count})
            place = f" in {folder}" if folder != "." else ""
            raise error(
                f"{where} holds {k} of the {key.count} shards named {key.pattern}{place}: "
                + "; ".join(problems)
                + ". "
                + _SHARD_SET_ADVICE
            )


def _set_problems(indices: list[int], count: int, listed: bool) -> list[str]:
    """What keeps `indices` from being the whole set 0..count-1 (in order, when `listed`)."""
    seen: set[int] = set()
    twice = sorted({i for i in indices if i in seen or seen.add(i)})  # type: ignore[func-returns-value]
    problems = []
    if missing := sorted(set(range(count)) - seen):
        problems.append(f"missing indices {few(missing)}")
    if beyond := sorted(i for i in seen if i >= count):
        problems.append(f"indices {few(beyond)} out of range (the names say {count} shards: 0..{count - 1})")
    if twice:
        problems.append(f"indices {few(twice)} more than once")
    if listed and indices != sorted(indices):
        problems.append(f"out of order (indices {few(indices, 10)})")
    return problems


def few(items: list[int], n: int = 20) -> str:
    """`items` as a list, the first `n` of them, then "..." if there are more."""
    return str(items[:n])[:-1] + (", ...]" if len(items) > n else "]")

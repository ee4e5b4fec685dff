"""How tfpipe's output says a count: the noun agrees with it ("1 shard", "2 shards")."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and the noun that agrees with it, with thousands separators.

    Example:
      counted(1, "shard") == "1 shard"; counted(1500, "row") == "1,500 rows";
      counted(2, "class", "classes") == "2 classes"
    """
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"

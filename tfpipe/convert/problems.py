"""What a first pass found wrong, collected to be raised all at once at its end: every kind's
first pass (a table's columns, a text corpus's documents) reads its whole input before anything
is written, and reports every problem it found, not only the first."""

from __future__ import annotations

from tfpipe.errors import DataError

PROBLEMS_SHOWN = 20
"""Problems the first pass lists in its error; the count of the rest is given."""


class Problems:
    """What the first pass found wrong, kept to raise them all at once at its end."""

    def __init__(self, limit: int = PROBLEMS_SHOWN) -> None:
        self.limit = limit
        self.found: list[str] = []
        self.count = 0

    def add(self, message: str) -> None:
        self.count += 1
        if len(self.found) < self.limit:
            self.found.append(message)

    def __bool__(self) -> bool:
        return self.count > 0

    def error(self, src: str) -> DataError | None:
        """One DataError listing every problem (the first `limit`), or None if there were none."""
        if not self.count:
            return None
        if self.count == 1:
            return DataError(self.found[0])
        listed = "\n".join(f"  {i}. {m}" for i, m in enumerate(self.found, 1))
        more = f"\n  ... and {self.count - len(self.found)} more" if self.count > len(self.found) else ""
        return DataError(
            f"{src}: the first pass found {self.count} problems (it reads every row before "
            f"anything is written, and nothing was):\n{listed}{more}"
        )

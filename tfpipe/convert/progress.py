"""What a running conversion reports: a `Tick` to the `progress` callback, from any engine."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable


@dataclasses.dataclass(frozen=True, slots=True)
class Tick:
    """Progress of a running conversion, passed to the `progress` callback."""

    items_done: int
    items_total: int
    bytes_in: int
    bytes_out: int
    shards_done: int
    shards_total: int
    skipped: int
    unit: str  # "images" or "rows"
    plan: str = ""  # what convert decided, e.g. the format auto-detection chose and why


ProgressCallback = Callable[[Tick], None]
"""What `convert(progress=...)` calls with a Tick as work completes (the CLI draws a bar)."""

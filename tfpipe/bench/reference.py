"""The reference table: published training throughputs per accelerator, each with its source.

The rows live in `reference.json` beside this module so they can be read and reviewed as data.
Every row is approximate; the report says so wherever it uses one.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from importlib import resources

from tfpipe.errors import ConfigError


@dataclasses.dataclass(frozen=True, slots=True)
class ReferenceRow:
    """One published throughput.

    Attributes:
      name: the key `--accelerator` takes, e.g. "resnet50-a100".
      model: the model trained.
      accelerator: the hardware the number is for (one GPU, or one TPU host of 4 chips).
      preset: the tfpipe preset whose data the model trains on.
      examples_per_sec: training throughput, examples per second; for text, sequences of
        `sequence_length` per second (the file gives text rows in tokens, see `tokens_per_sec`).
      precision: numeric precision and batch size used.
      framework: software the number was measured with.
      source: who published it, and where in the publication.
      url: where to read it.
      derivation: "as published", or how the number was derived from the publication.
      sequence_length: text rows: the tokens in one of the row's sequences; else None.
      packing: text rows: how the row's training filled its sequences ("none": one padded
        document a row, "concat": documents end to end, "packed": several a row); else None.
    """

    name: str
    model: str
    accelerator: str
    preset: str
    examples_per_sec: float
    precision: str
    framework: str
    source: str
    url: str
    derivation: str
    sequence_length: int | None = None
    packing: str | None = None

    @property
    def label(self) -> str:
        return f"{self.model} on {self.accelerator} (published, approximate)"

    @property
    def shape(self) -> str:
        """Text rows: the training shape in words, e.g. "L=512, one padded document a row"."""
        if self.sequence_length is None:
            return ""
        words = {
            "none": "one padded document a row",
            "concat": "documents end to end",
            "packed": "packed rows",
        }
        return (
            f"L={self.sequence_length:,}, {words.get(self.packing or '', self.packing or 'packing unknown')}"
        )

    @property
    def tokens_per_sec(self) -> float | None:
        """Text rows: slot tokens per second (every position of a sequence, padding included)."""
        return None if self.sequence_length is None else self.examples_per_sec * self.sequence_length


def _row(obj: dict[str, object]) -> ReferenceRow:
    """A row of reference.json. Text rows give `tokens_per_sec` (what their sources publish or
    derive) and `sequence_length`; their sequences per second follow from the two."""
    fields = dict(obj)
    if "tokens_per_sec" in fields:
        tokens = float(fields.pop("tokens_per_sec"))  # type: ignore[arg-type]
        fields["examples_per_sec"] = tokens / int(fields["sequence_length"])  # type: ignore[call-overload]
    return ReferenceRow(**fields)  # type: ignore[arg-type]


@functools.cache
def _table() -> tuple[dict[str, str], tuple[ReferenceRow, ...]]:
    text = resources.files("tfpipe.bench").joinpath("reference.json").read_text(encoding="utf-8")
    obj = json.loads(text)
    rows = tuple(_row(row) for row in obj["rows"])
    return dict(obj["defaults"]), rows


def rows() -> tuple[ReferenceRow, ...]:
    """Every row of the table."""
    return _table()[1]


def names() -> list[str]:
    return [r.name for r in rows()]


def lookup(name: str) -> ReferenceRow:
    """The row called `name`.

    Raises:
      ConfigError: there is no such row; the message lists the rows there are.
    """
    for row in rows():
        if row.name == name:
            return row
    raise ConfigError(f"accelerator must be one of {names()}. Received: accelerator={name!r}")


def defaults() -> dict[str, str]:
    """Preset -> the name of the row it uses when no consumer is given."""
    return dict(_table()[0])


def default_for(preset: str) -> ReferenceRow:
    """The row a preset uses when no consumer is given."""
    defaults = _table()[0]
    if preset not in defaults:
        raise ConfigError(f"No reference row for preset {preset!r}; presets with one: {sorted(defaults)}")
    return lookup(defaults[preset])

"""`Mixture`: a weighted mixture of datasets as one value, accepted wherever a data path is
(`build`, `plan`, bench's data), as seqio's `Mixture` of tasks is a provider like a task.

`tfpipe.Mixture({"web": P, "code": Q}, weights={"web": 0.7, "code": 0.3})` plans as
`build({"web": P, "code": Q}, weights=...)` does (mixture/plan.py): a mapping of names to
datasets is the short form of a Mixture, and `weights=`/`mix_by=` of its fields.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping, Sequence

from tfpipe.errors import ConfigError
from tfpipe.pipeline.mixture.spec import MixBy, check_weights
from tfpipe.validation import check_choice

# What a source is: a dataset path (or glob), or a list of its TFRecord files.
SourceData = str | Sequence[str]
MIX_BY: tuple[MixBy, ...] = ("tokens", "documents", "records")


@dataclasses.dataclass(frozen=True, slots=True)
class Mixture:
    """Datasets mixed by weight into one training stream (resumable, sharded per host).

    Example:
      >>> mix = tfpipe.Mixture({"web": "gs://b/web", "code": "gs://b/code"}, weights={"web": 3, "code": 1})
      >>> ds = tfpipe.build(mix, batch_size=64, sequence_length=2048, seed=7)

    Attributes:
      sources: names (non-empty strings, at least two) to datasets, each a path as `build()`
        takes one. The order of the mapping is the order of the sources.
      weights: each source's weight by name (positive numbers, normalised). None: each
        source's size. Text: shares of the tokens (`by`).
      by: what text's weights share, "tokens" (default) or "documents"; else "records" (the
        default for images and tables). Checked against the data when planned.
    """

    sources: Mapping[str, SourceData]
    weights: Mapping[str, float] | None = None
    by: MixBy | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.sources, Mapping):
            raise ConfigError(
                "Mixture sources must be a mapping of names to datasets, e.g. {'web': PATH, 'code': "
                f"PATH}}. Received: {type(self.sources).__name__} {self.sources!r}"
            )
        names = list(self.sources)
        if len(names) < 2 or not all(isinstance(n, str) and n for n in names):
            raise ConfigError(
                "A mixture is a mapping of at least two names (non-empty strings) to datasets, e.g. "
                f"{{'web': PATH, 'code': PATH}}. Received: {names!r}"
            )
        weights = check_weights(names, self.weights)
        if self.by is not None:
            check_choice("by", self.by, MIX_BY)
        object.__setattr__(self, "sources", types.MappingProxyType(dict(self.sources)))
        if weights is not None:
            object.__setattr__(self, "weights", types.MappingProxyType(weights))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.sources)

"""How documents are packed into rows of L tokens: the modes and their names, the output keys,
the tokens added to each document and the documents packed together (a chunk).

Plain Python: the text preset checks its options against it, and the graph packer
(modalities/text/packer.py), the text stages, `describe()` and bench all take their numbers from it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, Protocol, get_args

# "first_fit": several documents a row; "none": one a row, padded; "concat": end to end, cut
# every L (reference.py describes each).
Mode = Literal["first_fit", "none", "concat"]
MODES: tuple[Mode, ...] = get_args(Mode)

# The three outputs of packed rows, all int32 [rows, L]: the field's layout (seqio, Grain).
KEYS = ("tokens", "segment_ids", "positions")

# Sequence lengths up to this many tokens; the packer's int32 outputs and row keys fit it.
MAX_SEQUENCE_LENGTH = 1 << 20

# A chunk holds about this many rows' worth of tokens: its last rows are the only ones packing
# leaves short, so a chunk of 512 rows loses about 0.1% of the slots to them. Memory: 512 * L
# tokens per chunk (8 MB of int64 at L=2048).
CHUNK_ROWS = 512
MIN_CHUNK = 256
MAX_CHUNK = 65_536
# Documents per chunk when the data has no length histogram (records without a manifest).
DEFAULT_CHUNK = 4096


class Spec(Protocol):
    """What packing needs to know of a pipeline (the text preset's `TextPacking` is one).

    Attributes:
      sequence_length: L.
      mode: one of MODES.
      truncate: only each document's first L tokens are kept.
      eos: the id appended to every document, or None.
      classify: one document a row, framed as [CLS] tokens [SEP].
      chunk: documents per chunk, or None: chosen from the mean length.
      mean_tokens: the split's mean document length (manifest), or None.
      histogram: the split's length histogram (manifest), or None.
    """

    @property
    def sequence_length(self) -> int: ...
    @property
    def mode(self) -> Mode: ...
    @property
    def truncate(self) -> bool: ...
    @property
    def eos(self) -> int | None: ...
    @property
    def classify(self) -> bool: ...
    @property
    def chunk(self) -> int | None: ...
    @property
    def mean_tokens(self) -> float | None: ...
    @property
    def histogram(self) -> Mapping[str, Sequence[int]] | None: ...


def added_tokens(spec: Spec) -> int:
    """Tokens the pipeline adds to each document before packing: a classifier's [CLS] and [SEP]
    (2), else the EOS (1) or nothing."""
    if spec.classify:
        return 2
    return int(spec.eos is not None)


def chunk_documents(sequence_length: int, mean_tokens: float | None) -> int:
    """Documents per chunk: about CHUNK_ROWS rows of `sequence_length` at the mean length."""
    if not mean_tokens or mean_tokens <= 0:
        return DEFAULT_CHUNK
    return int(min(MAX_CHUNK, max(MIN_CHUNK, -(-CHUNK_ROWS * sequence_length // max(1, int(mean_tokens))))))


def chunk_size(spec: Spec, sequence_length: int | None = None) -> int:
    """Documents per chunk as `spec` packs them: its `chunk`, or about CHUNK_ROWS rows at the
    mean length as packed (a classifier's rows hold one document each).

    Args:
      spec: how the pipeline packs.
      sequence_length: another L (bench's suggested length): the chunk `build()` chooses there
        (a `chunk=` is for the pipeline's own L). None: `spec.sequence_length`.
    """
    L = spec.sequence_length if sequence_length is None else sequence_length
    if spec.chunk is not None and spec.sequence_length == L:
        return spec.chunk
    if spec.classify:  # one document a row: a chunk of CHUNK_ROWS rows
        return chunk_documents(L, L)
    mean = spec.mean_tokens
    return chunk_documents(L, mean + added_tokens(spec) if mean else mean)

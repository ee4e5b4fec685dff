"""Packing documents into rows of L tokens, without TensorFlow: one home for its rules.

- `spec`: the modes and their names, the output keys, the tokens added to each document and
  the documents packed together (a chunk).
- `fill`: the fill predicted from a split's length histogram, and the rows an epoch packs into.
- `reference`: the packer in NumPy, which the graph packer (pipeline/packing.py) equals row
  for row.

Below presets and pipeline: the text preset, the graph packer and the text stages,
`describe()` and bench call it, and it imports nothing of tfpipe but errors.
"""

from tfpipe.packing.spec import KEYS, MODES, Mode, Spec

__all__ = ["KEYS", "MODES", "Mode", "Spec"]

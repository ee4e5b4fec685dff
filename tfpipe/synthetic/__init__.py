"""Generated data: photo-like images (`images`), image folder trees (`folders`) and mixed-type
tables (`tables`); and real English text every CPython has (`text`: the standard library's
docstrings). `tfpipe bench` makes its default dataset with them, and `tfpipe.testing.fake_data`
offers them for users' own tests.

Everything is deterministic per seed (the text per CPython) and needs no TensorFlow.
"""

# Bumped whenever the same seed starts giving other bytes, so caches of generated data (the
# bench's embedded dataset) can include it in their key.
GENERATOR_VERSION = 2

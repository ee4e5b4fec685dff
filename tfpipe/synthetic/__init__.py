"""Generated data: photo-like images (`images`), image folder trees (`folders`) and mixed-type
tables (`tables`). `tfpipe bench` makes its default dataset with them, and
`tfpipe.testing.fake_data` offers them for users' own tests.

Everything is deterministic per seed and needs no TensorFlow.
"""

# Bumped whenever the same seed starts giving other bytes, so caches of generated data (the
# bench's embedded dataset) can include it in their key.
GENERATOR_VERSION = 2

"""Text's graph: the packer in TensorFlow ops (`packer`, the rules are `tfpipe.packing`'s) and
the text stages (`stages`: chunk, pack and batch, where a step starts), the lengths file
(`lengths`).

Stands on order/ and read/ (tests/test_imports.py).
"""

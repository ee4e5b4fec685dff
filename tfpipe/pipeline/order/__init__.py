"""The training order: the resumable order, a pure function of (seed, position) (`resumable`:
its spec, when it is chosen, where a step starts), the same order as a tf.data stream
(`stream`), and `Position`, the checkpointable step it restarts from (`position`).

Stands on read/ alone among the pipeline's packages (tests/test_imports.py).
"""

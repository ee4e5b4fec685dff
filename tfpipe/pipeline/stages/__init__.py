"""The stages: `Stage` and the `StagePlan` every stage factory reads (`stage`); the factories by
what they do: reading (`read`), the preset's parse, decode, batch and map (`preset`), the final
stages and the tf.data.Options (`final`); static-shape evaluation (`padding`); and the chain,
`make_stages` and the `Pipeline` that holds the stages in order and makes the dataset
(`pipeline`). Text's own stages are text/'s.

Stands on text/, order/ and read/; the build and the mixture stand on it (tests/test_imports.py).
"""

"""The stages: `Stage` and the `StagePlan` every stage factory reads (`stage`), the `Pipeline`
that holds the stages in order and makes the dataset (`pipeline`), and static-shape
evaluation (`padding`).

Stands on text/, order/ and read/; the build and the mixture stand on it (tests/test_imports.py).
"""

"""Reading: `build()`'s data resolved into files, sizes, counts and keys (`resolve`, `records`,
`tfds_info`), the files shared among input pipelines (`sharding`), and one shard's verified read
(`shard`), with its generation guard (`generation`), what `skip_corrupt` drops (`skips`) and the
plain tf.data transformations the graph code uses (`raw`).

The floor of the pipeline's packages: it imports none of order/, text/, stages/, mixture/ or
the build (tests/test_imports.py).
"""

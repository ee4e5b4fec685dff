"""A weighted mixture of datasets: its plan (`plan`: each source planned as one dataset, the
mixed stream in place of the first source's read), its choice function in closed form (`spec`)
and the mixed stream in tf.data (`stream`).

`pieces` is research code the product does not call yet: the NumPy reference of mixing text by
pieces in virtual time, which issue 45 wires into `build()` (benchmarks/mixture_shares.py
measures it). It sits here, beside what it will replace, as `tfpipe.packing.reference` sits
beside the graph packer it checks.

Above stages/ and below the build: a mixture plans each source with the `plan` it is handed
(tests/test_imports.py).
"""

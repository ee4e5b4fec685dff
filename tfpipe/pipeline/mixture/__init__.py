"""A weighted mixture of datasets: its plan (`plan`: each source planned as one dataset, the
mixed stream in place of the first source's read; `pipeline`: what plan() returns), how a
batching's data mixes (`mixing`: by records, or its modality's own: text's in
tfpipe/modalities/text/mixture/), its choice function in closed form (`spec`: exact rates,
virtual time), the mixed stream in tf.data (`stream`, a source's stream regrouped by tag in
`regroup`), and the NumPy reference of the text mixture that tests check the graph against
(`pieces`, as `tfpipe.packing.reference` is the packer's).

Above stages/ and below the build: a mixture plans each source with the `plan` it is handed
(tests/test_imports.py).
"""

"""bench's second stage, judge: from `bench.results`' measurements to the verdict, the
bottleneck, the cores needed, the text's tokens and fill, and the advice, every figure computed
once (`conclusion`) and held in the `Report`, which serialises itself. It never imports
`measure` or `present`.
"""

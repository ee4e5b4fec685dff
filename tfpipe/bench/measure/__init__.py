"""bench's first stage, measure: the data it runs on, the producer (the pipeline timed one
stage prefix at a time), the consumer (the model's step, from a fit, a profile or the reference
table), the reading without a cache, the simulated training loop and the text's tokens. Its
output is `bench.results`' plain types; it never imports `judge` or `present`.
"""

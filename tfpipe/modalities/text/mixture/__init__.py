"""A mixture of text datasets: text's `Mixing` (mixing.py), its stream of pieces in virtual time
(stream.py), its pack a source a row (pack.py) and its own numbers from the mix (numbers.py)."""

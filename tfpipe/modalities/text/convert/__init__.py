"""The text kind: a corpus of documents, tokenized into one record each, with its tokenizer."""

"""The tables kind: CSV, Parquet, Arrow or JSON Lines files, each row one record, its schema inferred."""

"""The tables modality: CSV, Parquet, Arrow and JSON Lines converted one Example a row
(`convert/`), read by the tabular preset (`preset.py`), benched on a 40-column table (`bench/`);
tied together in `modality.py`."""

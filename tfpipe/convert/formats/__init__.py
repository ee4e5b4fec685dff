"""File formats that more than one kind reads: CSV, Parquet, Arrow IPC, JSON Lines, Hugging Face
saved folders and text columns, and the one text decoder (`textfile`) every text reader uses."""

"""The images modality's bench half: its synthetic data and raw-data words (`data`), the
baseline pipeline `--compare` times (`recipe`, `compare`) and its advice (`advice`)."""

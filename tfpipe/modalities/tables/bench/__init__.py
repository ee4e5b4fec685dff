"""The tables modality's bench half: its synthetic table and raw-data words (`data`)."""

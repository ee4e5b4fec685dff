"""The images modality: class folders or a labels file converted into JPEG records (`convert/`),
read by the imagenet preset (`preset.py`), benched on ImageNet-like JPEGs (`bench/`); tied
together in `modality.py`."""

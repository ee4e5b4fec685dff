"""Synthetic photos that cost what ImageNet's do, image trees with ImageNet's odd files,
mixed-type tables, and text corpora of real English, for users' own tests. The generators
live in `tfpipe.synthetic`; this module is their public name for tests."""

from tfpipe.synthetic import GENERATOR_VERSION
from tfpipe.synthetic.folders import (
    GENERIC_ODDITY_KINDS,
    ODDITY_KINDS,
    UNDECODABLE_ODDITIES,
    class_names,
    write_image_folder,
    write_oddities,
    write_validation_flat,
)
from tfpipe.synthetic.images import (
    IMAGENET_MEAN_BYTES,
    IMAGENET_MEAN_SIZE,
    encode_jpeg,
    imagenet_like_jpeg,
    imagenet_like_size,
    natural_image,
    to_cmyk,
)
from tfpipe.synthetic.tables import make_table, write_table
from tfpipe.synthetic.text import documents as english_documents
from tfpipe.synthetic.text import write_corpus

__all__ = [
    "GENERATOR_VERSION",
    "GENERIC_ODDITY_KINDS",
    "IMAGENET_MEAN_BYTES",
    "IMAGENET_MEAN_SIZE",
    "ODDITY_KINDS",
    "UNDECODABLE_ODDITIES",
    "class_names",
    "encode_jpeg",
    "english_documents",
    "imagenet_like_jpeg",
    "imagenet_like_size",
    "make_table",
    "natural_image",
    "to_cmyk",
    "write_corpus",
    "write_image_folder",
    "write_oddities",
    "write_table",
    "write_validation_flat",
]

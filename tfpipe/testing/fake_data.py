"""Synthetic photos that cost what ImageNet's do, image trees with ImageNet's odd files, and
mixed-type tables, for users' own tests. The generator lives in `tfpipe.bench._fake`, since
`tfpipe bench` generates its default dataset with it; this module is its public name."""

from tfpipe.bench._fake import (
    GENERATOR_VERSION,
    GENERIC_ODDITY_KINDS,
    IMAGENET_MEAN_BYTES,
    IMAGENET_MEAN_SIZE,
    ODDITY_KINDS,
    UNDECODABLE_ODDITIES,
    class_names,
    encode_jpeg,
    imagenet_like_jpeg,
    imagenet_like_size,
    make_table,
    natural_image,
    to_cmyk,
    write_image_folder,
    write_oddities,
    write_table,
    write_validation_flat,
)

__all__ = [
    "GENERATOR_VERSION",
    "GENERIC_ODDITY_KINDS",
    "IMAGENET_MEAN_BYTES",
    "IMAGENET_MEAN_SIZE",
    "ODDITY_KINDS",
    "UNDECODABLE_ODDITIES",
    "class_names",
    "encode_jpeg",
    "imagenet_like_jpeg",
    "imagenet_like_size",
    "make_table",
    "natural_image",
    "to_cmyk",
    "write_image_folder",
    "write_oddities",
    "write_table",
    "write_validation_flat",
]

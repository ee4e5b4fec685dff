"""The images modality's `tfpipe convert` flags (the images group): its options as the command line
takes them, and those it passes to `convert()` in another form."""

from __future__ import annotations

import argparse


def add_flags(g: argparse._ArgumentGroup) -> None:
    g.add_argument(
        "--resize-shorter",
        type=int,
        metavar="PX",
        help="re-encode images whose shorter side is larger than PX",
    )
    g.add_argument("--quality", type=int, default=90, help="JPEG quality for re-encoded images (default: 90)")
    g.add_argument(
        "--check",
        default="decode",
        choices=["decode", "header"],
        help="how RGB JPEGs that pass through unchanged are checked: decode (default; "
        "finds any damage) or header (structure only: bytes are just copied, ~10x faster)",
    )
    g.add_argument(
        "--strict", action="store_true", help="fail on an undecodable image instead of skipping it"
    )
    g.description = (
        "Every image is stored as an RGB JPEG holding the pixels TensorFlow's decoders (and "
        "Keras' image_dataset_from_directory) give: EXIF orientation is ignored, alpha is "
        "dropped (not composited on a background), a GIF keeps its first frame, and its "
        "transparent pixels are black."
    )

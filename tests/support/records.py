"""What a conversion wrote, read back for tests without TensorFlow: every record of a split,
decoded to {feature: list of values}, in shard order."""

import os

from tfpipe.format.codec import decode_example
from tfpipe.format.manifest import Manifest
from tfpipe.format.tfrecord import read_records


def split_records(manifest, split="train"):
    out = []
    for path in manifest.shard_paths(split):
        with open(path, "rb") as f:
            out += [decode_example(r) for r in read_records(f, where=path)]
    return out


def records(dest, split="train"):
    """(records, manifest) of the dataset at `dest`."""
    m = Manifest.load(str(dest))
    return split_records(m, split), m


def column(recs, name):
    return [r[name][0] for r in recs]


def nothing_written(dest):
    """No file a reader would see (hidden in-progress names aside)."""
    return not os.path.exists(dest) or not [n for n in os.listdir(dest) if not n.startswith(".")]

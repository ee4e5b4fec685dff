"""What a conversion wrote, read back for tests without TensorFlow: every record of a split,
decoded to {feature: list of values}, in shard order; and two conversions' outputs compared
(`same_output`)."""

import json
import os
import pathlib

from tfpipe.format.decode import decode_example
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


def same_output(a, b):
    """Shard bytes equal, and the manifests equal but for the timing, the engine and the retry
    count (only the local engine counts retries)."""
    a, b = str(a), str(b)
    names = sorted(n for n in os.listdir(a) if not n.startswith("."))
    assert names == sorted(n for n in os.listdir(b) if not n.startswith("."))
    for n in names:
        if n != "tfpipe.json":
            assert pathlib.Path(a, n).read_bytes() == pathlib.Path(b, n).read_bytes(), n
    assert _manifest(a) == _manifest(b)


def _manifest(root):
    obj = json.loads(pathlib.Path(root, "tfpipe.json").read_text())
    for split in obj["splits"].values():
        split.pop("seconds")
        split.pop("retries", None)
        split["options"].pop("engine", None)
    return json.dumps(obj, sort_keys=True).replace(root, "<root>")

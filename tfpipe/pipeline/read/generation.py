"""The generation guard: a read never mixes two conversions of a split.

`tfpipe convert --overwrite` rewrites shards under the same names (and often the same sizes
and counts). Once a shard is open and its first records are read, before any is yielded, the
dataset's `tfpipe.json` must still list the shard's checksum as `build()` read it (a
`Generation`); otherwise the read fails, naming the shard, and a pipeline never goes on with
records of the new generation.

Checked after the open, not before it, one check covers the whole read: convert un-commits the
manifest before it rewrites a shard, and an open local file keeps the inode it opened (convert
renames shards into place), as one gs:// request reads one object generation. Only a gs://
shard longer than one of TensorFlow's read requests (`storage.gcs_request_bytes`) is checked
again at its end: its later requests read whatever generation is there then.

What a check costs: locally, reading `tfpipe.json` (~0.03 ms). On gs://, reading it would cost
a request and ~30-40 ms of CPU (TensorFlow fills a whole 64 MiB read block for every file it
opens), as much as the read of a 5 MB shard; so a gs:// conversion keeps a commit marker per
split (tfpipe/format/commit_markers.py), and a check lists it instead: one small list request, no
file opened, ~2 ms (benchmarks/gcs_check_cost.py). Only where the marker is gone, or was never
written, does the check read `tfpipe.json`.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from tfpipe import storage
from tfpipe._tf import Tensor, plain, tensor_text, tf
from tfpipe.format import commit_markers
from tfpipe.format.manifest import MANIFEST_NAME

if TYPE_CHECKING:
    from tfpipe.pipeline.read.resolve import ResolvedData


def generation_checks(size: int, gcs: bool) -> int:
    """Checks of one read of a shard of `size` bytes, a request each on gs:// (see the module
    doc)."""
    return 2 if gcs and size > storage.gcs_request_bytes() else 1


@dataclasses.dataclass(frozen=True, slots=True)
class Generation:
    """The generation of a split a pipeline reads: each shard's checksum in the manifest
    `build()` loaded, to check that the manifest still lists it (see the module doc); and on
    gs://, the split's commit marker when it existed then (tfpipe/format/commit_markers.py)."""

    manifest: str
    files: tuple[str, ...]
    checksums: tuple[str, ...]
    marker: str | None = None

    @classmethod
    def of(cls, source: ResolvedData) -> Generation | None:
        """The generation of a `ResolvedData` read through a manifest; None for foreign files."""
        if source.manifest is None or source.split is None:
            return None
        shards = source.manifest.split(source.split).shards
        return cls(
            storage.join(source.manifest.root, MANIFEST_NAME),
            tuple(source.files),
            tuple(s.checksum for s in shards),
            commit_markers.committed(source.manifest.root, source.split, shards),
        )

    def read_in_parts(self, size: Tensor) -> Tensor:
        """Whether a shard of `size` bytes (-1: unknown) takes TensorFlow more than one read
        request (graph code): only a gs:// shard longer than `storage.gcs_request_bytes()`."""
        tf_ = tf()
        if not storage.is_gcs(self.manifest):
            return tf_.constant(False)
        return tf_.logical_or(tf_.less(size, 0), tf_.greater(size, storage.gcs_request_bytes()))

    def still_listed(self, path: Tensor) -> Tensor:
        """An assertion (graph code) that the manifest now still lists `path` with its checksum:
        its split's commit marker still exists (one listing), or else `tfpipe.json` says so."""
        tf_ = tf()
        files, checksums = tf_.constant(self.files), tf_.constant(self.checksums)
        checksum = tf_.gather(checksums, tf_.argmax(tf_.cast(tf_.equal(files, path), tf_.int32)))

        def manifest_lists() -> Tensor:
            # Plain ops, no dataset: a get_single_element here optimised its dataset at every
            # shard read. The manifest's name joined with none of the shard's, so the graph
            # optimizer cannot fold the listing into a constant when the function is built.
            manifest = tf_.strings.join([self.manifest, tf_.strings.substr(path, 0, 0)])
            found = tf_.io.matching_files(manifest)
            # A manifest that is gone (--overwrite un-commits the split first) reads as "".
            text = tf_.cond(tf_.size(found) > 0, lambda: tf_.io.read_file(found[0]), lambda: tf_.constant(""))
            return tf_.strings.regex_full_match(text, tf_.strings.join(["(?s).*", checksum, ".*"]))

        if self.marker is None:
            listed = manifest_lists()
        else:
            listed = tf_.cond(marked(self.marker), lambda: tf_.constant(True), manifest_lists)
        message = tensor_text(
            (
                "TFRecord shard {} changed generation while this pipeline read it: "
                f"{self.manifest} no longer lists it with checksum {{}}, as it did when build() "
                "read it (the split was converted again, e.g. with --overwrite, or is being). "
                "Reading on would mix records of two conversions: build() the pipeline again "
                "once the conversion has finished."
            ),
            path,
            checksum,
        )
        return tf_.debugging.Assert(listed, [message])


def marked(marker: str) -> Tensor:
    """Whether the commit marker `marker` exists now (graph code): one listing, which opens no
    file, so TensorFlow fills no read block for it. The name goes in as a dataset element: a
    constant would be folded by TensorFlow's graph optimizer, listed once when the function is
    built."""
    tf_ = tf()
    found = plain(lambda name: tf_.greater(tf_.size(tf_.io.matching_files(name)), 0))
    return tf_.data.Dataset.from_tensors(marker).map(found).get_single_element()

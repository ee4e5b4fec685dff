"""The local GCS twin for the benchmarks that read from or write to gs:// (not a test module).

`start()` must run before anything imports TensorFlow: TF reads its GCS_* variables once, at
import. The benchmarks keep TF's own GCS defaults (10 retries from 1 s, a 5 s stat cache), not
the test suite's short ones (`TF_GCS_TEST_ENV`), so TF behaves as it would against GCS.

The twin is two Python processes (proxy and emulator) on the same cores as the code measured,
so every benchmark reports their CPU (`TwinCpu`) next to its own figures.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time

from tfpipe import storage
from tfpipe.format import commit_markers
from tfpipe.format.manifest import MANIFEST_NAME, Manifest
from tfpipe.testing.gcs import LocalGCS


def start(**shaping: float | None) -> LocalGCS:
    """A running LocalGCS (shaped as given) with this process pointed at it."""
    if "tensorflow" in sys.modules:
        raise RuntimeError("start the twin before TensorFlow is imported (it reads GCS_* at import)")
    gcs = LocalGCS(**shaping).start()
    os.environ.update({k: v for k, v in gcs.env.items() if not k.startswith("GCS_")})
    storage.reset_client()
    return gcs


def upload_dataset(local_root: str, dest: str, *, markers: bool = True) -> str:
    """Copies a converted dataset (its shards, then with `markers` each split's commit marker,
    then its manifest) to gs:// `dest`, as `tfpipe convert` to gs:// leaves it; returns `dest`.
    Without markers, each of a reader's generation checks reads tfpipe.json (as for a dataset
    copied by another tool)."""
    manifest = Manifest.load(local_root)
    for name in [s.name for split in manifest.splits.values() for s in split.shards]:
        with open(os.path.join(local_root, name), "rb") as f:
            storage.write_atomic(storage.join(dest, name), f.read(), overwrite=True)
    for split_name, split in manifest.splits.items() if markers else ():
        commit_markers.mark(dest, split_name, split.shards)
    with open(os.path.join(local_root, MANIFEST_NAME), "rb") as f:
        storage.write_atomic(storage.join(dest, MANIFEST_NAME), f.read(), overwrite=True)
    return dest


@dataclasses.dataclass
class TwinCpu:
    """The twin's CPU over a span of wall time: `with TwinCpu(gcs) as cpu: ...`, then read it."""

    gcs: LocalGCS
    proxy_s: float = 0.0
    emulator_s: float = 0.0
    wall_s: float = 0.0

    def __enter__(self) -> TwinCpu:
        self._start = self.gcs.cpu_seconds(), time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        (before, t0), after = self._start, self.gcs.cpu_seconds()
        self.proxy_s = after["proxy"] - before["proxy"]
        self.emulator_s = after["emulator"] - before["emulator"]
        self.wall_s = time.monotonic() - t0

    @property
    def cores(self) -> float:
        """Cores the twin kept busy on average: what it took from the code measured."""
        return (self.proxy_s + self.emulator_s) / self.wall_s if self.wall_s else 0.0

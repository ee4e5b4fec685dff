"""The embedded default dataset: generated once through convert, keyed, atomic, reused."""

from __future__ import annotations

import os

import pytest

from tfpipe.bench.measure import synthetic
from tfpipe.errors import ConfigError
from tfpipe.format.manifest import MANIFEST_NAME


def test_spec_defaults_env_and_key(monkeypatch) -> None:
    monkeypatch.delenv(synthetic.EXAMPLES_ENV, raising=False)
    spec = synthetic.SyntheticSpec.default("imagenet")
    assert (spec.examples, spec.shards) == (1280, 8)
    assert synthetic.SyntheticSpec.default("tabular").examples == 100_000
    monkeypatch.setenv(synthetic.EXAMPLES_ENV, "5")
    small = synthetic.SyntheticSpec.default("imagenet")
    assert (small.examples, small.shards) == (5, 5)  # never more shards than examples
    assert synthetic.SyntheticSpec.default("imagenet", 7).examples == 7  # an explicit size wins
    # The key is stable for a spec and differs when anything that shapes the bytes differs.
    assert small.key == synthetic.SyntheticSpec("imagenet", 5, 5).key
    assert (
        len(
            {
                small.key,
                synthetic.SyntheticSpec("imagenet", 5, 5, seed=1).key,
                synthetic.SyntheticSpec("imagenet", 6, 5).key,
            }
        )
        == 3
    )
    assert small.dirname == f"imagenet-5-{small.key}"
    monkeypatch.setenv(synthetic.EXAMPLES_ENV, "many")
    with pytest.raises(
        ConfigError, match=r"TFPIPE_BENCH_SYNTHETIC_EXAMPLES must be an integer. Received: .*'many'"
    ):
        synthetic.SyntheticSpec.default("imagenet")
    with pytest.raises(ConfigError, match="examples must be an integer >= 1"):
        synthetic.SyntheticSpec("imagenet", 0, 1)


def test_generated_once_atomically_then_reused(tmp_path) -> None:
    spec = synthetic.SyntheticSpec("imagenet", 7, 3, seed=5)
    said: list[str] = []
    manifest, seconds = synthetic.ensure_dataset(spec, str(tmp_path), said.append)
    assert seconds > 0 and len(said) == 2 and "first run only" in said[0]
    root = synthetic.dataset_path(spec, str(tmp_path))
    assert manifest.root == root and os.path.exists(os.path.join(root, MANIFEST_NAME))
    split = manifest.split("train")
    assert (split.examples, len(split.shards)) == (7, 3)
    # ImageNet-like JPEGs of ImageNet-like size: ~108 KB on average (7 images: wide bounds).
    assert 40_000 < split.bytes / split.examples < 250_000
    # Only the finished dataset is left: no temporary directory, no raw JPEGs.
    assert sorted(os.listdir(tmp_path / "datasets")) == [spec.dirname]
    assert not any(name == "raw" for _, dirs, _ in os.walk(tmp_path) for name in dirs)
    again, seconds = synthetic.ensure_dataset(spec, str(tmp_path), said.append)
    assert seconds == 0.0 and len(said) == 2 and again.split("train") == split

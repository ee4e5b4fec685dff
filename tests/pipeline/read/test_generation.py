"""A reader never mixes two conversions of a split, and never hangs on a shard that vanished.
Real conversions (`tfpipe convert --overwrite` in another process) and real deletions."""

import os
import subprocess
import sys
import textwrap
from urllib.parse import quote

import numpy as np
import pandas as pd
import pytest

import tfpipe

from support.cli import environment, run_cli

ROWS, SHARDS = 4001, 8
OPTIONS = ("--num-shards", str(SHARDS), "--workers", "1", "--quiet")


def write_table(path, flip):
    x = np.arange(ROWS)
    pd.DataFrame({"x": x, "y": (x + flip) % 2}).to_parquet(path)


@pytest.fixture
def dataset(tmp_path):
    write_table(tmp_path / "t.parquet", flip=0)
    dest = tmp_path / "out"
    tfpipe.convert(str(tmp_path / "t.parquet"), str(dest), label="y", num_shards=SHARDS, workers=1)
    return tmp_path / "t.parquet", dest


@pytest.mark.slow
def test_an_eval_pass_fails_rather_than_mix_two_conversions(dataset):
    import tensorflow as tf

    src, dest = dataset
    old_sizes = sorted((n, os.path.getsize(dest / n)) for n in os.listdir(dest) if n.startswith("train-"))
    ds = tfpipe.build(str(dest), preset="tabular", label="y", batch_size=100, training=False, split="train")
    it = iter(ds)
    seen = []
    for _ in range(3):
        features, labels = next(it)
        seen.append((features["x"].numpy(), labels.numpy()))
    write_table(src, flip=1)  # every label flipped: the same names, counts and sizes
    run = run_cli("convert", src, dest, "--label", "y", "--overwrite", *OPTIONS)
    assert run.returncode == 0, run.stderr
    new_sizes = sorted((n, os.path.getsize(dest / n)) for n in os.listdir(dest) if n.startswith("train-"))
    assert new_sizes == old_sizes
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=r"changed generation while this pipeline read it"
    ):
        for features, labels in it:
            seen.append((features["x"].numpy(), labels.numpy()))
    x = np.concatenate([s[0] for s in seen])
    y = np.concatenate([s[1] for s in seen])
    assert len(x) >= 300 and (y == x % 2).all()  # every record read is of the first conversion


@pytest.mark.slow
def test_a_shard_deleted_before_its_turn_fails_naming_it_and_never_hangs(dataset):
    _, dest = dataset
    script = textwrap.dedent(
        f"""
        import os, tfpipe
        ds = tfpipe.build({str(dest)!r}, preset="tabular", label="y", batch_size=100, training=False)
        it = iter(ds)
        next(it)
        os.remove({str(dest / "train-00006-of-00008")!r})
        try:
            for _ in it:
                pass
        except Exception as e:
            print(type(e).__name__, str(e).splitlines()[0][-120:])
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", script],
        env=environment(),
        capture_output=True,
        text=True,
        timeout=90,  # it spun forever, deaf to Ctrl-C
    )
    assert "NotFoundError" in run.stdout and "train-00006-of-00008; No such file or directory" in run.stdout


def manifest_reads(gcs, ds) -> int:
    """TensorFlow's downloads of tfpipe.json while `ds` is read to its end once."""
    with gcs.recording() as log:
        for _ in ds:
            pass
    return sum(
        r.route == "tls" and r.method == "GET" and "tfpipe.json" in r.path and r.bytes_out > 0 for r in log
    )


@pytest.mark.gcs
def test_gcs_shards_are_checked_once_unless_read_in_parts(dataset, local_gcs, gcs_bucket, monkeypatch):
    # Each check downloads tfpipe.json: on gs:// a request and ~30 ms of TensorFlow's CPU.
    from tfpipe import storage

    _, dest = dataset
    root = gcs_bucket + "/t"
    for name in os.listdir(dest):
        storage.write_atomic(storage.join(root, name), (dest / name).read_bytes())

    def build():
        return tfpipe.build(root, preset="tabular", label="y", batch_size=100, training=False, split="train")

    assert manifest_reads(local_gcs, build()) == SHARDS  # one request each: checked once, after opening
    # A shard longer than one of TensorFlow's requests could change between them: checked at its
    # end too. (These shards are ~20 KB: taken here as longer than a 1 KB request.)
    monkeypatch.setattr(storage, "gcs_request_bytes", lambda: 1024)
    assert manifest_reads(local_gcs, build()) == 2 * SHARDS


def tf_requests(gcs, ds) -> tuple[list, int]:
    """TensorFlow's requests to the twin while `ds` is read to its end once, and the records."""
    with gcs.recording() as log:
        n = sum(len(labels) for _, labels in ds)
    return [r for r in log if r.route == "tls"], n


@pytest.fixture
def gcs_dataset(dataset, gcs_bucket):
    """The table converted straight to gs://, so its split has a commit marker."""
    src, _ = dataset
    root = gcs_bucket + "/t"
    tfpipe.convert(str(src), root, label="y", num_shards=SHARDS, workers=1)
    return src, root


@pytest.mark.gcs
def test_gcs_checks_list_the_commit_marker_and_read_no_file(gcs_dataset, local_gcs, monkeypatch):
    # Each check is one listing of the marker's folder: TensorFlow opens no file for it, so it
    # fills no 64 MiB read block. Its only ranged reads are the shards', one each.
    from tfpipe import storage
    from tfpipe.format import commit_markers
    from tfpipe.format.manifest import Manifest

    _, root = gcs_dataset
    manifest = Manifest.load(root)
    bucket, prefix = root[len("gs://") :].split("/", 1)
    marker_prefix = "prefix=" + quote(f"{prefix}/{commit_markers.COMMITS_DIR}/", safe="")
    block = storage.gcs_request_bytes()

    def build():
        return tfpipe.build(root, preset="tabular", label="y", batch_size=100, training=False, split="train")

    requests, n = tf_requests(local_gcs, build())
    assert n == ROWS
    assert all(r.method == "GET" and r.status in (200, 206) for r in requests)
    assert not [r for r in requests if "tfpipe.json" in r.path]  # neither read nor stat
    ranged = sorted((r.path, r.byte_range, r.bytes_out) for r in requests if r.byte_range)
    assert ranged == sorted(
        (f"/{bucket}/{quote(f'{prefix}/{s.name}', safe='')}", f"bytes=0-{block - 1}", s.bytes)
        for s in manifest.splits["train"].shards
    )
    listings = [r for r in requests if marker_prefix in r.path]
    assert len(listings) == SHARDS and all(r.bytes_out < 1000 for r in listings)
    assert storage.exists(commit_markers.marker(root, "train", manifest.splits["train"].shards))

    # A shard longer than one of TensorFlow's requests could change between them: checked at its
    # end too. (These shards are ~20 KB: taken here as longer than a 1 KB request.)
    monkeypatch.setattr(storage, "gcs_request_bytes", lambda: 1024)
    requests, n = tf_requests(local_gcs, build())
    assert n == ROWS and len([r for r in requests if marker_prefix in r.path]) == 2 * SHARDS
    assert not [r for r in requests if "tfpipe.json" in r.path]


@pytest.mark.gcs
@pytest.mark.slow
def test_a_gcs_eval_pass_fails_rather_than_mix_two_conversions(gcs_dataset):
    # The commit marker's path: convert --overwrite removes it first, so the next check finds
    # none, reads tfpipe.json, and refuses.
    import tensorflow as tf

    src, root = gcs_dataset
    ds = tfpipe.build(root, preset="tabular", label="y", batch_size=100, training=False, split="train")
    it = iter(ds)
    seen = []
    for _ in range(3):
        features, labels = next(it)
        seen.append((features["x"].numpy(), labels.numpy()))
    write_table(src, flip=1)  # every label flipped: the same names, counts and sizes
    run = run_cli("convert", src, root, "--label", "y", "--overwrite", *OPTIONS)
    assert run.returncode == 0, run.stderr
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=r"changed generation while this pipeline read it"
    ):
        for features, labels in it:
            seen.append((features["x"].numpy(), labels.numpy()))
    x = np.concatenate([s[0] for s in seen])
    y = np.concatenate([s[1] for s in seen])
    assert len(x) >= 300 and (y == x % 2).all()  # every record read is of the first conversion

"""Golden outputs: the exact bytes of every shard and the manifest, for three sources.

They pin what `convert` writes (shard bytes, shard names, skipped inputs, options recorded
in the manifest), so a change in how the work is planned or executed that alters one byte
fails here. The inputs are made in the test from fixed seeds; the manifest is compared with
what varies by run removed (its timing, "seconds", and storage "retries") and the temporary
folder replaced by "<tmp>".
"""

import hashlib
import json
import os
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tfpipe
from tfpipe.testing import fake_data


def fingerprint(dest, tmp):
    """{file name: sha256} of the visible files, the manifest normalised."""
    out = {}
    for name in sorted(os.listdir(dest)):
        if name.startswith("."):
            continue
        with open(os.path.join(dest, name), "rb") as f:
            data = f.read()
        if name == "tfpipe.json":
            manifest = json.loads(data)
            for split in manifest["splits"].values():
                split.pop("seconds")
                split.pop("retries", None)
            data = json.dumps(manifest, sort_keys=True).replace(str(tmp), "<tmp>").encode()
        out[name] = hashlib.sha256(data).hexdigest()
    return out


def image_tree(tmp):
    root = tmp / "src" / "train"
    fake_data.write_image_folder(root, classes=3, per_class=[13, 11, 13], size=(64, 48), seed=5)
    fake_data.write_oddities(root, classes=fake_data.class_names(3), generic=True)
    (root / "README.txt").write_text("not inside a class folder\n")
    return root


def csv_folder(tmp):
    root = tmp / "src" / "csv"
    root.mkdir(parents=True)
    rng = np.random.default_rng(11)
    for i, n in enumerate([23, 17]):
        frame = pd.DataFrame(
            {
                "x": rng.normal(size=n).round(4),
                "k": rng.integers(-50, 50, n),
                "word": [f"w{j % 5}" for j in range(n)],
                "y": rng.integers(0, 3, n).astype(float),
            }
        )
        frame.loc[3, "x"] = np.nan
        frame.loc[5 + i, "y"] = np.nan  # a null label: dropped
        frame.to_csv(root / f"part{i}.csv", index=False)
    return root


def parquet_file(tmp):
    path = tmp / "src" / "t.parquet"
    path.parent.mkdir(parents=True)
    rng = np.random.default_rng(12)
    n = 61
    table = pa.table(
        {
            "a": pa.array(rng.integers(0, 1000, n), pa.int64()),
            "b": pa.array(rng.normal(size=n).astype("float32")),
            "s": pa.array([None if j % 9 == 4 else f"s{j}" for j in range(n)]),
            "flag": pa.array([j % 3 == 0 for j in range(n)]),
        }
    )
    pq.write_table(table, path, row_group_size=10)
    assert pq.ParquetFile(path).num_row_groups == 7
    return path


GOLDEN = {
    "images": {"num_shards": 3, "workers": 2, "resize_shorter": 40, "seed": 3},
    "images_header": {"num_shards": 2, "workers": 2, "check": "header"},
    "csv": {
        "num_shards": 4,
        "workers": 1,
        "label": "y",
        "missing": "fill",
        "missing_label": "drop",
        "chunk_rows": 7,
        "compression": "gzip",
    },
    "parquet": {"num_shards": 4, "workers": 2, "missing": "fill", "chunk_rows": 8, "split": "validation"},
}
MAKERS = {"images": image_tree, "images_header": image_tree, "csv": csv_folder, "parquet": parquet_file}

EXPECTED = {
    "csv": {
        "tfpipe.json": "c0a448df11c943bbe5e2c13b05e073d5f7e7b172deef1678ad8d333443e6f7dc",
        "train-00000-of-00004.gz": "189fa9e600b85b8c6d209ea657cca4d40d2237a1f578b35b267cae709b91fa09",
        "train-00001-of-00004.gz": "c520e76973ede50ad2ee8daadd215e60ce15f56aa0b014c2e058247c02d73dd3",
        "train-00002-of-00004.gz": "aa302b8ecf056514fe886ca67da34a82d5a981ab3bedfda545940872beeb7f5a",
        "train-00003-of-00004.gz": "d3baa0762ace39a435bd311741b3ddeae4fdd6b0dab8f7aef3e3c0c322baa8bb",
    },
    "images": {
        "tfpipe.json": "50c2b6661c20c1a9968457f2ac3b9304be09fb8be005c7081a15c18ffa83de80",
        "train-00000-of-00003": "bf7416908a4cafc6b3f3c001323c0320c02787b868716649241b9970dfbc892b",
        "train-00001-of-00003": "199189a4435e867472badfc1b9cb02119f5668216abb09692a5d4cd120e91693",
        "train-00002-of-00003": "5bba37b351f8b9f4991fbfb3d7540a2aa1a7ecae184019c0a113b2b47987f838",
    },
    "images_header": {
        "tfpipe.json": "93266b1fac57237d02bc2c6b67cf2dfa79c777e895f9bf6fcb15a1c1f1c03ccb",
        "train-00000-of-00002": "5cc5099c74017d64a75fa2db2d4604fc3953cf8275d10eb9a1e171f9c7e354a5",
        "train-00001-of-00002": "e12b2f8c9c718c8059afd784c240fdc2aaff593136e76704e3ccf1372e3d5523",
    },
    "parquet": {
        "tfpipe.json": "b8526c330b3154d182570393a947e69234b7873152dcb6a1c3de166f5f00730f",
        "validation-00000-of-00004": "62e19f5a8509f7cb77a6fb927295ff95a0052d15dd6d981afc7eb250f1f50abf",
        "validation-00001-of-00004": "fccbfaeb455018cb305344b1038b4ad9bf4f1efc31ddf41e050a4fc9ebda920c",
        "validation-00002-of-00004": "5368ddb764fb625e31725a177a0f087f9c9a5f132b70b01da00e7a74119444f1",
        "validation-00003-of-00004": "1d03bbe9bedd8b23aa3205524252f687ecd42a6feaae00aa535763b97d3910c1",
    },
}


@pytest.mark.parametrize("source", sorted(GOLDEN))
def test_output_bytes_are_pinned(tmp_path, source):
    options = GOLDEN[source]
    src = MAKERS[source](tmp_path)
    dest = tmp_path / "out"
    tfpipe.convert(str(src), str(dest), **options)
    assert fingerprint(dest, tmp_path) == EXPECTED[source]


@pytest.mark.parametrize("source", sorted(GOLDEN))
def test_resumed_output_is_the_same(tmp_path, source, monkeypatch):
    """A run stopped after its first shard and resumed writes the same files."""
    options = GOLDEN[source]
    src = MAKERS[source](tmp_path)
    dest = tmp_path / "out"
    from tfpipe.convert import writer

    real = writer.pause_point

    def stop_after_first_shard(name):
        if name == "shard-committed":
            raise KeyboardInterrupt
        real(name)

    users = [
        m
        for name, m in sys.modules.items()
        if name.startswith("tfpipe.convert") and getattr(m, "pause_point", None) is real
    ]
    with monkeypatch.context() as patch:
        for module in users:
            patch.setattr(module, "pause_point", stop_after_first_shard)
        with pytest.raises(KeyboardInterrupt):
            tfpipe.convert(str(src), str(dest), **options)
    assert not (dest / "tfpipe.json").exists()
    tfpipe.convert(str(src), str(dest), resume=True, **options)
    assert fingerprint(dest, tmp_path) == EXPECTED[source]


def write_in_other_processes(plan, source, done, journal):
    """A second engine, as a Beam runner would run it: each pending shard task is pickled to
    another (spawned) process, which writes the whole shard with `write_shard`."""
    import multiprocessing
    import pickle
    from concurrent.futures import ProcessPoolExecutor

    from tfpipe.convert.engine import write_shard

    todo = [t for t in plan.shards if t.index not in done]
    assert pickle.loads(pickle.dumps(plan)) == plan
    results = dict(done)
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        for task, shard in zip(todo, pool.map(write_shard, todo), strict=True):
            journal.mark_done(shard)
            results[task.index] = shard
    return [results[i] for i in range(plan.n_shards)]


@pytest.mark.parametrize("source", sorted(GOLDEN))
def test_a_second_engine_writes_the_same_bytes(tmp_path, source):
    from tfpipe.convert.config import split_options
    from tfpipe.convert.run import run_conversion

    options = GOLDEN[source]
    src = MAKERS[source](tmp_path)
    dest = tmp_path / "out"
    shard_cfg, cfg = split_options(options)
    run_conversion(str(src), str(dest), shard_cfg, cfg, write_in_other_processes)
    assert fingerprint(dest, tmp_path) == EXPECTED[source]

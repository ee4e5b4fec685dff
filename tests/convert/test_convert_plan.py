"""The plan and the decision, with plain values: no files, no processes."""

import dataclasses
import os
import pickle

import pytest

from tfpipe.convert.config import ConvertConfig, ShardConfig
from tfpipe.convert.plan import ConvertPlan, Refuse, Resume, Start, decide, make_plan
from tfpipe.convert.writer import JournalState, ShardDone
from tfpipe.errors import DataError, ManifestError
from tfpipe.format.manifest import Manifest, ShardInfo, SkippedInput, Split
from tfpipe.format.schema import IMAGE_SCHEMA
from tfpipe.modalities.images.convert.encode import ImageItem, ImageTask
from tfpipe.modalities.images.convert.folders import ImageScan
from tfpipe.modalities.images.convert.kind import IMAGES_PER_TASK, ImageSource

DEST = "/data/out"


def image_source(n=37):
    items = tuple(ImageItem(f"/src/c{i % 3}/{i}.jpg", i % 3, f"c{i % 3}") for i in range(n))
    skipped = (SkippedInput("/src/x.txt", "not an image"),)
    scan = ImageScan("images", items, ("c0", "c1", "c2"), 0, 1000 * n, skipped)
    return ImageSource(scan, None, 90, "decode", fingerprint="f" * 64)


def plan_of(n=37, num_shards=4, **options):
    shard_cfg = ShardConfig(num_shards=num_shards)
    return make_plan("/src", DEST, image_source(n), shard_cfg, ConvertConfig(**options), "images", "given")


def test_a_plan_cuts_37_items_into_4_shards_that_carry_their_own_place():
    plan = plan_of()
    assert [(t.index, t.name, t.first, t.count) for t in plan.shards] == [
        (0, "train-00000-of-00004", 0, 10),
        (1, "train-00001-of-00004", 10, 9),
        (2, "train-00002-of-00004", 19, 9),
        (3, "train-00003-of-00004", 28, 9),
    ]
    assert [t.inputs.items[0].path for t in plan.shards] == [
        "/src/c0/0.jpg",
        "/src/c1/10.jpg",
        "/src/c1/19.jpg",
        "/src/c1/28.jpg",
    ]
    pieces = list(plan.shards[0].pieces())
    assert [(p.shard, p.first, len(p.work.items)) for p in pieces] == [(0, 0, 10)]
    assert isinstance(pieces[0].work, ImageTask) and IMAGES_PER_TASK >= 10
    assert pickle.loads(pickle.dumps(plan)) == plan


def test_a_shard_larger_than_one_task_is_cut_into_pieces_from_its_own_first_item():
    plan = plan_of(n=50, num_shards=1)
    pieces = [(p.first, len(p.work.items)) for p in plan.shards[0].pieces()]
    assert pieces == [(0, 16), (16, 16), (32, 16), (48, 2)]


def test_the_record_is_the_plan_identity_and_leaves_out_workers():
    record = plan_of(workers=3).record()
    assert record == plan_of(workers=1).record()
    assert record["plan_version"] == 3 and record["n_shards"] == 4 and record["n_items"] == 37
    assert record["inputs"] == "f" * 64 and record["src"] == "/src"
    assert "workers" not in record["options"] and record["options"]["format"] == "images"
    assert plan_of(seed=1).record() != record


def test_an_empty_source_is_refused_by_name():
    with pytest.raises(DataError, match=r"/src: expected at least one input to convert\. Received: none"):
        plan_of(n=0)


def done_of(plan, skipped=()):
    return [
        ShardDone(ShardInfo(t.name, t.count, 100 * t.count, "crc32c:00000000"), skipped) for t in plan.shards
    ]


def test_the_manifest_comes_from_the_plan_and_the_shards_done():
    plan = plan_of()
    manifest = plan.manifest(done_of(plan, (SkippedInput("/src/c0/9.jpg", "empty file"),)), None, 1.23456)
    split = manifest.splits["train"]
    assert split.examples == 37 and split.bytes == 3700 and split.seconds == 1.235
    assert [s.input for s in split.skipped] == ["/src/x.txt"] + ["/src/c0/9.jpg"] * 4
    assert manifest.root == DEST and manifest.layout == "images" and manifest.schema == IMAGE_SCHEMA
    assert manifest.missing == "error" and split.options == plan.options


def test_the_manifest_refuses_a_missing_or_reordered_shard():
    plan = plan_of()
    done = done_of(plan)
    with pytest.raises(ManifestError, match=r"expected the 4 shards of the plan, in order"):
        plan.manifest(done[:3], None, 0.0)
    with pytest.raises(ManifestError, match=r"expected the 4 shards of the plan, in order"):
        plan.manifest(done[::-1], None, 0.0)


# ---- decide ----

JOURNAL = JournalState(plan_path=f"{DEST}/.tfpipe-train.plan.json")


def finished(examples=37):
    shard = ShardInfo("train-00000-of-00001", examples, 10, "crc32c:00000000")
    return Manifest(DEST, "images", IMAGE_SCHEMA, splits={"train": Split((shard,))})


@pytest.mark.parametrize("resume", [False, True])
def test_a_fresh_destination_starts(resume):
    assert decide(None, JOURNAL, plan_of(), resume=resume, overwrite=False) == Start()


def test_a_finished_split_is_refused_without_overwrite_and_replaced_with_it():
    refused = decide(finished(), JOURNAL, plan_of(), resume=True, overwrite=False)
    assert refused == Refuse(
        f"{DEST} already holds a finished dataset with split 'train' (37 examples). "
        "Pass --overwrite (overwrite=True) to replace it."
    )
    assert decide(finished(), JOURNAL, plan_of(), resume=False, overwrite=True) == Start(overwrite=True)


def test_overwrite_starts_over_even_from_a_corrupt_journal():
    journal = dataclasses.replace(JOURNAL, corrupt="{")
    assert decide(None, journal, plan_of(), resume=False, overwrite=True) == Start(overwrite=True)
    refused = decide(None, journal, plan_of(), resume=True, overwrite=False)
    assert refused == Refuse(
        f"{DEST}/.tfpipe-train.plan.json: the plan of the interrupted conversion is "
        "corrupt (expected a JSON object with n_shards; received '{'). It cannot be "
        "resumed: pass --overwrite (overwrite=True) to start over."
    )


def test_an_interrupted_run_is_refused_without_resume_saying_how_far_it_got():
    plan = plan_of()
    journal = dataclasses.replace(
        JOURNAL, plan=plan.record(), done=frozenset({"train-00000-of-00004", "train-00002-of-00004", "other"})
    )
    assert decide(None, journal, plan, resume=False, overwrite=False) == Refuse(
        f"{DEST} holds an interrupted conversion of split 'train' (2 of 4 shards done). "
        "Pass --resume (resume=True) to finish it, or --overwrite (overwrite=True) to start over."
    )
    assert decide(None, journal, plan, resume=True, overwrite=False) == Resume()


def test_resume_needs_the_same_plan_and_names_the_differences():
    journal = dataclasses.replace(JOURNAL, plan=plan_of(num_shards=24, quality=80).record())
    refused = decide(None, journal, plan_of(num_shards=12), resume=True, overwrite=False)
    assert refused == Refuse(
        f"{DEST}: --resume needs the same source and options as the interrupted run. "
        "Differences: n_shards was 24, now 12, num_shards was 24, now 12, "
        "quality was 80, now 90. Pass --overwrite to start over instead."
    )


def test_shard_files_without_a_plan_are_refused():
    journal = dataclasses.replace(JOURNAL, stray=("train-00001-of-00003", "train-00002-of-00003"))
    assert decide(None, journal, plan_of(), resume=True, overwrite=False) == Refuse(
        f"{DEST} holds an interrupted conversion of split 'train' (2 shard file(s) such as "
        "train-00001-of-00003 but no plan). Pass --resume (resume=True) to finish it, or --overwrite "
        "(overwrite=True) to start over."
    )


def test_the_plan_type_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan_of().n_items = 3  # type: ignore[misc]
    assert isinstance(plan_of(), ConvertPlan)


# ---- table shards read only their own files ----


def table_plan(tmp_path, sizes=(5, 7, 4), num_shards=3, **options):
    from tfpipe.convert.run import open_source

    folder = tmp_path / "t"
    folder.mkdir(exist_ok=True)
    row = 0
    for i, n in enumerate(sizes):
        (folder / f"p{i}.csv").write_text("x\n" + "".join(f"{row + j}\n" for j in range(n)))
        row += n
    cfg = ConvertConfig(chunk_rows=3, **options)
    source = open_source(str(folder), "csv", cfg, None)
    shard_cfg = ShardConfig(num_shards=num_shards)
    return make_plan(str(folder), str(tmp_path / "out"), source, shard_cfg, cfg, "csv", "given")


def test_a_table_shard_lists_only_the_files_that_hold_its_rows(tmp_path):
    plan = table_plan(tmp_path)
    assert [(t.first, t.count) for t in plan.shards] == [(0, 6), (6, 5), (11, 5)]
    assert [[(os.path.basename(p), start) for p, start in t.inputs.files] for t in plan.shards] == [
        [("p0.csv", 0), ("p1.csv", 5)],
        [("p1.csv", 5)],
        [("p1.csv", 5), ("p2.csv", 12)],
    ]
    pieces = [
        (p.first, p.work.frame["x"].tolist(), os.path.basename(p.work.where)) for p in plan.shards[2].pieces()
    ]
    assert pieces == [(11, [11], "p1.csv"), (12, [12, 13, 14], "p2.csv"), (15, [15], "p2.csv")]


def test_write_shard_refuses_a_table_that_lost_rows_since_the_plan(tmp_path):
    from tfpipe.convert.engine import write_shard

    plan = table_plan(tmp_path)
    (tmp_path / "t" / "p2.csv").write_text("x\n12\n")
    expected = r"train-00002-of-00003: expected the 5 inputs the plan gives this shard\. Received: 2; did"
    with pytest.raises(DataError, match=expected):
        write_shard(plan.shards[2])
    assert sorted(os.listdir(tmp_path / "out")) == []
    assert write_shard(plan.shards[0]).info.examples == 6


# ---- convert() takes configs as objects or as options ----


def test_configs_as_objects_or_options_give_the_same_pair():
    from tfpipe.convert.config import split_options

    shards, config = ShardConfig(num_shards=8, compression="gzip"), ConvertConfig(quality=80, workers=2)
    assert split_options({}, shards, config) == (shards, config)
    assert split_options({"num_shards": 8, "compression": "gzip", "quality": 80, "workers": 2}) == (
        shards,
        config,
    )
    assert split_options({"quality": 80, "workers": 2}, shards) == (shards, config)
    assert split_options({"num_shards": 8, "compression": "gzip", "shard_size": "1MiB"}, None, config)[
        0
    ] == ShardConfig(num_shards=8, compression="gzip", shard_size=1 << 20)


def test_an_option_given_in_a_config_and_as_a_keyword_is_refused():
    from tfpipe.convert.config import split_options
    from tfpipe.errors import ConfigError

    with pytest.raises(
        ConfigError,
        match=r"Expected each convert option once\. Received: shards=ShardConfig\("
        r".*num_shards=8.*\) and num_shards=4\. Set it in the ShardConfig",
    ):
        split_options({"num_shards": 4}, ShardConfig(num_shards=8))
    with pytest.raises(
        ConfigError,
        match=r"Received: config=ConvertConfig\(.*\) and quality=80, seed=1\. "
        r"Set them in the ConvertConfig",
    ):
        split_options({"quality": 80, "seed": 1}, None, ConvertConfig())
    with pytest.raises(
        ConfigError, match=r"^shards must be a ShardConfig or None\. Received: shards=ConvertConfig"
    ):
        split_options({}, ConvertConfig())


def test_convert_accepts_the_config_objects(tmp_path):
    import tfpipe

    (tmp_path / "t.csv").write_text("x,y\n" + "".join(f"{i},{i % 2}\n" for i in range(9)))
    m = tfpipe.convert(
        str(tmp_path / "t.csv"),
        str(tmp_path / "out"),
        tfpipe.ShardConfig(num_shards=2),
        tfpipe.ConvertConfig(label="y", workers=1),
    )
    assert [s.examples for s in m.splits["train"].shards] == [5, 4]
    assert m.schema.label == "y" and m.splits["train"].options["num_shards"] == 2

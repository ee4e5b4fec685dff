"""Every convert option against every kind of source: an option that does not apply to the
source is refused, naming the kind of source it applies to, never ignored in silence."""

import pandas as pd
import pyarrow as pa
import pyarrow.feather as feather
import pytest

from tfpipe.cli import main
from tfpipe.convert.config import applies_to
from tfpipe.testing import fake_data

from support.records import nothing_written

APPLIES_TO = applies_to()  # every modality's options, with the formats each applies to

SIZE = (16, 12)
# A value other than the default for every option that applies to some sources only.
FLAGS = {
    "resize_shorter": ["--resize-shorter", "8"],
    "quality": ["--quality", "80"],
    "check": ["--check", "header"],
    "strict": ["--strict"],
    "labels_file": ["--labels", "{labels}"],
    "label_offset": ["--label-offset", "1"],
    "seed": ["--seed", "3"],
    "label": ["--label", "y"],
    "missing": ["--missing", "fill"],
    "missing_label": ["--label", "y", "--missing-label", "drop"],
    "chunk_rows": ["--chunk-rows", "100"],
    "column_types": ["--column-type", "x=int"],
    "encoding": ["--encoding", "latin-1"],
    "null_values": ["--null-values", "NA"],
    "text_field": ["--text-field", "body"],
    "lines": ["--lines"],
    "tokenizer": ["--tokenizer", "{labels}"],
    "train_tokenizer": ["--train-tokenizer", "bpe", "--vocab-size", "64"],
    "vocab_size": ["--vocab-size", "64", "--train-tokenizer", "bpe"],
    "special_tokens": ["--special-tokens", "eos=[EOS]"],
}
KINDS = ("images", "imagenet_flat", "csv", "parquet", "arrow", "text")
FORMAT = {
    "images": "images",
    "imagenet_flat": "imagenet",
    "csv": "csv",
    "parquet": "parquet",
    "arrow": "arrow",
    "text": "text",
}


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("sources")
    fake_data.write_image_folder(root / "images", classes=2, per_class=1, size=SIZE, imagenet_names=False)
    fake_data.write_validation_flat(
        root / "imagenet_flat", root / "labels.txt", classes=2, count=2, size=SIZE
    )
    frame = pd.DataFrame({"x": [1, 2], "y": [0, 1]})
    frame.to_csv(root / "t.csv", index=False)
    frame.to_parquet(root / "t.parquet", index=False)
    feather.write_feather(pa.Table.from_pandas(frame, preserve_index=False), root / "t.feather")
    (root / "c.jsonl").write_text('{"text": "a few words"}\n{"text": "and a few more"}\n')
    paths = {"images": root / "images", "imagenet_flat": root / "imagenet_flat", "csv": root / "t.csv"}
    paths |= {"parquet": root / "t.parquet", "arrow": root / "t.feather", "text": root / "c.jsonl"}
    return paths | {"labels": root / "labels.txt"}


def test_every_option_with_a_limited_scope_has_a_flag_here():
    assert set(FLAGS) == set(APPLIES_TO)


CASES = [
    (option, kind)
    for option, formats in sorted(APPLIES_TO.items())
    for kind in KINDS
    if FORMAT[kind] not in formats or (option == "seed" and kind == "imagenet_flat")
]


@pytest.mark.parametrize("option,kind", CASES, ids=[f"{o}-{k}" for o, k in CASES])
def test_an_option_that_does_not_apply_to_the_source_is_refused_naming_where_it_applies(
    sources, tmp_path, capsys, option, kind
):
    flags = [f.format(labels=sources["labels"]) for f in FLAGS[option]]
    extra = (
        ["--labels", str(sources["labels"])] if kind == "imagenet_flat" and option != "labels_file" else []
    )
    dest = tmp_path / "out"
    fmt = ["--format", FORMAT[kind]]  # a tokenizer option alone would make the format text
    code = main(["convert", str(sources[kind]), str(dest), "--quiet", "--workers", "1", *fmt, *extra, *flags])
    err = capsys.readouterr().err
    assert code == 1, f"{option} on {kind} was accepted"
    flag = {"missing_label": "--missing-label", "vocab_size": "--vocab-size"}.get(option, flags[0])
    assert f"({flag}) applies to " in err, err
    assert nothing_written(dest)

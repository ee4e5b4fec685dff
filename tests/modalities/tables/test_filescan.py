"""The table's first pass one file at a time, folded in file order, equals the local engine's
single pass: the same TableScan, or the same error. No Beam needed: plain files and values."""

import numpy as np
import pandas as pd
import pytest

from tfpipe.convert.writer import files_holding
from tfpipe.errors import DataError
from tfpipe.modalities.tables.convert import filescan
from tfpipe.modalities.tables.convert import read as tables_read
from tfpipe.modalities.tables.convert import scan as tables_scan


def folder(tmp_path, frames):
    root = tmp_path / "csv"
    root.mkdir()
    for i, frame in enumerate(frames):
        frame.to_csv(root / f"part-{i}.csv", index=False)
    return str(root)


def by_files(src, chunk_rows=4, label=None, missing="fill", missing_label="error"):
    listing = tables_read.list_table(src, "csv")
    options = tables_scan.TableOptions(chunk_rows, label, missing, missing_label)
    scans = [filescan.scan_file(f, "csv", options, f == listing.files[0]) for f in listing.files]
    scan = filescan.merge(src, "csv", listing, scans, options)
    return scan, scans


CASES = {
    "ints then floats widen": [pd.DataFrame({"a": [1, 2, 3]}), pd.DataFrame({"a": [0.5, 1.5]})],
    "a file of nulls only": [
        pd.DataFrame({"a": [1, 2], "b": ["x", "y"]}),
        pd.DataFrame({"a": [np.nan, np.nan], "b": ["z", None]}),
    ],
    "text then numbers stays text": [pd.DataFrame({"a": ["x", "y"]}), pd.DataFrame({"a": [1, 2]})],
    "dropped null labels": [
        pd.DataFrame({"a": [1, 2, 3], "y": [0, None, 1]}),
        pd.DataFrame({"a": [4, 5], "y": [None, 1]}),
    ],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fold_equals_the_single_pass(tmp_path, case):
    src = folder(tmp_path, CASES[case])
    drop = {"label": "y", "missing_label": "drop"} if case == "dropped null labels" else {}
    options = tables_scan.TableOptions(4, drop.get("label"), "fill", drop.get("missing_label", "error"))
    local = tables_scan.scan(src, "csv", options)
    scan, scans = by_files(src, **drop)
    assert scan == local  # file_rows included: both engines place rows in shards alike
    assert sum(s.kept for s in scans) == local.rows


@pytest.mark.parametrize(
    "frames, message",
    [
        ([pd.DataFrame({"a": [1, 2]}), pd.DataFrame({"a": ["x", "y"]})], r"column 'a', row 0 holds 'x'"),
        ([pd.DataFrame({"a": [1, 2]}), pd.DataFrame({"b": [1, 2]})], r"expected columns \['a'\]"),
        ([pd.DataFrame({"a": [1, None]}), pd.DataFrame({"a": [3, 4]})], r"column 'a', row 1 .* is null"),
    ],
)
def test_a_conflict_gives_the_single_pass_error(tmp_path, frames, message):
    src = folder(tmp_path, frames)
    with pytest.raises(DataError, match=message) as local:
        tables_scan.scan(src, "csv", tables_scan.TableOptions(4))
    with pytest.raises(DataError) as folded:
        by_files(src, missing="error")
    assert str(folded.value) == str(local.value)


def test_files_holding_places_a_shard_in_the_files_that_hold_it():
    files, rows = ("a", "b", "c", "d"), (10, 0, 5, 7)
    assert files_holding(files, rows, 0, 10) == (("a", 0),)
    assert files_holding(files, rows, 8, 13) == (("a", 0), ("c", 10))
    assert files_holding(files, rows, 15, 22) == (("d", 15),)

"""The local engine's parts: the ordered map's in-process path, read-ahead, the header-checked copy."""

import os

import pandas as pd
import pytest

from tfpipe.convert.encode import Piece, copy_piece, encode_piece
from tfpipe.convert.engine import readahead
from tfpipe.convert.parallel import ordered_map
from tfpipe.format.schema import Field, Schema
from tfpipe.modalities.images.convert.encode import ImageItem, ImageTask
from tfpipe.modalities.tables.convert.encode import TableTask
from tfpipe.testing import fake_data


def in_worker(task):
    return ("worker", task, os.getpid())


def refuse(task):
    raise AssertionError(f"task {task} went to a worker")


def test_tasks_the_local_path_takes_never_start_a_worker():
    results = ordered_map(refuse, range(37), 2, local=lambda t: ("local", t))
    assert list(results) == [("local", t) for t in range(37)]


def test_local_and_worker_results_come_back_in_task_order():
    results = list(ordered_map(in_worker, range(37), 2, local=lambda t: ("local", t, 0) if t % 3 else None))
    assert [r[1] for r in results] == list(range(37))
    assert [r[0] for r in results] == ["worker" if t % 3 == 0 else "local" for t in range(37)]
    assert {r[2] for r in results if r[0] == "worker"} - {os.getpid()}  # really other processes
    assert list(ordered_map(in_worker, range(5), 1, local=lambda t: None)) == [in_worker(t) for t in range(5)]


def pulled_while(pieces):
    """The pieces and, for each, how many the reader had pulled when it was yielded."""
    pulled = []

    def source():
        for p in pieces:
            pulled.append(p)
            yield p

    return [(p, len(pulled)) for p in readahead(source(), files=40)]


def test_readahead_keeps_the_order_and_looks_about_so_many_files_ahead(tmp_path):
    paths = [str(tmp_path / f"{i}.jpg") for i in range(16 * 6)]
    for p in paths:
        open(p, "wb").close()
    pieces = [
        Piece(0, i, ImageTask(tuple(ImageItem(p, 0, "c") for p in paths[i : i + 16]), None, 90))
        for i in range(0, len(paths), 16)
    ]
    seen = pulled_while(pieces)
    assert [p for p, _ in seen] == pieces
    assert [n for _, n in seen] == [3, 4, 5, 6, 6, 6]  # 48 > 40 files asked for before the first is read


def test_readahead_passes_pieces_without_local_files_straight_on():
    frame = pd.DataFrame({"x": range(4)})
    schema = Schema((Field("x", "int64"),))
    tables = [Piece(0, i, TableTask(frame, i, schema, "t.csv")) for i in range(3)]
    gcs = [Piece(0, 0, ImageTask((ImageItem("gs://b/a.jpg", 0, "c"),), None, 90))]
    assert [n for _, n in pulled_while(tables + gcs)] == [1, 2, 3, 4]


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    root = tmp_path_factory.mktemp("copy")
    paths = fake_data.write_image_folder(root, classes=1, per_class=5, size=(64, 48))
    odd = fake_data.write_oddities(root / "odd", classes=1, generic=False)
    return paths, odd


def piece_of(paths, check="header", resize_shorter=None):
    return Piece(2, 10, ImageTask(tuple(ImageItem(p, 7, "n0") for p in paths), resize_shorter, 90, check))


def test_the_copy_writes_the_records_the_workers_would(images):
    paths, _ = images
    piece = piece_of(paths)
    assert copy_piece(piece) == encode_piece(piece)


@pytest.mark.parametrize("kind", ["cmyk", "grayscale", "png_as_jpeg", "truncated", "empty"])
def test_a_piece_with_an_image_the_header_check_cannot_pass_goes_to_a_worker(images, kind):
    paths, odd = images
    assert copy_piece(piece_of([*paths, odd[kind]])) is None


def test_only_the_header_check_of_images_that_need_no_resize_is_copied(images):
    paths, _ = images
    assert copy_piece(piece_of(paths, check="decode")) is None
    assert copy_piece(piece_of(paths, resize_shorter=32)) is None
    frame = pd.DataFrame({"x": range(4)})
    assert copy_piece(Piece(0, 0, TableTask(frame, 0, Schema((Field("x", "int64"),)), "t.csv"))) is None

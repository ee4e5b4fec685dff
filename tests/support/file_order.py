"""The order the test files run in: the longest first, so that no xdist process ends the run
alone on one long file (registered by tests/conftest.py).

`--dist loadfile` hands each process a whole file at a time, in the collection's order (the
pyproject's addopts turn xdist's own reordering, by number of tests, off). By that count, files
of a few long tests came last: a bench stopped at every stage, a model.fit killed and resumed,
the SIGKILLed tf.data service peers, and one process ran them for minutes after the other had
finished. Longest first, the short files fill in at the end.

A file weighs the seconds of its selected tests in SECONDS_FILE (so the fast lane and a `-k`
selection are ordered by what they run), a test not in it DEFAULT_SECONDS. The file is recorded
by `python benchmarks/suite_time.py full-n2 --rounds 1 --record` (quiet machine); a stale one
only balances worse, it never changes what runs. Within a file, its own order.
"""

from __future__ import annotations

import json
import pathlib

import pytest

SECONDS_FILE = pathlib.Path(__file__).parents[1] / "test_seconds.json"
# Most tests take milliseconds; a new slow one is found at the next recording.
DEFAULT_SECONDS = 0.05


def recorded() -> dict[str, float]:
    """{test id: seconds (setup + call + teardown)}, as recorded; empty without the file."""
    try:
        return json.loads(SECONDS_FILE.read_text())["seconds"]
    except FileNotFoundError:
        return {}


@pytest.hookimpl(trylast=True)  # after `-m` and `-k` have deselected
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Stably reorders `items`: files by their tests' recorded seconds, longest first."""
    seconds = recorded()
    weight: dict[str, float] = {}
    first: dict[str, int] = {}
    for i, item in enumerate(items):
        file = item.nodeid.split("::", 1)[0]
        weight[file] = weight.get(file, 0.0) + seconds.get(item.nodeid, DEFAULT_SECONDS)
        first.setdefault(file, i)
    order = {id(item): i for i, item in enumerate(items)}

    def key(item: pytest.Item) -> tuple[float, int, int]:
        file = item.nodeid.split("::", 1)[0]
        return (-weight[file], first[file], order[id(item)])

    items.sort(key=key)

"""Resumable orders written by hand, for the order's tests (tests/pipeline/order/): an `OrderSpec`
of files holding `counts` records, its other fields given or the smallest that work."""

from __future__ import annotations

import itertools

from tfpipe.pipeline.order.resumable import OrderSpec


def spec(counts, *, cycle=2, window=100, run=1, pipelines=1, index=0, by_record=False, seed=0) -> OrderSpec:
    first = list(itertools.accumulate(counts, initial=0))[:-1]
    return OrderSpec(
        seed=seed,
        files=tuple(f"f{i}" for i in range(len(counts))),
        sizes=(0,) * len(counts),
        counts=tuple(counts),
        first_ids=tuple(first),
        cycle=cycle,
        window=window,
        run=run,
        pipelines=pipelines,
        index=index,
        by_record=by_record,
        step_records=1,
        data="",
        global_batch=1,
    )

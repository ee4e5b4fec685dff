"""A report as the table and the plot show it, in one unit: examples, or the unit of the
pipeline's modality (`BenchHalf.view`: text's sequences and real tokens). The table and the plot
read the view, never which modality the report is of.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tfpipe.bench.fmt import rate
from tfpipe.bench.judge.report import Report
from tfpipe.modalities import modality_of_preset
from tfpipe.plural import counted


@dataclasses.dataclass(frozen=True)
class ReportView:
    """What the table and the plot show of a report.

    Attributes:
      unit, per: what the rates count ("examples", "real tokens") and what a share of the
        bottleneck is of ("example", "token").
      example: what a batch holds, as the summary says it ("example", "sequence").
      consumer: the consumer's rate; stages, stage_costs: each prefix's rate and CPU cost;
        scaling: (cores, rate, CPU cost) of each point; storage: the storage read's rate.
      rate_header, cost_header: the stage table's column heads; scaling_rate, scaling_cost: the
        scaling table's.
      data: what the data holds ("1,280 examples"); made: how generated data was made;
        batch: words after the batch; produced, cost, consumed: the producer's and the
        consumer's rates, the producer's cost, as the summary says them.
      consumer_label: words after the plot's consumer label.
      title, footer: lines added to the plot's title, and before its footer's.
      rows: the summary rows of the modality's section.
    """

    unit: str
    per: str
    example: str
    consumer: float
    stages: list[float]
    stage_costs: list[float]
    scaling: list[tuple[int, float, float]]
    storage: float | None
    rate_header: str
    cost_header: str
    scaling_rate: str
    scaling_cost: str
    data: str
    made: str
    batch: str
    produced: str
    cost: str
    consumed: str
    consumer_label: str = ""
    title: tuple[str, ...] = ()
    footer: tuple[str, ...] = ()
    rows: tuple[tuple[str, Any], ...] = ()


def view(report: Report) -> ReportView:
    """The report's view: its modality's (`BenchHalf.view`), or in examples."""
    made: ReportView | None = modality_of_preset(report.pipeline).bench.view(report)
    return made if made is not None else examples(report)


def examples(report: Report) -> ReportView:
    """The view in examples: every rate and cost as measured."""
    p, c, st = report.producer, report.consumer, report.storage
    return ReportView(
        unit="examples",
        per="example",
        example="example",
        consumer=c.examples_per_sec,
        stages=[s.rate.examples_per_sec for s in report.stages],
        stage_costs=[s.rate.cpu_ms_per_example for s in report.stages],
        scaling=[(pt.cores, pt.examples_per_sec, pt.cpu_ms_per_example) for pt in report.scaling],
        storage=st.examples_per_sec if st is not None else None,
        rate_header="examples\n/s",
        cost_header="CPU\nms/ex",
        scaling_rate="examples/s",
        scaling_cost="CPU ms/ex",
        data=counted(report.dataset.examples, "example"),
        made=", synthetic",
        batch="",
        produced=f"{rate(p.examples_per_sec)} examples/s ({p.elements_per_sec:,.2f} batches/s)",
        cost=f"{p.cpu_ms_per_example:.3f} CPU ms per example",
        consumed=f"{rate(c.examples_per_sec)} examples/s",
    )

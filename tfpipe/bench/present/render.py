"""Rich renderables for a Report. They build tables; the CLI decides where to print them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tfpipe.bench.fmt import cores as fmt_cores
from tfpipe.bench.fmt import figure, human_bytes, percent, rate
from tfpipe.bench.judge.host import sentence as host_sentence
from tfpipe.bench.judge.report import Report
from tfpipe.bench.judge.verdict import Bottleneck
from tfpipe.bench.present.view import view
from tfpipe.bench.results import FitCheck, Simulation
from tfpipe.bench.wait import verdict_detail, verdict_title
from tfpipe.format.jsonobject import JsonObject
from tfpipe.plural import counted

if TYPE_CHECKING:
    from rich.console import RenderableType  # rich is imported where a table is built
    from rich.table import Table

# The verdict's colour in the terminal (yellow when the run cannot tell); its words are wait's.
_COLOR = {"not_input_bound": "green", "moderately_input_bound": "yellow", "highly_input_bound": "red"}


def renderables(report: Report) -> list[RenderableType]:
    """The terminal view: summary, stage prefixes, scaling, and recommendations."""
    from rich import box
    from rich.panel import Panel
    from rich.table import Table

    summary = Table(box=box.SIMPLE_HEAVY, show_header=False, pad_edge=False)
    summary.add_column(style="bold")
    summary.add_column(overflow="fold")  # a path or URL longer than the cell folds, never cut
    backend = backend_sentence(report.environment)
    rows = (
        _measured_rows(report)
        + ([("Backend", backend)] if backend else [])
        + _profile_rows(report)
        + _verdict_rows(report)
        + _host_rows(report)
        + list(view(report).rows)  # the section of the report's modality (text's)
        + _check_rows(report)
    )
    for label, value in rows:
        summary.add_row(label, value)
    color = _color(report)
    return [
        Panel(summary, title="tfpipe bench", border_style=color),
        *_in_full(report),
        _stage_table(report),
        _scaling_table(report),
        _recommendations(report),
    ]


# Paths and URLs longer than this are printed again in full below the summary, on lines of
# their own that the terminal wraps, so they copy whole (a table cell folds them with borders).
_LONG = 40


class WholeLine(str):
    """A line to print as it is, however wide the terminal (`Console.print(line,
    soft_wrap=True, markup=False)`): the terminal wraps it, so it is selected and copied whole."""


def _in_full(report: Report) -> list[WholeLine]:
    """The long paths and URLs of the summary, each on one line that is never cut or folded."""
    named = [("dataset", report.dataset.path), ("consumer source", report.consumer.url or "")]
    if report.profile is not None:
        named.append(("profile", report.profile.path))
    return [WholeLine(f"{what}: {value}") for what, value in named if len(value) > _LONG]


def _measured_rows(report: Report) -> list[tuple[str, RenderableType]]:
    """Summary rows: the data, the batch, the producer and the consumer."""
    from rich.markup import escape
    from rich.text import Text

    ds, v = report.dataset, view(report)
    data = (
        f"{escape(ds.path)} ({v.data}, {counted(ds.shards, 'shard')}, {human_bytes(ds.bytes)}"
        + (v.made if ds.synthetic else "")
        + (f", generated in {ds.generated_sec:.1f} s" if ds.generated_sec else "")
        + ")"
    )
    batch = (
        f"{report.batch_size}"
        + (
            f" global = {report.per_host_batch_size} per host x {report.hosts} hosts"
            if report.hosts > 1
            else ""
        )
        + v.batch
    )
    p, c = report.producer, report.consumer
    produced, cost, consumed = v.produced, v.cost, v.consumed
    rows: list[tuple[str, RenderableType]] = [
        ("Data", data),
        ("Batch", batch),
        (
            "Producer",
            f"{produced} steady state{_windows(report)}, {cost}, {p.cores_busy:.1f} cores busy; "
            f"first batch after {p.first_element_sec:.2f} s, {p.warmup_sec:.1f} s warm-up excluded",
        ),
        (
            "Consumer",
            f"{consumed} ({c.step_time_ms:,.1f} ms/step) - {escape(c.description)}"
            + (" (approximate)" if c.approximate else ""),
        ),
    ]
    if c.url:
        rows.append(("", Text(c.url, style="dim")))
    if report.storage is not None:
        rows += _storage_rows(report)
    return rows


def _windows(report: Report) -> str:
    """The producer's windows, when it has two: " over two windows (374/s and 735/s)"."""
    if len(report.windows) < 2:
        return ""
    unit = f"{view(report).example}s"
    return (
        f" over two windows ({' and '.join(f'{rate(w.examples_per_sec)} {unit}/s' for w in report.windows)})"
    )


def backend_sentence(env: JsonObject) -> str:
    """Which Keras backend a model runs on and which TensorFlow runs tf.data ("" when the report
    does not say: written before schema_minor_version 1)."""
    backend = env.get("keras_backend")
    if not backend:
        return ""
    tf = f"TensorFlow {env.get('tensorflow')}"
    if backend == "tensorflow":
        return f"Keras {env.get('keras')} on {tf}"
    on = f"JAX {env.get('jax')}" if backend == "jax" else backend
    return f"Keras {env.get('keras')} on {on}; tf.data on {tf}"


def _storage_rows(report: Report) -> list[tuple[str, RenderableType]]:
    """Summary rows: what reading without a cache gives, and the first epoch's rate."""
    s = report.storage
    assert s is not None
    where = "gs://" if s.location == "gcs" else "local files"
    unit = view(report).example + "s"  # text: sequences
    text = f"{where}, read without a cache: {rate(s.examples_per_sec)} {unit}/s"
    if s.mb_per_sec is not None:
        text += f" = {figure(s.mb_per_sec)} MB/s"
    if s.requests_per_sec is not None:
        text += f", ~{figure(s.requests_per_sec)} requests/s (estimated: one GET per 64 MiB block)"
    if s.needed_mb_per_sec is not None:
        text += f"; the consumer needs {figure(s.needed_mb_per_sec)} MB/s"
    rows: list[tuple[str, RenderableType]] = [("Storage", text)]
    if s.first_epoch_examples_per_sec is not None:
        rows.append(
            (
                "First epoch",
                f"{rate(s.first_epoch_examples_per_sec)} {unit}/s while it fills the {s.cache} cache "
                "from storage; the steady state above reads the cache",
            )
        )
    return rows


def profile_sentences(report: Report) -> tuple[str, str] | None:
    """The measured and the predicted input wait side by side, for a --from-profile report:
    what the Profiler measured on the user's run, and what tfpipe predicts for its pipeline."""
    p = report.profile
    if p is None:
        return None
    measured = (
        f"Your profiled run waited {percent(p.input_wait)} of each step for input (measured by the Profiler)."
    )
    predicted = (
        f"tfpipe's pipeline on this host makes {rate(report.producer.examples_per_sec)}/s against the "
        f"{rate(report.consumer.examples_per_sec)}/s the accelerator takes when fed: predicted wait "
        f"{percent(report.predicted_input_wait)} ({_lower(headline(report))})."
    )
    return measured, predicted


def _profile_rows(report: Report) -> list[tuple[str, RenderableType]]:
    """Summary rows for --from-profile: the Profiler's figures and the prediction beside them."""
    from rich.markup import escape
    from rich.text import Text

    sentences = profile_sentences(report)
    if sentences is None or report.profile is None:
        return []
    p = report.profile
    where = escape(p.path) + (f", run {escape(p.run)}" if p.run else "")
    if len(p.runs) > 1:
        where += f" (newest of {len(p.runs)})" if p.run == p.runs[-1] else f" (of {len(p.runs)})"
    cores = f", {counted(p.cores, 'core')}" if p.cores else ""
    hosts = f", {len(p.hosts)} hosts" if len(p.hosts) > 1 else ""
    detail = (
        f"{escape(p.device)}{cores}{hosts}: {p.steps} steps of {p.step_time_ms:,.1f} ms mean "
        f"({p.step_time_min_ms:,.1f}-{p.step_time_max_ms:,.1f} ms, sd {p.step_time_std_ms:,.1f}); "
        f"{escape(p.format)}; {where}"
    )
    rows: list[tuple[str, RenderableType]] = [
        ("Profiled run", Text(sentences[0], style="bold")),
        ("", detail),
    ]
    for d in p.dropped:
        rows.append(
            (
                "",
                Text(
                    f"Dropped step {d.step} of {d.host} ({d.step_ms:,.2f} ms): a partial last step, "
                    f"shorter than half the median step ({d.median_ms:,.1f} ms)",
                    style="yellow",
                ),
            )
        )
    if p.conclusion:
        rows.append(("", Text(f"The Profiler: {p.conclusion}", style="dim")))
    rows.append(("Predicted", Text(sentences[1], style="bold")))
    return rows


def _lower(title: str) -> str:
    return title[0].lower() + title[1:]


def _color(report: Report) -> str:
    """The verdict's colour; yellow, the colour of doubt, when the run cannot tell."""
    return _COLOR[report.verdict] if report.certain else "yellow"


def headline(report: Report) -> str:
    """The verdict's title, carrying the same doubt as the JSON's `certain`: "Highly
    input-bound", "Cannot tell moderately from highly input-bound", "... on this busy host
    (cannot tell)"."""
    return verdict_title(report.predicted_input_wait, report.predicted_input_wait_interval)


def bottleneck_sentence(b: Bottleneck, unit: str = "example") -> str:
    """The bottleneck row: the stage and its share, ranked by time or, where throughput
    disagrees with CPU cost, by CPU; or that the measurement is too noisy to name one."""
    harness = (
        f" ({', '.join(b.harness)} ran slower than a longer prefix: the cost of timing "
        f"{'it' if len(b.harness) == 1 else 'them'} alone, which training does not pay)"
        if b.harness
        else ""
    )
    if b.basis == "noisy":
        return (
            "too noisy to name one: the prefixes' throughput and their CPU cost per "
            f"{unit} rank the stages differently, and no stage's CPU cost stands out{harness}"
        )
    if b.basis == "cpu":
        return (
            f"{b.stage}: {b.share:.0%} of the CPU per {unit} ({b.ms_per_example:.3f} CPU ms), "
            f"ranked by CPU cost because throughput disagrees{harness}"
        )
    return (
        f"{b.stage}: {b.share:.0%} of the time per {unit} ({b.ms_per_example:.3f} ms), "
        f"throughput falls {b.drop:.0%} at this prefix{harness}"
    )


def _verdict_rows(report: Report) -> list[tuple[str, RenderableType]]:
    """Summary rows: the verdict, the bottleneck, cores (from the scaling curve and from CPU
    cost, and why they differ when they do) and tf.data service workers needed."""
    from rich.text import Text

    color = _color(report)
    verdict = Text(headline(report).upper(), style=f"bold {color}")
    detail = verdict_detail(report.predicted_input_wait, report.predicted_input_wait_interval)
    verdict.append(f"  predicted {detail}", style=color)
    if report.measured_input_wait is not None:
        verdict.append(f"; measured {report.measured_input_wait:.1%} ({report.measured_by})", style="bold")
    b, cpu, sv = report.bottleneck, report.cpu_cores, report.service
    unit = view(report).example  # text: sequence
    rows: list[tuple[str, RenderableType]] = [
        ("Verdict", verdict),
        ("Bottleneck", bottleneck_sentence(b, unit)),
        ("Cores needed", curve_cores_sentence(report)),
        (
            "",
            f"{fmt_cores(cpu.cores)} per host from CPU cost ({cpu.cpu_ms_per_example:.3f} CPU ms per {unit} "
            f"x {rate(report.consumer.examples_per_sec)} {unit}s/s)",
        ),
    ]
    if cpu.disagreement:
        rows.append(("Cores check", Text(cpu.disagreement, style="yellow")))
    rows.append(
        (
            "tf.data service",
            f"{counted(sv.workers, 'worker')} of {counted(sv.worker_cores, 'core')} (~{rate(sv.worker_eps)}/s each) "
            f"for {rate(sv.demand_eps)}/s across {counted(report.hosts, 'host')}",
        )
    )
    return rows


def curve_cores_sentence(report: Report) -> str:
    """The cores the scaling curve says a host needs; what was measured instead, when the
    curve does not rise and the consumer needs more than it reached."""
    cores = report.cores
    if cores.cores is None:
        return (
            f"not from the scaling curve: it does not rise with cores ({measured_curve(report)}), "
            f"so it cannot be extrapolated to the {rate(report.consumer.examples_per_sec)}/s the consumer takes"
        )
    return (
        f"~{cores.cores} per host from the scaling curve ({cores.available} measured here, "
        f"{rate(cores.per_core_eps)}/s per core, "
        f"{cores.efficiency:.0%} efficiency{', extrapolated' if cores.extrapolated else ''})"
    )


def measured_curve(report: Report) -> str:
    """The scaling curve as measured: "972/s on 1 core, 565/s on 2"."""
    return ", ".join(
        f"{rate(p.examples_per_sec)}/s on {p.cores}" + (" core" if i == 0 and p.cores == 1 else "")
        for i, p in enumerate(report.scaling)
    )


def _host_rows(report: Report) -> list[tuple[str, RenderableType]]:
    """The host's load beside the run, and whether it makes the figures unreliable."""
    from rich.text import Text

    if report.host is None:
        return []
    said = host_sentence(report.host)
    style = "bold yellow" if report.host.busy else ("yellow" if report.host.simulation_busy else "")
    return [("Host", Text(said, style=style))]


# Measured for issue 34 (benchmarks/verdict_agreement.py --fit): small_cnn on this 2-core CPU
# waited 53% in model.fit against 15% predicted, its train step taking the producer's cores.
CPU_FIT_NOTE = (
    "The model trained on this host's CPU, on the cores the producer was timed on alone: the "
    "pipeline ran slower beside it, so model.fit's wait includes that competition and bench's "
    "prediction does not. On an accelerator the model leaves the host's cores to the pipeline."
)


def fit_sentence(f: FitCheck, predicted: float) -> str:
    """--fit's row: the wait the monitor measured in model.fit, then the differential method
    and what separates them."""
    low, high = f.input_wait_low, f.input_wait_high
    interval = "" if low is None or high is None else f" [{100 * low:.0f}, {100 * high:.0f}]"
    text = (
        f"{f.model} on {f.device}: {f.real_step_ms:.1f} ms/step on the pipeline, {f.measured_input_wait:.1%}"
        f"{interval} of it waiting for its batch (measured in fit by tfpipe.monitor); bench predicted "
        f"{predicted:.1%} for this consumer"
    )
    if f.differential_input_wait is None:  # a report written before schema_minor_version 6
        return text
    return (
        f"{text}. On synthetic input {f.synthetic_step_ms:.1f} ms/step: the differential method reads "
        f"{f.differential_input_wait:.1%}, of which {100 * (f.contention or 0.0):.1f} points are the model "
        "computing slower on the cores the pipeline shares"
    )


def short_step_sentence(s: Simulation) -> str:
    """Why a simulation whose consumer could not keep its step checks no prediction."""
    return (
        f"Cannot simulate steps of {s.step_time_ms:.1f} ms here: the simulated consumer's steps took "
        f"{s.consumer_step_ms:.1f} ms without waiting, since taking a batch from Python (the call, the "
        "GIL, the sleep) costs that much in this process. Its wait is for that slower consumer, so "
        "it is not reported as the measured wait; --fit measures a real model.fit instead."
    )


def _check_rows(report: Report) -> list[tuple[str, RenderableType]]:
    """Summary rows for the optional runs: --simulate, --fit, --compare, --profile."""
    from rich.text import Text

    rows: list[tuple[str, RenderableType]] = []
    if report.simulation is not None:
        s = report.simulation
        rows.append(
            (
                "Simulation",
                f"consumer sleeping {s.step_time_ms:.1f} ms/step: waited {s.measured_input_wait:.1%} "
                f"of {s.window_sec:.1f} s ({s.steps} steps); predicted {s.predicted_input_wait:.1%} from "
                f"{rate(s.producer_examples_per_sec)} examples/s measured in alternating phases",
            )
        )
        if not s.holds_step:
            rows.append(("", Text(short_step_sentence(s), style="yellow")))
    if report.fit is not None:
        rows.append(("model.fit", fit_sentence(report.fit, report.predicted_input_wait)))
        if report.fit.device == "CPU":
            rows.append(("", Text(CPU_FIT_NOTE, style="yellow")))
    if report.comparison is not None:
        cmp = report.comparison
        rows.append(
            (
                "Compare",
                f"tfpipe {rate(cmp.tfpipe_examples_per_sec)}/s vs the baseline pipeline (tensorflow/tpu-style) "
                f"{rate(cmp.baseline_examples_per_sec)}/s: ratio {cmp.ratio:.2f}x",
            )
        )
    if report.profile_dir:
        rows.append(("Profile", f"{report.profile_dir} (tensorboard --logdir {report.profile_dir})"))
    return rows


def _stage_table(report: Report) -> Table:
    from rich import box
    from rich.table import Table

    v = view(report)
    table = Table(title="Stage prefixes (same stage list build() uses)", box=box.SIMPLE)
    # Headers of two short lines, figures that never wrap, and stage names that wrap at their
    # commas (or fold, never cut): the table reads whole in an 80-column terminal.
    table.add_column("prefix", no_wrap=True)
    table.add_column("adds stages", overflow="fold", ratio=1)
    for header in (v.rate_header, "vs\nconsumer", v.cost_header, "cores\nbusy", "first\nelement"):
        table.add_column(header, justify="right", no_wrap=True)
    consumer = report.consumer.examples_per_sec
    for s, eps, cost in zip(report.stages, v.stages, v.stage_costs, strict=True):
        table.add_row(
            s.name,
            ", ".join(s.stages),
            rate(eps),
            f"{s.rate.examples_per_sec / consumer:.2f}x",
            f"{cost:.3f}",
            f"{s.rate.cores_busy:.1f}",
            f"{s.rate.first_element_sec:.2f} s",
            style="bold red" if s.name == report.bottleneck.stage else "",
        )
    return table


def _scaling_table(report: Report) -> Table:
    from rich import box
    from rich.table import Table

    v = view(report)
    table = Table(title="Scaling with cores (tf.data private threadpool)", box=box.SIMPLE)
    table.add_column("cores", justify="right")
    table.add_column(v.scaling_rate, justify="right")
    table.add_column("per core", justify="right")
    table.add_column(v.scaling_cost, justify="right")
    table.add_column("cores busy", justify="right")
    same = [pt.cores for pt in report.scaling if pt.examples_per_sec == report.producer.examples_per_sec]
    captions = []
    if same:
        windows = "its two windows" if len(report.windows) > 1 else "the same measurement"
        captions.append(f"{same[0]} cores: the producer's own rate (build()'s threadpool), {windows}")
    if not report.cores.rises and len(report.scaling) > 1:
        captions.append(
            "The rate does not rise with cores here: what was measured, not a curve to extrapolate"
        )
    if captions:
        table.caption = "\n".join(captions)
    for pt, (_, eps, cost) in zip(report.scaling, v.scaling, strict=True):
        table.add_row(str(pt.cores), rate(eps), rate(eps / pt.cores), f"{cost:.3f}", f"{pt.cores_busy:.1f}")
    return table


def _recommendations(report: Report) -> RenderableType:
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="Recommendations", box=box.SIMPLE, show_lines=True)
    table.add_column("finding", ratio=1)
    table.add_column("do", ratio=1)
    for r in report.recommendations:
        table.add_row(escape(r.finding), escape(r.action))
    return table

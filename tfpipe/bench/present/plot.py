"""The bench picture: stage throughputs against the consumer, and the scaling curve, in the
unit of the report's view (`view.ReportView`: examples, or text's real tokens)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from tfpipe import storage
from tfpipe.bench.fmt import figure, percent, rate_short
from tfpipe.bench.judge.report import Report
from tfpipe.bench.judge.verdict import rate_at
from tfpipe.bench.present.output import plot_format
from tfpipe.bench.present.render import headline, profile_sentences
from tfpipe.bench.present.view import view
from tfpipe.errors import ConfigError

if TYPE_CHECKING:
    from matplotlib.axes import Axes  # matplotlib is imported where a plot is drawn

_OK, _SLOW, _WORST, _CONSUMER = "#4C9F70", "#8DA0CB", "#E4572E", "#222222"


def write_plot(report: Report, path: str) -> str:
    """Writes a plot with two panels to `path` (local or gs://, atomically) and returns it, in
    the format its extension names (`output.PLOT_FORMATS`: PNG, JPEG, SVG or PDF).

    Left: each stage prefix's throughput as a bar, the bottleneck highlighted, and the
    consumer's rate as a vertical line. Right: throughput against cores, the ideal linear
    scaling from one core, the consumer line, and the cores needed to reach it.

    Raises:
      ConfigError: an extension that names another format, or a consumer rate that is not finite.
    """
    import io
    import textwrap

    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib import pyplot as plt

    fmt = plot_format(path)
    consumer = report.consumer.examples_per_sec
    if not math.isfinite(consumer):
        raise ConfigError(f"The consumer rate must be finite to plot. Received: {consumer}")
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5.2), gridspec_kw={"width_ratios": [1.25, 1]})
    title = _title(report)
    fig.suptitle(title, fontsize=13, fontweight="bold")
    _stage_panel(ax1, report)
    _scaling_panel(ax2, report)
    source = report.consumer.description + (" - approximate" if report.consumer.approximate else "")
    lines = [textwrap.shorten(f"Consumer: {source}", 190, placeholder=" ...")]
    if report.profile is not None:
        lines = [*(profile_sentences(report) or ()), *lines]
    lines = [*view(report).footer, *lines]
    fig.text(0.01, 0.01, "\n".join(lines), fontsize=8, color="#444444")
    # Room below for the footer lines, above for a two-line title.
    fig.tight_layout(rect=(0, 0.025 * (len(lines) + 0.2), 1, 0.95 - 0.02 * title.count("\n")))
    data = io.BytesIO()
    fig.savefig(data, format=fmt, dpi=110)
    storage.write_atomic(path, data.getvalue(), overwrite=True)
    plt.close(fig)
    return path


# Characters in a line of the title at its font size: the figure is 13 inches wide.
TITLE_WIDTH = 105


def _title(report: Report) -> str:
    """The verdict as the terminal's headline says it, with the same doubt, and its figures."""
    import textwrap

    i = report.predicted_input_wait_interval
    interval = "" if i is None else f" [{100 * i.low:.0f}, {100 * i.high:.0f}]"
    title = textwrap.fill(
        f"{headline(report)}: predicted {report.predicted_input_wait:.0%}{interval} of step time "
        f"waiting for input ({report.pipeline}, batch {report.per_host_batch_size}/host)",
        TITLE_WIDTH,
    )
    if report.host is not None and report.host.busy:
        title += "\nthe host was busy while it was measured: these figures are unreliable for a quiet host"
    if report.measured_input_wait is not None:
        title += f" - measured {report.measured_input_wait:.0%} ({report.measured_by})"
    if report.profile is not None:
        title += f"\nyour profiled run waited {percent(report.profile.input_wait)} (measured by the Profiler)"
    return "".join([title, *(f"\n{line}" for line in view(report).title)])


def _consumer_label(report: Report) -> str:
    label = "accelerator when fed (profile)" if report.consumer.source == "profile" else "consumer"
    return label + view(report).consumer_label


def _unit(report: Report) -> str:
    return view(report).unit


def _consumer_rate(report: Report) -> float:
    """The consumer line: examples/s, or in the modality's unit (text: the real tokens/s it
    takes at the fill)."""
    return view(report).consumer


def _stage_rates(report: Report) -> list[float]:
    return view(report).stages


def _scaling_points(report: Report) -> list[tuple[int, float]]:
    return [(cores, eps) for cores, eps, _ in view(report).scaling]


def _stage_panel(ax1: Axes, report: Report) -> None:
    """Stage prefixes as bars, top to bottom in pipeline order, against the consumer line."""
    consumer = _consumer_rate(report)
    labels, values, colors, notes = [], [], [], []
    st = report.storage
    if st is not None and st.cached:
        # The read prefix below reads the cache; this bar is what the storage itself gives.
        read = view(report).storage or 0.0
        labels.append(f"storage\nread without the {st.cache} cache")
        values.append(read)
        colors.append(_OK if read >= consumer else _SLOW)
        notes.append(_mb(st.mb_per_sec))
    for i, (s, eps) in enumerate(zip(report.stages, _stage_rates(report), strict=True)):
        labels.append(("" if i == 0 else "+ ") + s.name + "\n" + ", ".join(s.stages))
        values.append(eps)
        notes.append(_mb(st.mb_per_sec) if i == 0 and st is not None and not st.cached else "")
        if s.name == report.bottleneck.stage:
            colors.append(_WORST)
        else:
            colors.append(_OK if eps >= consumer else _SLOW)
    y = list(range(len(values)))[::-1]
    ax1.barh(y, values, color=colors, height=0.6)
    ax1.set_yticks(y, labels, fontsize=9)
    top = max([*values, consumer]) if values else consumer
    low = min([*values, consumer]) if values else consumer
    log = top / max(low, 1e-9) > 30
    if log:
        ax1.set_xscale("log")
        ax1.set_xlim(low / 3, top * 4)
    else:
        ax1.set_xlim(0, top * 1.3)
    for yi, v, note in zip(y, values, notes, strict=True):
        x = v * (1.08 if log else 1.0) + (0 if log else top * 0.01)
        ax1.text(x, yi, rate_short(v) + note, va="center", fontsize=9)
    ax1.axvline(consumer, color=_CONSUMER, linestyle="--", linewidth=1.6)
    ax1.text(
        consumer,
        len(values) - 0.45,
        f" {_consumer_label(report)} {rate_short(consumer)}/s",
        fontsize=9,
        ha="left",
        va="bottom",
        color=_CONSUMER,
    )
    ax1.set_ylim(-0.6, len(values) - 0.1)
    ax1.set_xlabel(f"{_unit(report)} / second" + (" (log scale)" if log else ""))
    ax1.set_title(
        f"Throughput by stage prefix - bottleneck: {report.bottleneck.stage or 'too noisy to name'} "
        f"({report.bottleneck.share:.0%} of time per {view(report).per})",
        fontsize=10,
    )
    ax1.grid(axis="x", alpha=0.3)


def _mb(mb_per_sec: float | None) -> str:
    return "" if mb_per_sec is None else f" ({figure(mb_per_sec)} MB/s)"


def _scaling_panel(ax2: Axes, report: Report) -> None:
    """Throughput against cores, extended to where the extrapolation meets the consumer."""
    from matplotlib.ticker import MaxNLocator

    consumer = _consumer_rate(report)
    points = _scaling_points(report)
    cores = [c for c, _ in points] or [1]
    rates = [r for _, r in points] or [1.0]
    needed = report.cores.cores or 0
    shown = needed if needed <= max(32, 4 * max(cores)) else 4 * max(cores)
    x_max = max(max(cores), shown, 2)
    curve_top = max(max(rates), rate_at(x_max, points) if points else 0.0)
    # A consumer far above anything the curve reaches would flatten it: use a log axis then.
    log_y = consumer > 10 * curve_top
    x0 = 0.5 if log_y else 0.0
    ax2.plot(cores, rates, "o-", color=_OK, linewidth=2.2, markersize=7, label="measured", zorder=3)
    if points:
        one = points[0][1] / points[0][0]
        ax2.plot([x0, x_max], [one * x0, one * x_max], ":", color="#888888", label="linear from 1 core")
        if needed > max(cores):
            xs = [max(cores), x_max]
            ax2.plot(xs, [rate_at(x, points) for x in xs], "--", color=_OK, alpha=0.7, label="extrapolated")
        for c, r in points:
            ax2.annotate(
                rate_short(r), (c, r), textcoords="offset points", xytext=(-4, 9), ha="right", fontsize=9
            )
    ax2.axhline(
        consumer,
        color=_CONSUMER,
        linestyle="--",
        linewidth=1.6,
        label=f"{_consumer_label(report)} {rate_short(consumer)}/s",
    )
    if needed:
        _cores_needed_note(ax2, report, shown, x_max)
    elif report.cores.cores is None:
        ax2.text(
            0.97,
            0.06,
            "cores needed: not extrapolated\n(the rate does not rise with cores)",
            color=_WORST,
            fontsize=10,
            ha="right",
            va="bottom",
            transform=ax2.transAxes,
        )
    ax2.set_xlim(0, x_max * 1.05)
    ax2.xaxis.set_major_locator(MaxNLocator(integer=True))
    if log_y:
        ax2.set_yscale("log")
        ax2.set_ylim(min(rates) / 3, consumer * 3)
    else:
        ax2.set_ylim(0, max(curve_top, consumer) * 1.2)
    ax2.set_xlabel("CPU cores (tf.data private threadpool)")
    ax2.set_ylabel(f"{_unit(report)} / second" + (" (log scale)" if log_y else ""))
    ax2.set_title(_scaling_title(report, points), fontsize=10)
    ax2.grid(alpha=0.3)
    ax2.legend(loc="center left" if needed > max(cores) else "upper left", fontsize=8)


def _scaling_title(report: Report, points: list[tuple[int, float]]) -> str:
    """The per-core rate and efficiency of a curve that rises; what was measured of one that
    does not, which nothing is extrapolated from."""
    if not report.cores.rises and len(points) > 1:
        measured = ", ".join(f"{rate_short(r)}/s on {c}" for c, r in points)
        return f"Scaling: {measured} - does not rise, not extrapolated"
    return (
        f"Scaling: {points[0][1] / points[0][0] if points else 0:,.0f}/s per core, "
        f"{report.cores.efficiency:.0%} efficiency"
    )


def _cores_needed_note(ax2: Axes, report: Report, shown: int, x_max: float) -> None:
    """Marks the cores needed at x = needed, or says it lies off the chart (past `shown`)."""
    needed = report.cores.cores
    note = f"~{needed} cores needed" + (" (extrapolated)" if report.cores.extrapolated else "")
    if needed == shown:
        ax2.axvline(needed, color=_WORST, linestyle="-.", linewidth=1.4)
        ax2.text(
            needed - 0.02 * x_max,
            0.62,
            note.replace(" (", "\n("),
            color=_WORST,
            fontsize=10,
            fontweight="bold",
            ha="right",
            va="center",
            transform=ax2.get_xaxis_transform(),
            bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.85},
        )
    else:
        ax2.text(
            0.97,
            0.5,
            f"{note}:\noff the chart",
            color=_WORST,
            fontsize=10,
            fontweight="bold",
            ha="right",
            va="center",
            transform=ax2.transAxes,
        )

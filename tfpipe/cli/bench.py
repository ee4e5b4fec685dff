"""`tfpipe bench`: is training input-bound? Parses flags, calls `tfpipe.bench`, renders."""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import TYPE_CHECKING, Any

from tfpipe import storage
from tfpipe.bench import BenchConfig, bench, reference
from tfpipe.bench.config import MIN_STEP_TIME_MS, check_step_time_ms, models, pipelines
from tfpipe.bench.present.output import check_json_name, check_writable, plot_format
from tfpipe.cli import add_common, render  # render.console is read when a bench runs
from tfpipe.errors import ConfigError
from tfpipe.packing import MODES

if TYPE_CHECKING:
    from rich.console import Console

    from tfpipe.bench import BenchConfig, Report

EXAMPLES = """examples:
  tfpipe bench --pipeline=imagenet                     # generated data vs a TPU v4 host
  tfpipe bench --from-profile gs://bucket/logs --data gs://bucket/imagenet --batch-size 1024 --hosts 4
  tfpipe bench --data gs://bucket/imagenet --step-time-ms 95 --batch-size 1024 --hosts 4
  tfpipe bench --accelerator resnet50-tpu-v4 --simulate --plot bench.png --json bench.json
  tfpipe bench --model small_cnn --fit --batch-size 64
  tfpipe bench --compare                               # tensorflow/tpu-style baseline vs tfpipe
  tfpipe bench --pipeline=text                         # Python's own docstrings vs a TPU v4 host
  tfpipe bench --data gs://bucket/corpus --sequence-length 2048 --packing none --accelerator gpt3-175b-tpu-v5p
  tfpipe bench --data web=gs://bucket/web --data code=gs://bucket/code --weights web=0.7,code=0.3
  tfpipe bench --fail-if-input-bound --step-time-ms 200   # in CI: exit 3 unless it keeps up

Example: tfpipe bench --pipeline=imagenet
"""

EXIT_INPUT_BOUND = 3


def _step_time(text: str) -> float:
    try:
        return check_step_time_ms(text)
    except ConfigError:
        raise argparse.ArgumentTypeError(
            f"must be a number of milliseconds >= {MIN_STEP_TIME_MS:g} (one training step; no "
            f"accelerator step is shorter). Received: {text!r}"
        ) from None


def _positive(kind: type) -> object:
    def parse(text: str) -> object:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"must be a positive {kind.__name__}. Received: {text!r}"
            ) from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be a positive {kind.__name__}. Received: {text!r}")
        return value

    parse.__name__ = kind.__name__
    return parse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench",
        help="is training input-bound? producer vs accelerator, bottleneck stage, cores needed",
        description="Measure how fast the tfpipe pipeline produces examples (each stage prefix, "
        "1..N cores) and compare with how fast the accelerator consumes them. With no --data it "
        "generates an ImageNet-like dataset once and reuses it. Exit code 0 whatever the verdict "
        f"(see --fail-if-input-bound, exit {EXIT_INPUT_BOUND}).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_input_flags(p.add_argument_group("input"))
    _add_consumer_flags(p.add_argument_group("consumer (one of)"))
    _add_measure_flags(p.add_argument_group("measurement"))
    _add_output_flags(p.add_argument_group("output"))
    add_common(p)
    p.set_defaults(run=run)


def _add_input_flags(g: argparse._ArgumentGroup) -> None:
    g.add_argument(
        "--pipeline",
        choices=pipelines(),
        help="the preset (default: the one --data's manifest calls for, as build() picks it; else imagenet)",
    )
    g.add_argument(
        "--sequence-length",
        type=_positive(int),
        metavar="L",
        help="text: tokens in a row (default: 512)",
    )
    g.add_argument(
        "--packing",
        choices=MODES,
        help="text: first_fit (several documents a row), none (one a row, padded) or concat (end to "
        "end, cut every L) (default: build()'s, first_fit; none for a classifier)",
    )
    g.add_argument(
        "--truncate",
        action="store_true",
        help="text: keep each document's first L tokens only (a labeled corpus's classifier rows "
        "need it when documents are longer than L - 2)",
    )
    _add_data_flags(g)
    g.add_argument("--split", help="split of a tfpipe dataset --data to read (default: train)")
    g.add_argument(
        "--cache",
        default="auto",
        metavar="none|memory|auto|disk:PATH",
        help="the pipeline's cache, as training will set it (default: auto, build()'s: memory when "
        "the whole split fits). A small sample fits where the real data may not: pass none to time "
        "reading every epoch. Storage (MB/s, requests/s) is measured uncached either way",
    )
    g.add_argument("--workdir", help="where the generated dataset is cached (default: the user cache dir)")
    g.add_argument(
        "--batch-size",
        type=_positive(int),
        help="global batch (default: 128 imagenet, 1024 tabular, 64 text sequences, per host; with "
        "--from-profile, the profiled run's, from the profile when it records it)",
    )
    g.add_argument(
        "--hosts",
        type=_positive(int),
        default=1,
        help="hosts training together; each gets batch/hosts (default: 1)",
    )


def _add_data_flags(g: argparse._ArgumentGroup) -> None:
    """--data, once or NAME=PATH once per source of a mixture, and a mixture's --weights."""
    g.add_argument(
        "--data",
        action="append",
        metavar="[NAME=]PATH",
        help="tfpipe dataset (local or gs://); default: generated synthetic data, cached. Text: "
        "NAME=PATH once per source benches a weighted mixture, as build({NAME: PATH, ...}) plans it "
        "(a path that exists is a path, '=' and all: --data lang=en reads the folder lang=en)",
    )
    g.add_argument(
        "--weights",
        action="append",
        metavar="NAME=W,...",
        help="a mixture's weights in tokens, e.g. web=0.7,code=0.3 (default: each source's size, as "
        "build()'s); needs --data NAME=PATH per source. Given more than once, the flags are merged (a "
        "name weighed twice is refused)",
    )


def _add_consumer_flags(g: argparse._ArgumentGroup) -> None:
    who = g.add_mutually_exclusive_group()
    who.add_argument(
        "--from-profile",
        metavar="PATH",
        help="consumer: your training run's TensorFlow Profiler profile (TensorBoard log dir, "
        "plugins/profile/<run> folder or file; local or gs://): its step time less the input wait "
        'the Profiler measured. Needs pip install "tfpipe[profile]" for .xplane.pb files',
    )
    who.add_argument(
        "--step-time-ms",
        type=_step_time,
        metavar="MS",
        help="consumer: your measured step time for the global batch, e.g. from a TPU profile",
    )
    who.add_argument(
        "--model",
        choices=models(),
        help="consumer: time this Keras model's train step on the best local device",
    )
    who.add_argument(
        "--accelerator",
        metavar="NAME",
        help="consumer: a published throughput (see --list-accelerators); default: the preset's row "
        "(imagenet and text: a TPU v4 host)",
    )
    g.add_argument(
        "--profile-run",
        metavar="NAME",
        help="with --from-profile: the run folder (plugins/profile/NAME) to read (default: the newest)",
    )
    g.add_argument(
        "--list-accelerators", action="store_true", help="print the reference table with sources and exit"
    )


def _add_measure_flags(g: argparse._ArgumentGroup) -> None:
    g.add_argument(
        "--seconds", type=_positive(float), default=3.0, help="timed window per measurement (default: 3)"
    )
    g.add_argument(
        "--warmup",
        type=float,
        metavar="S",
        help="warm-up after the first batch, before each window (default: max(1, seconds/2))",
    )
    g.add_argument(
        "--simulate",
        action="store_true",
        help="also run against a consumer sleeping the step time; measure input wait",
    )
    g.add_argument(
        "--fit",
        action="store_true",
        help="also run model.fit of --model on the pipeline (its input wait measured by tfpipe.monitor) "
        "and on synthetic input",
    )
    g.add_argument(
        "--compare",
        action="store_true",
        help="also bench the baseline pipeline (tensorflow/tpu-style: interleave, one fused "
        "map, batch, prefetch) on the same data; print the ratio",
    )
    g.add_argument(
        "--max-cores", type=_positive(int), help="most cores in the scaling curve (default: all available)"
    )
    g.add_argument(
        "--worker-cores",
        type=_positive(int),
        help="cores per tf.data service worker for the estimate (default: this host's)",
    )


def _add_output_flags(g: argparse._ArgumentGroup) -> None:
    g.add_argument("--json", metavar="FILE", help="write the report as JSON (versioned schema)")
    g.add_argument(
        "--plot",
        metavar="FILE.png",
        help="write a plot: stage throughputs vs consumer, scaling curve (.png, .jpg, .svg or .pdf)",
    )
    g.add_argument(
        "--profile", metavar="DIR", help="write a TensorFlow profiler trace of the full pipeline's window"
    )
    g.add_argument(
        "--fail-if-input-bound",
        action="store_true",
        help=f"exit {EXIT_INPUT_BOUND} unless the verdict is not_input_bound (for CI)",
    )


def run(args: argparse.Namespace) -> int:
    out = render.console(args.quiet)
    if args.list_accelerators:
        _list_accelerators(out)
        return 0

    # Before measuring: a bench takes minutes, a bad output path should cost seconds.
    for flag, path in (("--json", args.json), ("--plot", args.plot)):
        if path is not None:
            check_writable(path, flag)
            if flag == "--json":
                check_json_name(path, flag)
            else:
                plot_format(path, flag)
    with _Interrupt() as interrupt:
        report = _measure(_config(args), out, interrupt)
        interrupt.check()  # before anything is shown or written: an interrupted bench writes nothing
        _show_and_write(report, args, out, interrupt)
    if report.comparison is not None:
        print(f"compare: tfpipe/baseline = {report.comparison.ratio:.2f}", file=sys.stdout)
    if args.fail_if_input_bound and report.verdict != "not_input_bound":
        print(f"tfpipe bench: {report.verdict} (--fail-if-input-bound)", file=sys.stderr)
        return EXIT_INPUT_BOUND
    return 0


def _measure(config: BenchConfig, out: Console, interrupt: _Interrupt) -> Report:
    """`tfpipe.bench`, its progress shown; a Ctrl-C is raised again as each stage starts."""
    if out.is_terminal:  # never with --quiet, whose console is plain
        with out.status("Starting", spinner="dots") as status:

            def show(msg: str) -> None:
                interrupt.check()
                status.update(f"[bold]{msg}")

            return bench(config, progress=show)

    def say(msg: str) -> None:
        interrupt.check()
        out.print(f"- {msg}")

    return bench(config, progress=say)


def _show_and_write(report: Report, args: argparse.Namespace, out: Console, interrupt: _Interrupt) -> None:
    # The report's renderer and rich (~40 ms): `tfpipe --help` imports this module.
    from tfpipe.bench.present.render import WholeLine, renderables

    for item in renderables(report):
        if isinstance(item, WholeLine):  # a path or URL: one line, never cut or folded
            out.print(item, soft_wrap=True, markup=False)
        else:
            out.print(item)
    if args.json:
        interrupt.check()
        storage.write_atomic(args.json, report.to_json_text().encode(), overwrite=True)
        out.print(f"Wrote {args.json}")
    if args.plot:
        # matplotlib's plot (and the renderer) only for --plot.
        from tfpipe.bench.present.plot import write_plot

        interrupt.check()
        write_plot(report, args.plot)
        out.print(f"Wrote {args.plot}")


class _Interrupt:
    """Ctrl-C during a bench, remembered until it is raised where it cannot be lost.

    Python raises KeyboardInterrupt in whatever the main thread runs when SIGINT arrives. A
    bench lets go of many TensorFlow functions; when one is being collected, the interrupt is
    raised inside its `__del__`, where Python prints "Exception ignored in
    AtomicFunction.__del__" and drops it, and the bench went on to write its full report
    (3 of 3 tries). The flag set here survives: each stage's start, the end of the bench and
    each report file raise it again, so a Ctrl-C at any stage ends with exit 130, no file.
    """

    def __init__(self) -> None:
        self.hit = False
        self._signal: Any = None
        self._hook = sys.unraisablehook

    def __enter__(self) -> _Interrupt:
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            self._signal = signal.signal(signal.SIGINT, self._on_signal)
        sys.unraisablehook = self._unraisable
        return self

    def __exit__(self, *exc: object) -> None:
        import signal

        if self._signal is not None:
            signal.signal(signal.SIGINT, self._signal)
        sys.unraisablehook = self._hook

    def _on_signal(self, signum: int, frame: object) -> None:
        self.hit = True
        raise KeyboardInterrupt

    def _unraisable(self, unraisable: sys.UnraisableHookArgs) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            self.hit = True  # raised again at the next check, not printed
            return
        self._hook(unraisable)

    def check(self) -> None:
        if self.hit:
            raise KeyboardInterrupt


def _config(args: argparse.Namespace) -> BenchConfig:
    """The BenchConfig the flags ask for."""
    return BenchConfig(
        pipeline=args.pipeline,
        data=_data(args.data),
        weights=_weights(args.weights),
        sequence_length=args.sequence_length,
        packing=args.packing,
        truncate=args.truncate,
        split=args.split,
        cache=args.cache,
        batch_size=args.batch_size,
        hosts=args.hosts,
        step_time_ms=args.step_time_ms,
        model=args.model,
        accelerator=args.accelerator,
        from_profile=args.from_profile,
        profile_run=args.profile_run,
        seconds=args.seconds,
        warmup_seconds=args.warmup,
        simulate=args.simulate,
        fit=args.fit,
        profile=args.profile,
        compare=args.compare,
        workdir=args.workdir,
        max_cores=args.max_cores,
        worker_cores=args.worker_cores,
    )


# A mixture's source name: a word, so that a path holding "=" elsewhere is still a path.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")


def _data(given: list[str] | None) -> str | dict[str, str] | None:
    """`--data PATH` once, or `--data NAME=PATH` once per source of a mixture. A path that
    exists is a path, "=" and all: a Hive-style folder such as `lang=en` is a dataset."""
    if not given:
        return None
    named = [g.partition("=") for g in given]
    if all(
        eq and _NAME.fullmatch(name) and not os.path.exists(g)
        for (name, eq, _), g in zip(named, given, strict=True)
    ):
        out: dict[str, str] = {}
        for name, _, path in named:
            if name in out:
                raise ConfigError(
                    f"--data names {name!r} twice: one --data NAME=PATH per source. Received: {given}"
                )
            out[name] = path
        if len(out) == 1:
            ((name, path),) = out.items()
            raise ConfigError(
                f"--data {given[0]} names one source of a mixture, {name!r} at {path!r}, and a mixture "
                "needs at least two names (--data web=PATH --data code=PATH). A dataset whose path "
                f"holds '=' is read as a path when it exists; ./{given[0]} does not exist here. "
                f"Received: {given}"
            )
        return out
    if len(given) > 1:
        raise ConfigError(
            "--data is one dataset (--data PATH), or a mixture with a name for each source "
            f"(--data web=PATH --data code=PATH). Received: {given}"
        )
    return given[0]


def _weights(flags: list[str] | None) -> dict[str, float] | None:
    """`--weights web=0.7,code=0.3` as {name: weight}, the flag given more than once merged; the
    names are checked against --data's."""
    if not flags:
        return None
    given = ",".join(flags) if len(flags) > 1 else flags[0]
    out: dict[str, float] = {}
    for part in given.split(","):
        name, eq, value = part.strip().partition("=")
        try:
            weight = float(value)
        except ValueError:
            weight = None
        if not eq or not name or weight is None:
            raise ConfigError(
                f"--weights takes NAME=WEIGHT,... such as web=0.7,code=0.3. Received: {given!r}"
            )
        if name in out:
            raise ConfigError(
                f"--weights names {name!r} twice. Received: {flags if len(flags) > 1 else given!r}"
            )
        out[name] = weight
    return out


def _list_accelerators(out) -> None:  # out: rich.console.Console
    from rich.markup import escape

    out.print("[bold]Reference throughputs[/] (published, approximate; pass one with --accelerator NAME)")
    defaults = {name: preset for preset, name in reference.defaults().items()}
    for r in reference.rows():
        use = f"default for --pipeline={defaults[r.name]}" if r.name in defaults else r.preset
        figure = f"{r.examples_per_sec:,.0f} examples/s"
        if r.tokens_per_sec is not None:
            figure = (
                f"{r.tokens_per_sec:,.0f} slot tokens/s = {r.examples_per_sec:,.2f} sequences/s ({r.shape})"
            )
        out.print(f"\n[bold]{r.name}[/]  ({use})  {figure}")
        out.print(
            f"  {escape(r.model)} on {escape(r.accelerator)}, {escape(r.precision)}, {escape(r.framework)}"
        )
        out.print(f"  source: {escape(r.source)} ({escape(r.derivation)})", soft_wrap=True)
        out.print(f"  {r.url}", soft_wrap=True, overflow="ignore", crop=False)

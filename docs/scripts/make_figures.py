"""Draws the docs' figures into docs/images/, from real data, never by hand:

- `architecture.svg`: convert, build and bench as one diagram;
- `packing.svg`: one chunk of real documents placed in rows with packing="none" and with
  "first_fit", by tfpipe's own NumPy packing reference (`tfpipe/packing/reference.py`),
  on the token lengths of the standard library's docstrings as `tfpipe convert` tokenizes
  them (a byte-level BPE trained on them);
- `waterfall.svg`: the CPU time each stage adds per example, from the bench report that
  `docs/scripts/capture.py` captured (`docs/captures/bench-imagenet.json`).

The bench plot itself (`bench-imagenet.png`) is tfpipe's own `--plot`, written by capture.py.
Run capture.py first, then this: `python docs/scripts/make_figures.py` (about half a minute;
needs the `text` extra). The SVGs carry no date, so an unchanged figure is an unchanged file.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import matplotlib  # noqa: E402 - after the path, so this tree's tfpipe is the one imported

matplotlib.use("Agg")
import numpy as np  # noqa: E402
from matplotlib import pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle  # noqa: E402

IMAGES = ROOT / "docs" / "images"
CAPTURES = ROOT / "docs" / "captures"
PAD, INK, MUTED = "#E6E6E6", "#222222", "#666666"
STAGE_COLORS = {"convert": "#DCEAF7", "build": "#E3F2E1", "bench": "#FBE7D9", "data": "#F2F2F2"}


def save(fig: plt.Figure, name: str) -> pathlib.Path:
    path = IMAGES / name
    plt.rcParams["svg.hashsalt"] = "tfpipe-docs"
    plt.rcParams["svg.fonttype"] = "none"  # text stays text: smaller, and searchable
    fig.savefig(path, format=path.suffix[1:], metadata={"Date": None}, bbox_inches="tight")
    plt.close(fig)
    return path


# ---- the architecture ----


def _box(ax, x, y, w, h, title, lines=(), kind="data"):
    ax.add_patch(
        FancyBboxPatch(
            (x, y),
            w,
            h,
            boxstyle="round,pad=0.02,rounding_size=0.08",
            fc=STAGE_COLORS[kind],
            ec="#8A8A8A",
            lw=0.8,
        )
    )
    ax.text(x + w / 2, y + h - 0.2, title, ha="center", va="top", fontsize=9.5, fontweight="bold", color=INK)
    for i, line in enumerate(lines):
        ax.text(x + w / 2, y + h - 0.55 - 0.3 * i, line, ha="center", va="top", fontsize=8, color=MUTED)


def _arrow(ax, start, end, label=""):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=11, lw=1, color="#555555"))
    if label:
        ax.text(
            (start[0] + end[0]) / 2,
            (start[1] + end[1]) / 2 + 0.12,
            label,
            ha="center",
            fontsize=7.5,
            color=MUTED,
        )


def architecture() -> pathlib.Path:
    fig, ax = plt.subplots(figsize=(12.5, 6.2))
    ax.set_xlim(0, 25)
    ax.set_ylim(0, 12.4)
    ax.axis("off")
    h = 2.2
    # convert
    ax.text(0.1, 12.1, "tfpipe convert", fontsize=11, fontweight="bold", color="#2B5C8A", va="top")
    _box(
        ax, 0.2, 8.8, 4.2, h, "raw data", ["image folders", "CSV, Parquet, Arrow", "JSON Lines, .txt corpora"]
    )
    _box(
        ax,
        5.3,
        8.8,
        4.2,
        h,
        "Source",
        ["lists the inputs", "(local or gs://)", "tokenizer for text"],
        "convert",
    )
    _box(
        ax,
        10.4,
        8.8,
        4.4,
        h,
        "ConvertPlan",
        ["frozen: which input goes", "to which shard, in order", "--resume continues it"],
        "convert",
    )
    _box(
        ax,
        15.7,
        8.8,
        4.2,
        h,
        "engine",
        ["local process pool", "or Apache Beam", "(the same bytes)"],
        "convert",
    )
    _box(ax, 20.8, 8.8, 4.0, h, "dataset", ["shards (TFRecord)", "lengths files (text)", "tfpipe.json, last"])
    for x0, x1 in ((4.4, 5.3), (9.5, 10.4), (14.8, 15.7), (19.9, 20.8)):
        _arrow(ax, (x0, 9.9), (x1, 9.9))
    # build
    ax.text(0.1, 7.9, "tfpipe.build()", fontsize=11, fontweight="bold", color="#3B7A3B", va="top")
    _box(
        ax,
        0.2,
        4.6,
        4.2,
        h,
        "manifest + preset",
        ["imagenet, tabular, text", "or your own", "+ PipelineConfig"],
        "build",
    )
    stages = [
        "list_files, shard, interleave, cache, shuffle, repeat,",
        "parse, decode (text: pack), batch, prefetch",
        "the order: a function of (seed, step), so it resumes",
    ]
    _box(
        ax,
        5.3,
        4.6,
        9.5,
        h,
        "the stages, one named list",
        stages,
        "build",
    )
    _box(
        ax,
        15.7,
        4.6,
        4.2,
        h,
        "tf.data.Dataset",
        ["static shapes", "per host (input_context)", "or on tf.data service"],
        "build",
    )
    _box(ax, 20.8, 4.6, 4.0, h, "model.fit", ["Keras", "or your own loop"])
    _arrow(ax, (22.8, 8.8), (2.3, 6.8 + 0.01), "")
    for x0, x1 in ((4.4, 5.3), (14.8, 15.7), (19.9, 20.8)):
        _arrow(ax, (x0, 5.7), (x1, 5.7))
    # bench
    ax.text(0.1, 3.7, "tfpipe bench", fontsize=11, fontweight="bold", color="#A0522D", va="top")
    _box(
        ax,
        5.3,
        0.4,
        9.5,
        h,
        "the same stages, timed",
        ["one prefix at a time, 1..N cores", "examples/s and CPU ms per example"],
        "bench",
    )
    _box(
        ax,
        0.2,
        0.4,
        4.2,
        h,
        "consumer",
        ["your profile, step time", "a model timed here", "or a published row"],
        "bench",
    )
    _box(
        ax,
        15.7,
        0.4,
        9.1,
        h,
        "Report",
        ["verdict (the Profiler's bands), bottleneck,", "cores needed, what to do: text, JSON, PNG"],
        "bench",
    )
    _arrow(ax, (10.05, 4.6), (10.05, 2.6), "same list")
    _arrow(ax, (4.4, 1.5), (5.3, 1.5))
    _arrow(ax, (14.8, 1.5), (15.7, 1.5))
    return save(fig, "architecture.svg")


# ---- packing ----


def corpus_lengths(documents: int = 2000, vocab_size: int = 8000) -> np.ndarray:
    """Token counts of the first `documents` stdlib docstrings, as `tfpipe convert` writes them
    with a byte-level BPE trained on them (the split's lengths file)."""
    import tfpipe
    from tfpipe.synthetic import text

    with tempfile.TemporaryDirectory() as tmp:
        text.write_corpus(os.path.join(tmp, "corpus"), text.documents(documents), "jsonl")
        dest = os.path.join(tmp, "data")
        tfpipe.convert(os.path.join(tmp, "corpus"), dest, train_tokenizer="bpe", vocab_size=vocab_size)
        return np.fromfile(os.path.join(dest, "lengths.train.u32"), dtype="<u4").astype(np.int64)


def _rows(ax, placement, L, title):
    from tfpipe.packing.reference import segment_ids

    cmap = plt.get_cmap("tab20")
    rows = placement.rows
    for r in range(rows):
        ax.add_patch(Rectangle((0, r), L, 0.86, fc=PAD, ec="none"))
    seg = segment_ids(placement)
    for i in range(len(placement.doc)):
        r, o, n = placement.row[i], placement.offset[i], placement.length[i]
        ax.add_patch(Rectangle((o, r), n, 0.86, fc=cmap(int(placement.doc[i]) % 20), ec="white", lw=0.6))
        if n >= 14:
            ax.text(o + n / 2, r + 0.43, str(seg[i]), ha="center", va="center", fontsize=6, color=INK)
    real = int(placement.length.sum())
    ax.set_xlim(0, L)
    ax.set_title(f"{title}: {rows} rows, {real / (rows * L):.1%} of the slots hold tokens", fontsize=10)
    ax.set_xlabel(f"token slots of a row (L = {L})", fontsize=8)
    ax.set_ylabel("row", fontsize=8)
    ax.tick_params(labelsize=7)


def packing(lengths: np.ndarray, L: int = 128, documents: int = 28, start: int = 200) -> pathlib.Path:
    from tfpipe.packing.reference import place

    chunk = lengths[start : start + documents]
    none, first_fit = place(chunk, L, "none"), place(chunk, L, "first_fit")
    fig, (a, b) = plt.subplots(
        1,
        2,
        figsize=(12, 0.22 * max(none.rows, 12) + 1.6),
        gridspec_kw={"width_ratios": [1, 1]},
        sharey=False,
    )
    _rows(a, none, L, 'packing="none"')
    _rows(b, first_fit, L, 'packing="first_fit"')
    for ax in (a, b):
        ax.set_ylim(none.rows, 0)
    fig.suptitle(
        f"{documents} consecutive stdlib docstrings ({int(chunk.sum()):,} tokens; each colour one document, "
        "its segment id written on it; grey: padding)",
        fontsize=9,
        color=MUTED,
    )
    fig.tight_layout()
    return save(fig, "packing.svg")


# ---- the stage waterfall ----


def waterfall(report_path: pathlib.Path = CAPTURES / "bench-imagenet.json") -> pathlib.Path:
    report = json.loads(report_path.read_text())
    stages = report["stages"]
    names = [s["name"] for s in stages]
    cumulative = [s["cpu_ms_per_example"] for s in stages]
    added = [cumulative[0], *np.diff(cumulative)]
    fig, ax = plt.subplots(figsize=(9, 0.55 * len(stages) + 1.8))
    left = 0.0
    for i, (name, stage, delta) in enumerate(zip(names, stages, added, strict=True)):
        start = left if delta >= 0 else left + delta
        color = (
            "#E4572E" if name == report["bottleneck"]["stage"] else ("#8DA0CB" if delta >= 0 else "#B8B8B8")
        )
        ax.barh(i, abs(delta), left=start, color=color, height=0.6)
        adds = ", ".join(stage.get("stages", [])) or name
        ax.text(max(left, left + delta) + 0.01, i, f"{delta:+.3f} ms  ({adds})", va="center", fontsize=8)
        left += delta
    ax.barh(len(stages), left, color="#4C9F70", height=0.6)
    ax.text(
        left + 0.01,
        len(stages),
        f"{left:.3f} CPU ms per example, the whole pipeline",
        va="center",
        fontsize=8,
    )
    cores = report.get("cores_needed", {}).get("available") or os.cpu_count()
    consumer = report["consumer"]["examples_per_sec"]
    budget = 1000 * cores / consumer
    ax.axvline(
        budget,
        color=INK,
        ls="--",
        lw=1,
        label=f"what {cores} cores can spend at the consumer's {consumer:,.0f}/s",
    )
    ax.legend(loc="upper right", fontsize=8, frameon=False)
    ax.set_yticks(range(len(stages) + 1), [*names, "total"])
    ax.invert_yaxis()
    ax.set_xlabel("CPU milliseconds per example (cumulative, each bar what its stage adds)", fontsize=9)
    ax.set_xlim(0, max(left, budget, max(cumulative)) * 1.6)
    ax.set_title(
        f"Where an example's CPU time goes: {report['pipeline']} pipeline, batch {report['batch_size']}",
        fontsize=10,
    )
    fig.tight_layout()
    return save(fig, "waterfall.svg")


def main() -> None:
    IMAGES.mkdir(parents=True, exist_ok=True)
    print(architecture())
    print(packing(corpus_lengths()))
    print(waterfall())


if __name__ == "__main__":
    main()

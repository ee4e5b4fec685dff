"""`tfpipe convert` of growing text corpora: peak RSS of the converting process and of its
workers against the corpus size, and the slope (MB of peak RSS per GB of corpus).

Run: python benchmarks/text_convert_memory.py [--sizes 0.1,0.5,2] [--workers 2] [--shard-size 4MiB]

Each corpus is the standard library's English (`tfpipe.synthetic.text`) repeated to the size
(GB, decimal) as JSON Lines in 4 files; the SentencePiece tokenizer (8,000 ids) is trained once
on one copy. Each conversion runs `tfpipe convert` in a child process; the memory of that
process and of every process under it is read from /proc every 0.1 s. A corpus of 10 GB
converting in flat memory is the target (issue 35): the slope says what each GB adds. A shard's
documents' lengths are held until it is committed, so with the default shard size (128 MiB) a
small corpus is one shard whose memory grows with it; `--shard-size 4MiB` gives small corpora
as many shards as a 10 GB corpus has with the default, and the slope then shows what grows with
the corpus beyond one shard.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import tfpipe
from tfpipe.modalities.text.convert import tokenizertrain
from tfpipe.synthetic import text


def write_corpus(folder: str, size_gb: float, files: int = 4) -> tuple[int, int]:
    """(documents, bytes) of the corpus written to `folder`: copies of the stdlib's text."""
    lines = [json.dumps({"text": d}) + "\n" for d in text.documents()]
    block = "".join(lines).encode()
    copies = max(1, round(size_gb * 1e9 / len(block)))
    os.makedirs(folder, exist_ok=True)
    for f in range(files):
        with open(os.path.join(folder, f"part-{f:03d}.jsonl"), "wb") as out:
            for _ in range(copies // files + (f < copies % files)):
                out.write(block)
    return copies * len(lines), copies * len(block)


def tree_rss(pid: int) -> tuple[int, int]:
    """(RSS of `pid`, RSS of every process under it), in bytes."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(parent, []).append(int(entry))
            except (OSError, ValueError, IndexError):
                continue

    def rss(p: int) -> int:
        try:
            with open(f"/proc/{p}/statm") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            return 0

    below, stack = 0, list(children.get(pid, []))
    while stack:
        p = stack.pop()
        below += rss(p)
        stack += children.get(p, [])
    return rss(pid), below


def convert(src: str, dest: str, tokenizer: str, workers: int, shard_size: str | None) -> dict[str, float]:
    """Peak RSS (MB) of the converting process, of its workers together, and of both at once."""
    args = [sys.executable, "-m", "tfpipe", "convert", src, dest, "--tokenizer", tokenizer]
    args += ["--shard-size", shard_size] if shard_size else []
    proc = subprocess.Popen([*args, "--workers", str(workers), "--quiet"], stdout=subprocess.DEVNULL)
    peak = {"converting process": 0, "workers": 0, "together": 0}
    start = time.perf_counter()
    while proc.poll() is None:
        own, below = tree_rss(proc.pid)
        peak = {
            "converting process": max(peak["converting process"], own),
            "workers": max(peak["workers"], below),
            "together": max(peak["together"], own + below),
        }
        time.sleep(0.1)
    assert proc.returncode == 0, proc.returncode
    return {k: v / 1e6 for k, v in peak.items()} | {"seconds": time.perf_counter() - start}


def slope(xs: list[float], ys: list[float]) -> float:
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="0.1,0.5,2", help="corpus sizes in GB (default: 0.1,0.5,2)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--shard-size", default=None, help="convert's --shard-size (default: convert's)")
    parser.add_argument("--folder", default=None, help="where corpora go (default: a temporary folder)")
    args = parser.parse_args()
    sizes = [float(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="tfpipe-text-memory-", dir=args.folder) as folder:
        file = tokenizertrain.train("sentencepiece", 8000, tokenizertrain.documents_of(text.documents()))
        tok = os.path.join(folder, file.name)
        with open(tok, "wb") as f:
            f.write(file.data)
        rows = []
        for size in sizes:
            src, dest = os.path.join(folder, f"c{size}"), os.path.join(folder, f"out{size}")
            docs, nbytes = write_corpus(src, size)
            got = convert(src, dest, tok, args.workers, args.shard_size)
            shards = len(tfpipe.Manifest.load(dest).splits["train"].shards)
            rows.append((nbytes / 1e9, got))
            print(
                f"{nbytes / 1e9:.2f} GB, {docs:,} documents, {shards} shards, {got['seconds']:.0f} s: peak RSS "
                + ", ".join(f"{k} {v:.0f} MB" for k, v in got.items() if k != "seconds"),
                flush=True,
            )
            for path in (src, dest):
                subprocess.run(["rm", "-rf", path], check=True)
    if len(rows) > 1:
        gb = [g for g, _ in rows]
        for key in ("converting process", "workers", "together"):
            print(
                f"slope, {key}: {slope(gb, [r[key] for _, r in rows]):+.1f} MB of peak RSS per GB of corpus"
            )


if __name__ == "__main__":
    main()

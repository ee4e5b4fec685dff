"""Three real corpora of unlike lengths for the mixture benchmarks (issue 45), tokenized by one
SentencePiece model trained on all three:

- "bible": the King James Bible, one chapter a document (1,189 chapters, ~900 tokens each),
  printed by Debian's `bible-kjv` program from its `bible-kjv-text` data;
- "docs": Python's documentation topics (`pydoc_data.topics`) cut at their section headings
  (208 sections, ~600 tokens each);
- "code": whole standard-library source files (`/usr/lib/python3.X/*.py` of the running Python's
  version, ~170 files, ~6,000 tokens each).

`make(root)` converts them once into `root` and returns `{name: path}`. The KJV comes from the
two Debian packages, unpacked without installing them: from the apt cache when they are there,
else fetched with `apt-get download` (Debian's registry, the ordinary client).
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
import sysconfig

NAMES = ("bible", "docs", "code")
VOCAB = 8000
_BOOKS = (
    "Genesis",
    "Exodus",
    "Leviticus",
    "Numbers",
    "Deuteronomy",
    "Joshua",
    "Judges",
    "Ruth",
    "1Samuel",
    "2Samuel",
    "1Kings",
    "2Kings",
    "1Chronicles",
    "2Chronicles",
    "Ezra",
    "Nehemiah",
    "Esther",
    "Job",
    "Psalms",
    "Proverbs",
    "Ecclesiastes",
    "Song",
    "Isaiah",
    "Jeremiah",
    "Lamentations",
    "Ezekiel",
    "Daniel",
    "Hosea",
    "Joel",
    "Amos",
    "Obadiah",
    "Jonah",
    "Micah",
    "Nahum",
    "Habakkuk",
    "Zephaniah",
    "Haggai",
    "Zechariah",
    "Malachi",
    "Matthew",
    "Mark",
    "Luke",
    "John",
    "Acts",
    "Romans",
    "1Corinthians",
    "2Corinthians",
    "Galatians",
    "Ephesians",
    "Philippians",
    "Colossians",
    "1Thessalonians",
    "2Thessalonians",
    "1Timothy",
    "2Timothy",
    "Titus",
    "Philemon",
    "Hebrews",
    "James",
    "1Peter",
    "2Peter",
    "1John",
    "2John",
    "3John",
    "Jude",
    "Revelation",
)


def _kjv_tool(root: str) -> tuple[str, str]:
    """(the `bible` program, its data folder), unpacked from the Debian packages into `root`."""
    where = os.path.join(root, "kjv")
    program, data = os.path.join(where, "usr/bin/bible"), os.path.join(where, "usr/lib")
    if os.path.exists(program) and os.path.exists(os.path.join(data, "bible.data")):
        return program, data
    os.makedirs(where, exist_ok=True)
    for package in ("bible-kjv", "bible-kjv-text"):
        debs = sorted(glob.glob(f"/var/cache/apt/archives/{package}_*.deb"))
        if not debs:
            subprocess.run(["apt-get", "download", package], cwd=where, check=True)
            debs = sorted(glob.glob(os.path.join(where, f"{package}_*.deb")))
        subprocess.run(["dpkg-deb", "-x", debs[-1], where], check=True)
    return program, data


def bible_chapters(root: str) -> list[str]:
    """Every chapter of the KJV, in canonical order, as its text (verse numbers dropped). A
    chapter past a book's last is printed as its last, so each heading is kept once."""
    program, data = _kjv_tool(root)
    chapters: dict[str, list[str]] = {}
    for book in _BOOKS:
        refs = [f"{book} {c}:1-200" for c in range(1, 151)]
        text = subprocess.run([program, "-l100000", "-p", data, *refs], capture_output=True, text=True).stdout
        heading = None
        for line in text.split("\n"):
            if line.strip() and not line[0].isspace():
                heading = line.strip()
                seen = heading in chapters
                chapters.setdefault(heading, [])
            elif line.strip() and heading is not None and not seen:
                chapters[heading].append(re.sub(r"^\s*\d+ ", "", line).strip())
    return [" ".join(verses) for verses in chapters.values() if verses]


def doc_sections() -> list[str]:
    """pydoc's topics, cut before each heading (a line underlined with *, =, - or ~)."""
    import pydoc_data.topics

    out = []
    for key in sorted(pydoc_data.topics.topics):
        lines, current = pydoc_data.topics.topics[key].split("\n"), []
        for i, line in enumerate(lines):
            underline = i + 1 < len(lines) and re.fullmatch(r"[*=\-~^]{3,}", lines[i + 1].strip())
            if underline and line.strip() and current:
                out.append("\n".join(current).strip())
                current = []
            current.append(line)
        out.append("\n".join(current).strip())
    return [s for s in out if s]


def code_files() -> list[str]:
    """The standard library's top-level source files, whole."""
    folder = sysconfig.get_paths()["stdlib"]
    out = []
    for path in sorted(glob.glob(os.path.join(folder, "*.py"))):
        with open(path, encoding="utf-8", errors="replace") as f:
            out.append(f.read())
    return out


def _write(path: str, texts: list[str]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"text": t}) + "\n")


def make(root: str) -> dict[str, str]:
    """The three corpora converted into `root` (once), `{name: dataset path}`."""
    import tfpipe
    from tfpipe.format.manifest import Manifest

    out = {n: os.path.join(root, f"mix3-{n}") for n in NAMES}
    if all(os.path.exists(os.path.join(p, "tfpipe.json")) for p in out.values()):
        return out
    texts = {"bible": bible_chapters(root), "docs": doc_sections(), "code": code_files()}
    for name, t in texts.items():
        _write(os.path.join(root, f"mix3-{name}-corpus", "corpus.jsonl"), t)
    _write(os.path.join(root, "mix3-all-corpus", "corpus.jsonl"), [x for t in texts.values() for x in t])
    tok_root = os.path.join(root, "mix3-tokenizer")
    if not os.path.exists(os.path.join(tok_root, "tfpipe.json")):
        tfpipe.convert(
            os.path.join(root, "mix3-all-corpus"),
            tok_root,
            train_tokenizer="sentencepiece",
            vocab_size=VOCAB,
            num_shards=1,
        )
    tok = os.path.join(tok_root, Manifest.load(tok_root).tokenizer.file)
    for name in NAMES:
        if not os.path.exists(os.path.join(out[name], "tfpipe.json")):
            tfpipe.convert(os.path.join(root, f"mix3-{name}-corpus"), out[name], tokenizer=tok, num_shards=2)
    return out


if __name__ == "__main__":
    made = make(sys.argv[1] if len(sys.argv) > 1 else "/tmp/tfpipe-bench")
    for name, path in made.items():
        from tfpipe.format.manifest import Manifest

        t = Manifest.load(path).split("train").text
        print(
            f"{name}: {path}: {t.documents:,} documents, {t.tokens:,} tokens, mean {t.tokens / t.documents:,.0f}"
        )

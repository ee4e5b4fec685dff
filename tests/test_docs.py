"""The docs run as written: README.md and every page of docs/.

- Every Python and shell block runs, in the page's order, in a fresh folder holding the small
  data the pages name as the user's own (`support.docs_data.py`): each Python block in a process of
  its own (as a user would paste it), each shell block in bash. What a page converts must then
  be a dataset (`tfpipe.json` loads), and what it asks bench to write must exist. These are
  slow (convert, build, fit, bench): the `docs` marker, left out of the default run, is CI's
  own step (`python -m pytest -m docs`).
- A Python block whose first line names a file, `# train.py: <what it is>`, is a program the
  page's later shell blocks run (two JAX processes, say): it is written to that file, not run.
- A page whose blocks use JAX (`import jax`, `KERAS_BACKEND=jax`) runs under the `jax` marker
  too, so CI's JAX step runs it (`python -m pytest -m jax`, in the venv that has JAX); where JAX
  is absent it skips, naming the package.
- A block that cannot run here says so on its first line, `# not run in CI: <why>`, visible to
  the reader; `NOT_RUN_REASONS` lists every reason a block may give, and the test lists the
  blocks that give one.
- Every internal link and anchor resolves (the generated reference pages' headings included),
  and every fenced block names its language, so none escapes the runner unseen.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys
import unicodedata

import pytest

import support.cli

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(p for p in DOCS.rglob("*.md") if "scripts" not in p.parts)]
RUNNERS = {"bash": "shell", "sh": "shell", "shell": "shell", "python": "python", "py": "python"}
NOT_RUN = re.compile(r"#\s*not run in CI:\s*(.+?)\s*$")
# A Python block that is a file the page's shell blocks run: its first line names it.
FILE = re.compile(r"#\s*([\w-]+\.py):")
# What makes a page's blocks need JAX (CI's JAX venv runs them).
USES_JAX = re.compile(r"^\s*(import|from) jax\b|KERAS_BACKEND=jax", re.M)
# Every reason a block may give for not running here. A new one is a decision: add it here.
NOT_RUN_REASONS = {
    "installs packages",  # pip into the user's environment
    "installs packages (CI runs this very line as its test step)",  # the README's test command
    "needs a Cloud TPU VM and a gs:// bucket",
    "needs the ImageNet files and a gs:// bucket",
    "needs a gs:// bucket, and a profile of a training run on a TPU",
    "needs a gs:// bucket and a TPU profile",
    "needs a gs:// bucket and a converted corpus",
    "needs a TPU, a gs:// bucket, and your model and data",
    "needs a Google Cloud project, Dataflow and a gs:// bucket",
    "needs a Flink or Spark cluster",
    "each runs a server until stopped, listening on every interface",
    "needs the servers above",
    "runs a server until stopped",
    "needs a TFDS dataset prepared in your data_dir",
    # The main job on the embedded default: minutes of bench; docs/scripts/capture.py runs it.
    "generates a dataset in your cache directory and benches it for minutes",
}
# A block may take this long (a bench on a loaded 2-core machine takes minutes).
BLOCK_TIMEOUT = 900


@dataclasses.dataclass(frozen=True)
class Block:
    page: pathlib.Path
    line: int
    lang: str
    code: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def file(self) -> str | None:
        """The file a Python block is written to (its first line names it), or None."""
        first = next((line for line in self.code.splitlines() if line.strip()), "")
        m = FILE.match(first.strip())
        return m[1] if m and RUNNERS.get(self.lang) == "python" else None

    @property
    def not_run(self) -> str | None:
        """The reason on the block's first line, or None when it runs."""
        first = next((line for line in self.code.splitlines() if line.strip()), "")
        m = NOT_RUN.fullmatch(first.strip())
        return m[1] if m else None


_FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w+-]*)[^\n`]*$")


def blocks(page: pathlib.Path) -> list[Block]:
    """The fenced blocks of a page, dedented (a block inside a list item is indented)."""
    out, lines, i = [], page.read_text().splitlines(), 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, start = m["indent"], i
        i += 1
        body = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        out.append(Block(page, start + 1, m["lang"], "\n".join(body) + "\n"))
        i += 1
    return out


def runnable(page: pathlib.Path) -> list[Block]:
    return [b for b in blocks(page) if b.lang in RUNNERS and b.not_run is None]


def uses_jax(page: pathlib.Path) -> bool:
    return any(USES_JAX.search(b.code) for b in runnable(page))


def _page_params() -> list:
    """Each page with blocks to run; a page that uses JAX marked `jax` as well."""
    return [
        pytest.param(p, marks=[pytest.mark.jax] if uses_jax(p) else [], id=str(p.relative_to(ROOT)))
        for p in PAGES
        if runnable(p)
    ]


# ---- the blocks run ----


@pytest.fixture(scope="module")
def docs_data(tmp_path_factory):
    pytest.importorskip("tokenizers", reason='the text extra: pip install "tfpipe[text]"')
    from support.docs_data import make_docs_data

    return make_docs_data(str(tmp_path_factory.mktemp("docs-data")))


def _environment() -> dict[str, str]:
    """This tree first on PYTHONPATH; this Python's scripts (`tfpipe`) first on PATH."""
    bin_dir = os.path.dirname(sys.executable)
    return support.cli.environment(
        {"PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")]), "MPLBACKEND": "Agg"}
    )


def _run(block: Block, folder: pathlib.Path, index: int) -> subprocess.CompletedProcess:
    if RUNNERS[block.lang] == "shell":
        args = ["bash", "-e", "-o", "pipefail", "-c", block.code]
    else:
        script = folder / f".docs-block-{index:02d}.py"
        script.write_text(block.code)
        args = [sys.executable, script.name]
    return subprocess.run(
        args,
        cwd=folder,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )


def _made(page_blocks: list[Block]) -> tuple[set[str], set[str]]:
    """The datasets the page's commands convert into, and the files bench writes."""
    shell = "\n".join(b.code for b in page_blocks if RUNNERS[b.lang] == "shell")
    datasets = set(re.findall(r"tfpipe convert \S+ (data/[\w.-]+)", shell))
    outputs = set(re.findall(r"--(?:json|plot) (\S+)", shell))
    return datasets, outputs


@pytest.mark.docs
@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("page", _page_params())
def test_every_block_of_the_page_runs_as_written(page, docs_data, tmp_path):
    if uses_jax(page):
        pytest.importorskip("jax", reason='Keras 3 on JAX: pip install "jax[cpu]" (CI: its JAX venv, -m jax)')
    folder = tmp_path / "work"
    shutil.copytree(docs_data, folder)
    page_blocks = runnable(page)
    for index, block in enumerate(page_blocks):
        if block.file:  # a program the page's later blocks run
            (folder / block.file).write_text(block.code)
            continue
        done = _run(block, folder, index)
        output = (done.stdout + done.stderr)[-4000:]
        assert done.returncode == 0, f"{block.where} ({block.lang}) exited {done.returncode}:\n{output}"
    from tfpipe.format.manifest import Manifest

    datasets, outputs = _made(page_blocks)
    for name in sorted(datasets):
        manifest = Manifest.load(str(folder / name))
        assert sum(s.examples for s in manifest.splits.values()) > 0, name
    missing = sorted(name for name in outputs if not (folder / name).is_file())
    assert missing == []


# ---- the blocks that do not run say why ----


def test_every_block_names_its_language():
    bare = [b.where for page in PAGES for b in blocks(page) if not b.lang]
    assert bare == []


def test_blocks_that_do_not_run_say_why_with_a_known_reason():
    skipped = [(b.where, b.not_run) for page in PAGES for b in blocks(page) if b.not_run]
    unknown = [(where, why) for where, why in skipped if why not in NOT_RUN_REASONS]
    assert unknown == [], "a new reason not to run a block: add it to NOT_RUN_REASONS if it is one"
    # The list, for the reader of the test log (`-rP`): what the docs show but CI cannot run.
    print("\n".join(f"not run: {where}: {why}" for where, why in skipped))
    assert len(skipped) < len([b for page in PAGES for b in blocks(page) if b.lang in RUNNERS]) / 2


def test_a_marker_is_only_ever_the_first_line():
    late = [
        b.where
        for page in PAGES
        for b in blocks(page)
        if b.not_run is None and any(NOT_RUN.search(line) for line in b.code.splitlines())
    ]
    assert late == []


# ---- links and anchors ----


@functools.cache
def _hooks():
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", DOCS / "scripts" / "mkdocs_hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def slugify(heading: str) -> str:
    """A heading's anchor as mkdocs makes it (Python-Markdown's toc: ASCII, words and hyphens)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = re.sub(r"[`*]", "", text)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _without_blocks(markdown: str) -> str:
    return re.sub(r"^[ \t]*```.*?^[ \t]*```[ \t]*$", "", markdown, flags=re.S | re.M)


def _prose(markdown: str) -> str:
    """The page without its fenced blocks and code spans (a link inside code is no link)."""
    return re.sub(r"`[^`\n]*`", "", _without_blocks(markdown))


@functools.cache
def anchors(page: pathlib.Path) -> frozenset[str]:
    markdown = page.read_text()
    if page.is_relative_to(DOCS):
        markdown = _hooks().on_page_markdown(markdown, page=None)
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", _without_blocks(markdown), re.M):
        slug = slugify(heading)
        seen[slug] = seen.get(slug, -1) + 1
    return frozenset(s if n == 0 else f"{s}_{n}" for s, k in seen.items() for n in range(k + 1))


def links(page: pathlib.Path) -> list[str]:
    return re.findall(r"!?\[[^\]]*\]\(([^)\s]+)\)", _prose(page.read_text()))


def test_every_internal_link_and_anchor_resolves():
    broken = []
    for page in PAGES:
        for target in links(page):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists() or (page.is_relative_to(DOCS) and not dest.is_relative_to(DOCS)):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file in the site)")
            elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest)):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such anchor)")
    assert broken == []


@pytest.mark.docs  # in CI's docs step, where the docs extra (Python-Markdown) is installed
def test_the_slugs_are_mkdocs_own():
    markdown = pytest.importorskip("markdown", reason='the docs extra: pip install "tfpipe[docs]"')
    for page in PAGES:
        md = markdown.Markdown(extensions=["toc"])
        md.convert(_without_blocks(page.read_text()))
        ids, todo = set(), list(md.toc_tokens)
        while todo:
            token = todo.pop()
            ids.add(token["id"])
            todo += token["children"]
        assert ids <= anchors(page), page


def _guides(markdown: str) -> list[str]:
    """The guides a "Guides:" list item links, in order, as paths from docs/."""
    item = re.search(r"^- Guides:(.*?)(?=^- |\Z)", markdown, re.S | re.M)
    assert item, "no '- Guides:' item"
    return [link.removeprefix("docs/") for link in re.findall(r"\]\(([^)#]+)\)", item[1])]


def test_the_site_and_the_readme_list_every_guide_alike():
    """docs/index.md's "Start here" once left out the JAX and TFDS guides the README lists."""
    readme = _guides((ROOT / "README.md").read_text())
    index = _guides((DOCS / "index.md").read_text())
    assert index == readme
    assert sorted(readme) == sorted(str(p.relative_to(DOCS)) for p in (DOCS / "guides").glob("*.md"))

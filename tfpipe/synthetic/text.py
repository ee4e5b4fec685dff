"""Real English text that every CPython has: the standard library's docstrings and pydoc's topics.

The corpus is read from the standard library's source files with `ast` (nothing is imported,
so no module's import side effects run), in sorted path order, each docstring of a module,
class or function once (the first time it is seen), then `pydoc_data.topics` in sorted key
order. It is the same list on every run of one CPython; another CPython release gives another
list. Packages that are tests, demos or jokes (`test`, `idlelib`, `tkinter`, `turtledemo`,
`antigravity`, `this`, ...) and installed third-party packages are left out.

`write_corpus` writes documents as a small corpus folder (JSON Lines, plain text, or Parquet as
Hugging Face `datasets` writes it) for tests and benchmarks.
"""

from __future__ import annotations

import ast
import functools
import gzip
import io
import itertools
import json
import os
import sysconfig
from collections.abc import Iterator, Sequence
from typing import Literal

from tfpipe import storage

SKIPPED = frozenset(
    {
        "antigravity",
        "this",
        "idlelib",
        "tkinter",
        "turtle",
        "turtledemo",
        "test",
        "tests",
        "lib2to3",
        "ensurepip",
        "venv",
        "__phello__",
        "__pycache__",
        "site-packages",
        "dist-packages",
    }
)
"""Module and folder names left out: tests, demos, GUI, jokes, and installed packages."""

CorpusFormat = Literal["jsonl", "jsonl.gz", "txt", "lines", "parquet"]


def _source_files() -> Iterator[str]:
    """The standard library's .py files, sorted by path, without the SKIPPED names."""
    root = sysconfig.get_paths()["stdlib"]
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED and not d.startswith("."))
        for name in sorted(files):
            if name.endswith(".py") and name[:-3] not in SKIPPED:
                yield os.path.join(folder, name)


def _docstrings(path: str) -> Iterator[str]:
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read(), filename=path)
    except (SyntaxError, ValueError, OSError):
        return  # a file this CPython cannot parse (e.g. a deliberately broken test input)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=True)
            if doc:
                yield doc


def iter_documents() -> Iterator[str]:
    """Every document of the corpus, in its fixed order, each once."""
    import pydoc_data.topics

    seen: set[str] = set()
    topics = pydoc_data.topics.topics
    docs = itertools.chain(
        (d for path in _source_files() for d in _docstrings(path)), (topics[k] for k in sorted(topics))
    )
    for doc in docs:
        if doc not in seen:
            seen.add(doc)
            yield doc


@functools.lru_cache(maxsize=1)
def _all_documents() -> tuple[str, ...]:
    return tuple(iter_documents())


def documents(limit: int | None = None) -> list[str]:
    """The first `limit` documents of the corpus (all of them when None: ~6,500, ~1.9 MB on
    CPython 3.11). A limit reads only as many source files as it needs."""
    if limit is None:
        return list(_all_documents())
    return list(itertools.islice(iter_documents(), limit))


def write_corpus(
    folder: str | os.PathLike[str],
    docs: Sequence[str],
    fmt: CorpusFormat = "jsonl",
    *,
    files: int = 1,
    labels: Sequence[str | int] | None = None,
    class_names: Sequence[str] | None = None,
    text_field: str = "text",
    label_field: str = "label",
) -> list[str]:
    """Writes `docs` as a corpus folder of `files` files of about equal document counts.

    Args:
      fmt: "jsonl" (one JSON object a line), "jsonl.gz", "txt" (one document per file: one
        file per document, `files` ignored), "lines" (.txt, one document per line: newlines
        inside a document become spaces) or "parquet" (a string column, with the schema
        metadata Hugging Face `datasets` writes).
      labels: one label per document, written as the field `label_field` (not for txt/lines).
      class_names: for Parquet with int labels: written as a `datasets` ClassLabel feature.

    Returns:
      The paths written, in order.
    """
    if labels is not None and len(labels) != len(docs):
        raise ValueError(f"Expected one label per document. Received: {len(labels)} for {len(docs)}")
    if fmt == "txt":
        groups = [[i] for i in range(len(docs))]
    else:
        bounds = [round(len(docs) * k / files) for k in range(files + 1)]
        groups = [list(range(a, b)) for a, b in itertools.pairwise(bounds)]
    suffix = {
        "jsonl": ".jsonl",
        "jsonl.gz": ".jsonl.gz",
        "txt": ".txt",
        "lines": ".txt",
        "parquet": ".parquet",
    }
    paths = []
    for k, group in enumerate(groups):
        path = storage.join(str(folder), f"part-{k:05d}{suffix[fmt]}")
        rows = [(docs[i], None if labels is None else labels[i]) for i in group]
        storage.write_atomic(
            path, _file_bytes(rows, fmt, text_field, label_field, class_names), overwrite=True
        )
        paths.append(path)
    return paths


def _file_bytes(
    rows: list[tuple[str, str | int | None]],
    fmt: str,
    text_field: str,
    label_field: str,
    class_names: Sequence[str] | None,
) -> bytes:
    if fmt in ("jsonl", "jsonl.gz"):
        lines = [
            json.dumps({text_field: t} | ({} if y is None else {label_field: y}), ensure_ascii=False)
            for t, y in rows
        ]
        data = "".join(line + "\n" for line in lines).encode("utf-8")
        return gzip.compress(data, mtime=0) if fmt == "jsonl.gz" else data
    if fmt == "txt":
        return rows[0][0].encode("utf-8")
    if fmt == "lines":
        return "".join(" ".join(t.splitlines()) + "\n" for t, _ in rows).encode("utf-8")
    return _parquet_bytes(rows, text_field, label_field, class_names)


def _parquet_bytes(
    rows: list[tuple[str, str | int | None]],
    text_field: str,
    label_field: str,
    class_names: Sequence[str] | None,
) -> bytes:
    """A Parquet file as `datasets.Dataset.to_parquet` writes one: the features as JSON in the
    schema's `huggingface` metadata, strings as `string`, labels as int64 (ClassLabel) or text."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    features: dict[str, object] = {text_field: {"dtype": "string", "_type": "Value"}}
    columns = {text_field: pa.array([t for t, _ in rows], pa.string())}
    if rows and rows[0][1] is not None:
        labels = [y for _, y in rows]
        if class_names is not None:
            features[label_field] = {"names": list(class_names), "_type": "ClassLabel"}
            columns[label_field] = pa.array(labels, pa.int64())
        else:
            kind = "string" if isinstance(labels[0], str) else "int64"
            features[label_field] = {"dtype": kind, "_type": "Value"}
            columns[label_field] = pa.array(labels, pa.string() if kind == "string" else pa.int64())
    table = pa.table(columns).replace_schema_metadata(
        {"huggingface": json.dumps({"info": {"features": features}})}
    )
    out = io.BytesIO()
    pq.write_table(table, out, row_group_size=1000)  # datasets' default writer batch size
    return out.getvalue()

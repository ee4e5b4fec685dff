"""The public surface: `tfpipe/__init__.py` and the API table (docs/reference/api.md, "The
public names") agree, every error and warning lives in `tfpipe/errors.py` and is
`tfpipe.<Name>`, and every class or function the README or the docs name is reachable by the
name it is given."""

from __future__ import annotations

import ast
import pathlib
import re
import subprocess
import sys
import warnings

import pytest

import tfpipe

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tfpipe"
API_PAGE = (ROOT / "docs" / "reference" / "api.md").read_text()
# What a user reads: the README and every page of the docs.
DOC_TEXT = "\n".join(
    p.read_text()
    for p in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    if "scripts" not in p.parts
)
# Named in the docs as a design term; no public function takes or returns it. The modalities'
# halves are named by docs/design.md, the page for whoever adds a modality inside tfpipe.
DESIGN_TERMS = {"ConvertPlan", "Kind", "BenchHalf", "TextRows", "Mixing"}
MANIFEST_FILE = "tfpipe.json"  # a file name, not a Python path


def api_section() -> str:
    return API_PAGE.split("\n## The public names\n", 1)[1].split("\n## ", 1)[0]


def listed_names() -> set[str]:
    """The names in the first column of the section's tables (`build(data, ...)` is `build`)."""
    names = set()
    for line in api_section().splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            names |= set(re.findall(r"`([A-Za-z_]\w*)", first))
    return names


def dotted_paths() -> set[str]:
    """Every `tfpipe.<...>` path the section writes."""
    return set(re.findall(r"`(tfpipe(?:\.\w+)+)`", api_section())) - {MANIFEST_FILE}


def resolve(path: str) -> object:
    obj: object = tfpipe
    for part in path.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


def test_init_and_the_api_table_list_the_same_names():
    assert listed_names() == set(tfpipe.__all__)


def test_every_path_the_api_table_lists_is_reachable():
    paths = dotted_paths()
    assert {"tfpipe.resume.Position", "tfpipe.testing.LocalGCS", "tfpipe.beam.WriteDataset"} <= paths
    for path in sorted(paths):
        assert resolve(path) is not None, path


@pytest.mark.slow
def test_public_names_load_without_tensorflow():
    code = (
        "import sys, tfpipe\nfor n in tfpipe.__all__: getattr(tfpipe, n)\nprint('tensorflow' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"


def _classes() -> dict[str, tuple[str, list[str]]]:
    """name -> (module file, base names) of every class tfpipe defines."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = [b.id if isinstance(b, ast.Name) else ast.unparse(b) for b in node.bases]
                found[node.name] = (str(path.relative_to(PACKAGE)), bases)
    return found


def test_every_error_and_warning_is_defined_in_errors_and_exported():
    classes = _classes()
    throwable = {n for n, (_, bases) in classes.items() if {"Exception", "UserWarning"} & set(bases)}
    grew = True
    while grew:  # subclasses of those, at any depth
        more = {n for n, (_, bases) in classes.items() if set(bases) & throwable} - throwable
        throwable |= more
        grew = bool(more)
    outside = sorted(f"{classes[n][0]}: {n}" for n in throwable if classes[n][0] != "errors.py")
    assert outside == []
    assert throwable <= set(tfpipe.__all__)
    assert all(issubclass(getattr(tfpipe, n), tfpipe.TfpipeError | tfpipe.TfpipeWarning) for n in throwable)


def test_except_and_filterwarnings_by_the_top_level_name():
    with pytest.raises(tfpipe.ConfigError, match="batch_size must be"):
        tfpipe.plan("/nowhere", batch_size=0)
    with pytest.raises(tfpipe.TfpipeError):
        tfpipe.BenchConfig(hosts=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=tfpipe.TfpipeWarning)
        warnings.warn("said", tfpipe.DefaultWarning, stacklevel=1)
    assert caught == []
    # The modules that raise them keep their old names.
    from tfpipe.pipeline import DefaultWarning
    from tfpipe.storage import StorageError

    assert (DefaultWarning, StorageError) == (tfpipe.DefaultWarning, tfpipe.StorageError)


def test_every_class_and_function_the_docs_name_is_reachable_by_that_name():
    classes = _classes()
    functions = {
        node.name
        for path in PACKAGE.rglob("*.py")
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")
    }
    listed = {path.rsplit(".", 1)[1] for path in dotted_paths()}
    unreachable = []
    for token, call in set(re.findall(r"`(tfpipe(?:\.\w+)+|[A-Za-z_]\w*)(\(?)", DOC_TEXT)):
        if token == MANIFEST_FILE:
            continue
        if token.startswith("tfpipe."):
            try:
                resolve(token)
            except AttributeError:
                unreachable.append(token)
            continue
        named = (token in classes and token[0].isupper()) or (call and token in functions)
        if named and not hasattr(tfpipe, token) and token not in listed | DESIGN_TERMS:
            unreachable.append(token)
    assert sorted(unreachable) == []

"""The import graph: no circle anywhere, and the core never imports the optional Beam engine
(it is found by name). Read from the source, every import counted,
those inside functions and under TYPE_CHECKING too."""

import ast
import functools
import pathlib

import tfpipe

PACKAGE = pathlib.Path(tfpipe.__file__).parent


@functools.cache  # parsed once for the module's tests, which only read it
def imports() -> dict[str, set[str]]:
    """module -> the tfpipe modules it imports anywhere in its source."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                graph[module] |= {a.name for a in node.names if a.name in modules}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(
                        [*package.split(".")[: len(package.split(".")) - node.level + 1], base]
                    ).strip(".")
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    graph[module] |= {full} if full in modules else ({base} if base in modules else set())
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle_anywhere():
    """Not one circle, counting imports inside functions and under TYPE_CHECKING."""
    assert circles(imports()) == []


def test_type_checking_imports_are_counted():
    # order.py imports PipelineConfig only for type checking: that edge is in the graph.
    assert "tfpipe.pipeline.config" in imports()["tfpipe.pipeline.order"]


def test_only_beam_imports_beam():
    graph = imports()
    users = sorted(
        m
        for m, deps in graph.items()
        if not m.startswith("tfpipe.beam") and any(d.startswith("tfpipe.beam") for d in deps)
    )
    assert users == []


def test_bench_flows_one_way():
    """bench: results (plain types), then the measuring modules, then the verdict's arithmetic
    and advice, then the report, then the conclusion that makes it (DESIGN.md's layout)."""
    graph = imports()
    assert [c for c in circles(graph) if any(m.startswith("tfpipe.bench") for m in c)] == []

    def bench_deps(module: str) -> set[str]:
        return {d.removeprefix("tfpipe.bench.") for d in graph[module] if d.startswith("tfpipe.bench.")}

    assert bench_deps("tfpipe.bench.results") == set()
    assert bench_deps("tfpipe.bench.wait") == set()
    later = {"verdict", "advice", "report", "conclusion", "run", "render", "plot"}
    measuring = ["producer", "consumer", "models", "reading", "simulate", "data"]
    measuring += [m.removeprefix("tfpipe.bench.") for m in graph if m.startswith("tfpipe.bench.profiles")]
    for name in measuring:
        assert bench_deps(f"tfpipe.bench.{name}") & later == set(), name
    assert bench_deps("tfpipe.bench.verdict") & later == set()
    assert bench_deps("tfpipe.bench.advice") & (later - {"verdict"}) == set()
    assert bench_deps("tfpipe.bench.report") & {"conclusion", "run", "render", "plot"} == set()


def test_packing_is_pure_and_below_presets_and_pipeline():
    """tfpipe.packing (the packing rules) imports no TensorFlow and nothing of tfpipe but errors;
    the text preset, the graph packer, the text stages and bench stand on it."""
    graph = imports()
    packing = {m for m in graph if m.split(".")[:2] == ["tfpipe", "packing"]}
    assert {"tfpipe.packing.spec", "tfpipe.packing.fill", "tfpipe.packing.reference"} <= packing
    for module in packing:
        assert graph[module] - packing <= {"tfpipe.errors"}, module
    for path in (PACKAGE / "packing").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not {n.split(".")[0] for n in names} & {"tensorflow", "keras", "jax"}, path
    users = ["tfpipe.presets.text", "tfpipe.pipeline.packing", "tfpipe.pipeline.text_stages"]
    users += [m for m in graph if m.startswith("tfpipe.bench") and graph[m] & packing]
    assert all(graph[u] & packing for u in users) and len(users) > 3

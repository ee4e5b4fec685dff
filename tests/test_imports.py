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
    assert "tfpipe.pipeline.config" in imports()["tfpipe.pipeline.order.resumable"]


def test_only_beam_imports_beam():
    graph = imports()
    users = sorted(
        m
        for m, deps in graph.items()
        if not m.startswith("tfpipe.beam") and any(d.startswith("tfpipe.beam") for d in deps)
    )
    assert users == []


def bench_layer(module: str) -> int:
    """bench's stage of a module: 0 the base every stage reads (config, results, wait, fmt,
    reference, profiles), 1 measure, 2 judge, 3 present, 4 the run that drives them."""
    rest = module.removeprefix("tfpipe.bench").lstrip(".")
    stage = rest.split(".")[0]
    return {"measure": 1, "judge": 2, "present": 3, "run": 4, "": 4}.get(stage, 0)


def test_bench_flows_one_way():
    """bench flows measure -> judge -> present (DESIGN.md's layout): no module imports one of a
    later stage, the base imports no stage, and inside judge the verdict's arithmetic, the
    advice, the report that holds them and the conclusion that makes it come in that order."""
    graph = imports()
    assert [c for c in circles(graph) if any(m.startswith("tfpipe.bench") for m in c)] == []
    bench = [m for m in graph if m == "tfpipe.bench" or m.startswith("tfpipe.bench.")]
    assert {bench_layer(m) for m in bench} == {0, 1, 2, 3, 4}
    upward = sorted(
        (m, d)
        for m in bench
        for d in graph[m]
        if d.startswith("tfpipe.bench") and bench_layer(d) > bench_layer(m)
    )
    assert upward == []
    # The stages meet only in results (measure's output) and the Report (judge's): judge and
    # present read no measuring module.
    past_measure = sorted(
        (m, d)
        for m in bench
        if bench_layer(m) in (2, 3)
        for d in graph[m]
        if bench_layer(d) == 1 and d in bench
    )
    assert past_measure == []

    def bench_deps(module: str) -> set[str]:
        return {d.removeprefix("tfpipe.bench.") for d in graph[module] if d.startswith("tfpipe.bench.")}

    for leaf in ("results", "wait", "fmt", "reference"):
        assert bench_deps(f"tfpipe.bench.{leaf}") == set(), leaf
    later = {"judge.advice", "judge.report", "judge.conclusion"}
    assert bench_deps("tfpipe.bench.judge.verdict") & later == set()
    assert bench_deps("tfpipe.bench.judge.tokens") & later == set()
    assert bench_deps("tfpipe.bench.judge.advice") & (later - {"judge.advice"}) == set()
    assert bench_deps("tfpipe.bench.judge.report") & {"judge.conclusion"} == set()


def test_bench_layers_are_read_from_the_path():
    assert [bench_layer(m) for m in ("tfpipe.bench.results", "tfpipe.bench.profiles.read")] == [0, 0]
    assert bench_layer("tfpipe.bench.measure.producer") == 1
    assert bench_layer("tfpipe.bench.judge.conclusion") == 2
    assert bench_layer("tfpipe.bench.present.render") == 3
    assert [bench_layer(m) for m in ("tfpipe.bench.run", "tfpipe.bench")] == [4, 4]


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
    users = ["tfpipe.presets.text", "tfpipe.pipeline.text.packer", "tfpipe.pipeline.text.stages"]
    users += [m for m in graph if m.startswith("tfpipe.bench") and graph[m] & packing]
    assert all(graph[u] & packing for u in users) and len(users) > 3

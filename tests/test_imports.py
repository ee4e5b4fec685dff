"""The import graph: no circle anywhere, and the core never imports the optional Beam engine
(it is found by name). Read from the source, every import counted,
those inside functions and under TYPE_CHECKING too.

And what the layout promises (docs/design.md, "The layout"): the on-disk format in one folder
below everything that reads or writes it; the pipeline's packages in one direction (read, order,
text, stages, mixture, then the build); few modules loose at the top of tfpipe/ and of
tfpipe/pipeline/; an alias that names the module it imports."""

import ast
import functools
import pathlib

import tfpipe

PACKAGE = pathlib.Path(tfpipe.__file__).parent


@functools.cache
def module_paths() -> dict[str, pathlib.Path]:
    """Every tfpipe module by its dotted name (a package by its own), with its file."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


@functools.cache  # parsed once for the module's tests, which only read it
def imports() -> dict[str, set[str]]:
    """module -> the tfpipe modules it imports anywhere in its source."""
    modules = module_paths()
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
    # order/resumable.py imports PipelineConfig only for type checking: that edge is in the graph.
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


FORMAT_BASE = {"tfpipe.errors", "tfpipe._tf", "tfpipe._version"}  # and tfpipe.storage


def test_the_format_stands_below_what_writes_and_reads_it():
    """tfpipe/format (the manifest, shard names, TFRecord framing, the Example codec, the schema,
    commit markers, verify: the on-disk contract) imports nothing of tfpipe but itself, storage,
    errors and the lazy TensorFlow import; convert writes it, the pipeline, bench and the command
    line read it."""
    graph = imports()
    fmt = {m for m in graph if m.split(".")[:2] == ["tfpipe", "format"]}
    contract = {"manifest", "manifest_text", "manifest_checks", "shardnames", "tfrecord", "codec"}
    assert {f"tfpipe.format.{m}" for m in contract | {"schema", "commit_markers", "verify"}} <= fmt
    for module in fmt:
        outside = {d for d in graph[module] - fmt if d.split(".")[:2] != ["tfpipe", "storage"]}
        assert outside <= FORMAT_BASE, (module, outside)
    readers = {m.split(".")[1] for m in graph if m not in fmt and "." in m and graph[m] & fmt}
    assert {"convert", "pipeline", "bench", "cli", "presets"} <= readers


# The pipeline's packages by floor: a module imports its own floor (its own package) or lower.
# config (PipelineConfig) is read by every floor; checks are the refusals the build and the
# mixture share; the build is plan()'s steps at the top (build, request, decide, assemble, steps).
PIPELINE_FLOORS = {"config": 0, "read": 1, "order": 2, "text": 3, "stages": 4, "checks": 4, "mixture": 5}
THE_BUILD = 6


def pipeline_part(module: str) -> str:
    """The package (read, order, ...) or top-level module of tfpipe.pipeline a module is in."""
    return module.removeprefix("tfpipe.pipeline").lstrip(".").split(".")[0]


def test_the_pipelines_packages_flow_one_way():
    """read -> order -> text -> stages -> mixture -> the build, never back: reading knows no
    order, the order no text, the stages no mixture, and a mixture plans each source with the
    plan it is handed, never the build's own."""
    graph = imports()
    pipeline = [m for m in graph if m.split(".")[:2] == ["tfpipe", "pipeline"] and m != "tfpipe.pipeline"]
    floor = {m: PIPELINE_FLOORS.get(pipeline_part(m), THE_BUILD) for m in pipeline}
    assert {floor[m] for m in pipeline} == {0, 1, 2, 3, 4, 5, THE_BUILD}
    wrong = sorted(
        (m, d)
        for m in pipeline
        for d in graph[m]
        if d in floor
        and (
            floor[d] > floor[m] or (floor[d] == floor[m] < THE_BUILD and pipeline_part(d) != pipeline_part(m))
        )
    )
    assert wrong == []


def test_few_modules_are_loose_at_the_top():
    """At most 8 modules loose at tfpipe/'s top (__init__, __main__, _version aside), at most 10
    at tfpipe/pipeline/'s: the rest sit in a folder that says what they are."""
    top = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__", "_version"))
    assert len(top) <= 8, top
    pipeline = sorted(p.stem for p in (PACKAGE / "pipeline").glob("*.py") if p.stem != "__init__")
    assert len(pipeline) <= 10, pipeline


def aliases_allowed(module: str) -> set[str]:
    """The names `module` may be imported as: its own, its package's and its own joined
    (`text_stages` for tfpipe.pipeline.text.stages), its own with `_module`."""
    package, _, name = module.rpartition(".")
    return {name, f"{package.rpartition('.')[2]}_{name}", f"{name}_module"}


def test_an_alias_names_the_module_it_imports():
    """A tfpipe module imported under another name is named for what it is, never after a
    module that is gone (`reader as textfiles` named tfpipe/textfiles.py years after it went)."""
    modules = module_paths()
    wrong = []
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                named = [(f"{node.module}.{a.name}", a.asname) for a in node.names]
            elif isinstance(node, ast.Import):
                named = [(a.name, a.asname) for a in node.names]
            else:
                continue
            wrong += [
                f"{module}: {target} as {alias}"
                for target, alias in named
                if alias and target in modules and alias not in aliases_allowed(target)
            ]
    assert wrong == []


def test_aliases_allowed_are_read_from_the_name():
    assert aliases_allowed("tfpipe.pipeline.text.stages") == {"stages", "text_stages", "stages_module"}
    assert "textfiles" not in aliases_allowed("tfpipe.convert.text.reader")

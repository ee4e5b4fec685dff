"""The import graph: no circle anywhere, and the core never imports the optional Beam engine
(it is found by name). Read from the source, every import counted,
those inside functions and under TYPE_CHECKING too.

And what the layout promises (docs/design.md, "The layout"): the on-disk format in one folder
below everything that reads or writes it; the pipeline's packages in one direction (read, order,
stages, mixture, then the build); each modality's files in its own folder, below what dispatches
to it, and no module outside them naming one; few modules loose at the top of tfpipe/ and of
tfpipe/pipeline/; an alias that names the module it imports."""

import ast
import functools
import pathlib

import tfpipe
from tfpipe.modalities import BUILTINS, modalities

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


# A modality's bench half by stage: what it reads and measures (its data, its counts, the
# baseline it times), the figures and words it concludes, and how its report section shows.
MODALITY_BENCH_LAYERS = {"figures": 2, "advice": 2, "section": 2, "present": 3}


def bench_layer(module: str) -> int:
    """bench's stage of a module: 0 the base every stage reads (config, results, wait, fmt,
    reference, profiles), 1 measure, 2 judge, 3 present, 4 the run that drives them; a
    modality's bench half (`tfpipe.modalities.<name>.bench.*`) by MODALITY_BENCH_LAYERS, else 1."""
    if module.split(".")[1:2] == ["modalities"]:
        return MODALITY_BENCH_LAYERS.get(module.rpartition(".")[2], 1)
    rest = module.removeprefix("tfpipe.bench").lstrip(".")
    stage = rest.split(".")[0]
    return {"measure": 1, "judge": 2, "present": 3, "run": 4, "": 4}.get(stage, 0)


def in_bench(module: str) -> bool:
    """bench's own modules and the modalities' bench halves."""
    parts = module.split(".")
    return parts[:2] == ["tfpipe", "bench"] or (parts[1:2] == ["modalities"] and parts[3:4] == ["bench"])


def test_bench_flows_one_way():
    """bench flows measure -> judge -> present (DESIGN.md's layout): no module imports one of a
    later stage, the base imports no stage, and inside judge the verdict's arithmetic, the
    advice, the report that holds them and the conclusion that makes it come in that order."""
    graph = imports()
    assert [c for c in circles(graph) if any(m.startswith("tfpipe.bench") for m in c)] == []
    bench = [m for m in graph if in_bench(m) and m != "tfpipe.modalities.text.bench"]
    assert {bench_layer(m) for m in bench} == {0, 1, 2, 3, 4}
    upward = sorted(
        (m, d) for m in bench for d in graph[m] if in_bench(d) and bench_layer(d) > bench_layer(m)
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
    assert bench_deps("tfpipe.modalities.text.bench.figures") & later == set()
    assert bench_deps("tfpipe.bench.judge.advice") & (later - {"judge.advice"}) == set()
    assert bench_deps("tfpipe.bench.judge.report") & {"judge.conclusion"} == set()


def test_bench_layers_are_read_from_the_path():
    assert [bench_layer(m) for m in ("tfpipe.bench.results", "tfpipe.bench.profiles.read")] == [0, 0]
    assert bench_layer("tfpipe.bench.measure.producer") == 1
    assert bench_layer("tfpipe.bench.judge.conclusion") == 2
    assert bench_layer("tfpipe.bench.present.render") == 3
    assert [bench_layer(m) for m in ("tfpipe.bench.run", "tfpipe.bench")] == [4, 4]
    assert bench_layer("tfpipe.modalities.text.bench.counts") == 1
    assert bench_layer("tfpipe.modalities.text.bench.advice") == 2
    assert bench_layer("tfpipe.modalities.text.bench.present") == 3


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
    users = [
        "tfpipe.modalities.text.preset",
        "tfpipe.modalities.text.packer",
        "tfpipe.modalities.text.stages",
    ]
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
    assert {"convert", "pipeline", "bench", "cli", "modalities"} <= readers


# The pipeline's packages by floor: a module imports its own floor (its own package) or lower.
# config (PipelineConfig) is read by every floor; checks are the refusals the build and the
# mixture share; the build is plan()'s steps at the top (build, request, decide, assemble, steps).
PIPELINE_FLOORS = {"config": 0, "read": 1, "order": 2, "stages": 4, "checks": 4, "mixture": 5}
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
    assert {floor[m] for m in pipeline} == {0, 1, 2, 4, 5, THE_BUILD}
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
    """The names `module` may be imported as: its own, a package's it is in and its own joined
    (`text_stages` for tfpipe.modalities.text.stages, `tables_scan` for
    tfpipe.modalities.tables.convert.scan), its own with `_module`."""
    *packages, name = module.split(".")
    return {name, f"{name}_module", *(f"{p}_{name}" for p in packages[1:])}


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
    assert aliases_allowed("tfpipe.modalities.text.stages") == {
        "stages",
        "text_stages",
        "modalities_stages",
        "stages_module",
    }
    assert "textfiles" not in aliases_allowed("tfpipe.modalities.text.convert.reader")


# Function-level imports of tfpipe's own modules without a comment: none (this list may only
# shrink).
UNSAID_FOR_NOW: set[str] = set()


def function_level_imports() -> list[tuple[str, int, bool]]:
    """(file, line, whether a comment says why) of each import of a tfpipe module inside a
    function: the comment on its line, or above the run of import lines it belongs to."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        lines = text.splitlines()
        seen = set()
        for fn in ast.walk(ast.parse(text)):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                if not isinstance(node, ast.Import | ast.ImportFrom) or node.lineno in seen:
                    continue
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                if getattr(node, "level", 0) or not any(n.split(".")[0] == "tfpipe" for n in names):
                    continue
                seen.add(node.lineno)
                i = node.lineno - 1
                said = "#" in lines[i]
                while not said and i > 0:
                    i -= 1
                    line = lines[i].strip()
                    said = line.startswith("#")
                    if not (line.startswith(("import ", "from ")) or line in ("", ")") or line.endswith(",")):
                        break
                out.append((str(path.relative_to(PACKAGE.parent)), node.lineno, said))
    return out


def test_a_function_level_import_says_why():
    """An own module imported inside a function says what importing it at the top would cost
    (TensorFlow, Beam, rich: its time) or which circle it would close; one that costs nothing
    and closes none belongs at the top."""
    unsaid = sorted({path for path, _, said in function_level_imports() if not said})
    assert set(unsaid) <= UNSAID_FOR_NOW, unsaid


# ---- the modalities ----


def modality_of(module: str) -> str | None:
    """The modality whose folder holds `module` (tfpipe.modalities.<name>...), else None: the
    registry (tfpipe.modalities) and the base (tfpipe.modalities.modality) are no modality's."""
    parts = module.split(".")
    return parts[2] if parts[1:2] == ["modalities"] and len(parts) > 2 and parts[2] != "modality" else None


# What dispatches to a modality: convert's core, build() and its steps, bench's run, the command
# line, the public face, and the registry that finds the modalities. No modality imports one.
DISPATCHERS = {
    "tfpipe",
    "tfpipe.modalities",
    "tfpipe.convert",
    "tfpipe.convert.run",
    "tfpipe.convert.detect",
    "tfpipe.pipeline",
    "tfpipe.pipeline.build",
    "tfpipe.pipeline.request",
    "tfpipe.pipeline.decide",
    "tfpipe.pipeline.assemble",
    "tfpipe.pipeline.steps",
    "tfpipe.bench",
    "tfpipe.bench.run",
}

# A module outside a modality's folder that imports one of its modules, and why. Nothing else
# does: the registry loads the modalities by name (`tfpipe.modalities.BUILTINS`).
IMPORTS_A_MODALITY = {
    ("tfpipe", "tfpipe.modalities.text.preset"): "the public face re-exports text's attention_mask, "
    "loaded on first use",
    ("tfpipe.convert.config", "tfpipe.modalities.text.convert.specialtokens"): "ConvertConfig checks "
    "every convert option when it is made, text's special tokens among them",
    ("tfpipe.convert.formats.jsonlfile", "tfpipe.modalities.text.convert.listing"): "tables read JSON "
    "Lines through text's line decoder, the one decoder of text files",
    ("tfpipe.convert.formats.jsonlfile", "tfpipe.modalities.text.convert.reader"): "as above",
}


def test_modalities_stand_below_what_dispatches_to_them():
    """A modality imports no dispatcher (convert's core, build's steps, bench's run, the command
    line, the registry) and no other modality; outside the modalities' folders only the modules
    of IMPORTS_A_MODALITY import one; the registry loads each built-in by its module's name."""
    graph = imports()
    upward = sorted(
        (m, d)
        for m in graph
        if modality_of(m)
        for d in graph[m]
        if d in DISPATCHERS
        or d.startswith("tfpipe.cli")
        or (modality_of(d) and modality_of(d) != modality_of(m))
    )
    assert upward == []
    into = {(m, d) for m in graph if not modality_of(m) for d in graph[m] if modality_of(d)}
    assert into == set(IMPORTS_A_MODALITY)
    assert {modality_of(b) for b in BUILTINS} == {"images", "tables", "text"}
    assert not graph["tfpipe.modalities"] - {"tfpipe.errors", "tfpipe.modalities.modality"}


def modality_names() -> set[str]:
    """What names a modality: its name, its preset's, the layouts its manifests carry."""
    return {n for m in modalities() for n in (m.name, m.preset.name, *m.layouts)}


# Lines outside the modalities' folders that hold a modality's name as a word of another
# meaning, by (file, a fragment of the line): the JSON field a corpus reads by default, a
# column's role, a message's noun.
NOT_A_MODALITY = {
    ("tfpipe/convert/config.py", 'text_field: str = "text"'),
    ("tfpipe/synthetic/text.py", 'text_field: str = "text"'),
    ("tfpipe/convert/formats/textcolumns.py", '("text", "label")'),
    ("tfpipe/convert/formats/textcolumns.py", 'if what == "text" else "--label"'),
    ("tfpipe/convert/formats/textfile.py", 'what: str = "text"'),  # three functions' argument
}
# The decisions by modality left outside the modalities' folders, by (file, a fragment of the
# line), each with its reason. At most 8 lines.
DECISIONS_LEFT = {
    ("tfpipe/format/manifest.py", 'if self.text is None else {"text": self.text.to_json()}'): "the "
    "format: a split's text entry, written when the split has one (docs/reference/format.md)",
    ("tfpipe/format/manifest.py", 'text=None if obj.get("text") is None'): "the format: the same entry, "
    "read back",
    ("tfpipe/format/verify.py", "if text is None or text.lengths is None:"): "the format: verify checks "
    "the lengths file a text split's entry lists",
    ("tfpipe/beam/write.py", '"table",'): "Beam's WriteDataset writes a table from a PCollection of "
    "rows: its manifest's layout",
    ("tfpipe/bench/config.py", 'DEFAULT_PIPELINE = "imagenet"'): "what bench plans without data or a "
    "manifest: the ImageNet benchmark the reference table's default rows were published for",
    ("tfpipe/bench/measure/consumer.py", "elif packing is not None and packing !="): "a text "
    "reference row's slot tokens, said against the packing given (None: not given)",
}


def matching(found: set[tuple[str, str]], entries: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """The found lines an entry (file, fragment) covers."""
    return {(f, line) for f, line in found if any(f == e and fragment in line for e, fragment in entries)}


def named_modalities() -> set[tuple[str, str]]:
    """(file, line) of every line outside the modalities' folders that names a modality: a
    string constant that is one of `modality_names()` (docstrings aside), or a test of a `text`
    or `packing` being None."""
    names, found = modality_names(), set()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).as_posix()
        parts = rel.split("/")
        if parts[1] == "modalities" and len(parts) > 3:
            continue  # a modality's own files
        source = path.read_text()
        lines = source.splitlines()
        tree = ast.parse(source)
        docs = {
            id(node.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        }
        for node in ast.walk(tree):
            named = isinstance(node, ast.Constant) and node.value in names and id(node) not in docs
            if isinstance(node, ast.Compare) and any(isinstance(o, (ast.Is, ast.IsNot)) for o in node.ops):
                left = node.left
                named = (left.attr if isinstance(left, ast.Attribute) else getattr(left, "id", "")) in (
                    "text",
                    "packing",
                )
            if named:
                found.add((rel, lines[node.lineno - 1].strip()))
    return found


def test_no_module_names_a_modality_outside_its_own_files():
    """Convert's core, build(), bench and the command line ask a dataset's modality and never
    name one: outside tfpipe/modalities/<name>/ the lines that name one are the word uses of
    NOT_A_MODALITY and the at most 8 decisions of DECISIONS_LEFT, each with its reason."""
    found = named_modalities()
    decisions, words = matching(found, set(DECISIONS_LEFT)), matching(found, NOT_A_MODALITY)
    assert found - decisions - words == set()
    assert len(decisions) <= 8, sorted(decisions)
    for entry in set(DECISIONS_LEFT) | NOT_A_MODALITY:  # each still there, or it goes
        assert matching(found, {entry}), entry

"""The size of the resumable order's graph, pinned: every dataset function is instantiated again,
through TensorFlow's graph optimizer, for each new iterator (each `iter()`, each Keras
validation), so what a pipeline costs to start grows with its dataset functions and their nodes
(benchmarks/startup_cost.py measures it; benchmarks/RESULTS.md says where the CPU goes).

Order version 1 took 28 functions and 1,054 nodes for an image pipeline (cache="none"), ~650
of them a hand-written SplitMix64 hash; its order alone nested five functions per group. A
change that raises a bound here brings that cost back: measure it before raising it. No
measurement here: the graph is serialized and counted."""

from __future__ import annotations

import pytest

import tfpipe
from tfpipe.pipeline.order import stream as order_stream

from support.order_spec import spec

tf = pytest.importorskip("tensorflow")

_BRANCHES = {"If", "StatelessIf", "While", "StatelessWhile"}


def graph_size(ds) -> tuple[int, int]:
    """(dataset functions, nodes) of `ds`'s graph: the functions a new iterator instantiates
    (cond and loop branches are inlined into their function, so they count as its nodes)."""
    g = ds._as_serialized_graph(external_state_policy=tf.data.experimental.ExternalStatePolicy.WARN)
    graph = tf.compat.v1.GraphDef()
    graph.ParseFromString(g.numpy())
    functions = graph.library.function
    branches = {
        attr.func.name
        for f in functions
        for n in f.node_def
        if n.op in _BRANCHES
        for attr in n.attr.values()
        if attr.func.name
    }
    nodes = len(graph.node) + sum(len(f.node_def) for f in functions)
    return sum(f.signature.name not in branches for f in functions), nodes


def read(path, size, count):
    """A shard read with no function of its own (the order's functions alone are counted)."""
    records = tf.strings.as_string(tf.range(count))
    return tf.data.Dataset.from_tensors((records, tf.fill(tf.shape(records), "")))


# (cached, keys) -> (dataset functions, nodes) at most: from_start, group, arrange, the
# interleave's per-file runs (streamed), and the map each `rebatch` adds.
# Measured with TF 2.21: 7 and 209/226 streamed, 6 and 370/389 cached (order version 1: 9
# functions and 543-841 nodes).
BOUNDS = {(False, False): (7, 220), (False, True): (7, 240), (True, False): (6, 380), (True, True): (6, 400)}


@pytest.mark.parametrize(("cached", "keys"), list(BOUNDS))
def test_the_order_alone_is_a_few_small_functions(cached, keys):
    s = spec((5, 3, 7, 1), cycle=2, window=4, run=2)
    ds = order_stream.stream(
        s,
        read,
        lambda: tf.constant(0, tf.int64),
        cached=cached,
        sources=False,
        keys=keys,
        batch=None,
        parallelism=1,
    )
    functions, nodes = graph_size(ds)
    most_functions, most_nodes = BOUNDS[cached, keys]
    assert functions <= most_functions and nodes <= most_nodes, (functions, nodes)


def test_an_image_pipeline_s_graph(image_ds):
    """build() for training, streamed: the order, the verified shard read and the decode (12
    functions and 586 nodes measured; 18 and 604 before raw.py; order version 1: 22 and 1,054)."""
    functions, nodes = graph_size(tfpipe.build(image_ds, batch_size=4, image_size=16, seed=1, cache="none"))
    assert functions <= 12 and nodes <= 600, (functions, nodes)


def test_a_text_pipeline_s_graph(text_ds):
    """build() for text, cached: the order, the verified shard read and the packer (15 functions
    and 1,332 nodes measured, ~700 of them the packer's, its loop included)."""
    functions, nodes = graph_size(tfpipe.build(text_ds, batch_size=4, sequence_length=64, seed=1))
    assert functions <= 15 and nodes <= 1350, (functions, nodes)


def _library(ds):
    g = ds._as_serialized_graph(external_state_policy=tf.data.experimental.ExternalStatePolicy.WARN)
    graph = tf.compat.v1.GraphDef()
    graph.ParseFromString(g.numpy())
    return graph.library.function


@pytest.mark.parametrize("kind", ["images", "text"])
def test_dataset_functions_run_on_one_device(kind, image_ds, text_ds):
    """Each of tfpipe's dataset functions carries `experimental_ints_on_device` (instantiated
    on one device, without grappler: _tf.plain), except those with an int32 output among
    several, which a later tf.data graph rewrite cannot take with it; and that rewrite runs."""
    ds = (
        tfpipe.build(image_ds, batch_size=4, image_size=16, seed=1, cache="none")
        if kind == "images"
        else tfpipe.build(text_ds, batch_size=4, sequence_length=64, seed=1)
    )
    functions = [f for f in _library(ds) if f.signature.name.startswith("__inference_Dataset")]
    one_device = {f.signature.name for f in functions if f.attr["experimental_ints_on_device"].b}
    outputs = {f.signature.name: [a.type for a in f.signature.output_arg] for f in functions}
    rest = {n for n in outputs if n not in one_device}
    assert len(one_device) >= 8 and all(len(outputs[n]) > 1 and tf.int32 in outputs[n] for n in rest), rest
    # Those are small (casts, the label guard): the text packer yields int64 rows, cast per batch.
    sizes = {f.signature.name: len(f.node_def) for f in functions}
    assert all(sizes[n] <= 30 for n in rest), {n: sizes[n] for n in rest}
    options = tf.data.Options()
    options.experimental_optimization.map_fusion = True  # a rewrite of the whole graph
    rewritten = ds.map(lambda *e: e).with_options(options)
    assert all(
        a.numpy().tolist() == b.numpy().tolist()
        for a, b in zip(tf.nest.flatten(next(iter(rewritten))), tf.nest.flatten(next(iter(ds))), strict=True)
    )


def test_an_int32_output_among_several_is_traced_once():
    """Such a function leaves `experimental_ints_on_device` off without a second trace (a second
    trace of the text packer cost as much as the first, per build()), and still runs, rewritten
    too."""
    from tfpipe._tf import plain

    traces = []

    def fn(x):
        traces.append(x)
        return x, tf.cast(x, tf.int32) * 2

    ds = tf.data.Dataset.range(3).map(plain(fn))
    (function,) = [f for f in _library(ds) if f.signature.name.startswith("__inference_Dataset")]
    assert len(traces) == 1 and not function.attr["experimental_ints_on_device"].b
    options = tf.data.Options()
    options.experimental_optimization.map_fusion = True
    for got in (ds, ds.map(lambda *e: e).with_options(options)):
        assert [(int(a), int(b)) for a, b in got] == [(0, 0), (1, 2), (2, 4)]

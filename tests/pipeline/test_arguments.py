"""build()'s arguments (tfpipe/pipeline/arguments.py): the typed options by topic, the short
keywords mapped onto them by one table, and every way a field could be said twice refused by
name. A short form plans exactly what its object form plans."""

from __future__ import annotations

import dataclasses

import pytest

import tfpipe
from tfpipe.errors import ConfigError
from tfpipe.pipeline import arguments, plan
from tfpipe.pipeline.arguments import SHORT_FORMS
from tfpipe.pipeline.config import TOPIC_OF, PipelineConfig
from tfpipe.presets import declared_options, preset_names

tf = pytest.importorskip("tensorflow")

# Seeded: the plans compare field by field (the resumable order draws a seed when none is given).
SEED = {"seed": 5}


def test_every_option_has_one_topic_and_one_short_form():
    """Each PipelineConfig field but the split sits in exactly one topic under its own name, and
    is a short keyword; the other short forms are the hosts' and the mixture's."""
    fields = {f.name for f in dataclasses.fields(PipelineConfig)} - {"split"}
    assert set(TOPIC_OF) == fields
    for name, topic in TOPIC_OF.items():
        assert name in {f.name for f in dataclasses.fields(topic)}, (name, topic)
        assert SHORT_FORMS[name] == (topic, name)
    assert set(SHORT_FORMS) - fields == {"num_hosts", "host_index", "input_context", "weights", "mix_by"}


def test_no_built_in_preset_claims_a_short_form():
    """A built-in preset's options and the short forms never share a name, so a keyword is one
    or the other by the table alone."""
    for name in preset_names():
        assert not declared_options(tfpipe.presets.get_preset(name)) & set(SHORT_FORMS), name


@pytest.mark.parametrize(
    ("short", "typed"),
    [
        ({"seed": 7, "cycle_length": 2}, {"order": tfpipe.Order(seed=7, cycle_length=2)}),
        ({"order": "shuffle_buffer", "seed": 7}, {"order": tfpipe.Order(order="shuffle_buffer", seed=7)}),
        (
            {"cache": "none", "prefetch": 2, **SEED},
            {"tuning": tfpipe.Tuning(cache="none", prefetch=2), **SEED},
        ),
        ({"skip_corrupt": True, **SEED}, {"integrity": tfpipe.Integrity(skip_corrupt=True), **SEED}),
        (
            {"num_hosts": 2, "host_index": 1, **SEED},
            {"hosts": tfpipe.Hosts(num_hosts=2, host_index=1), **SEED},
        ),
    ],
    ids=["order", "order-kind", "tuning", "integrity", "hosts"],
)
def test_a_short_form_plans_what_its_object_plans(table_ds, short, typed):
    a = plan(table_ds, batch_size=8, **short)
    b = plan(table_ds, batch_size=8, **typed)
    assert a.config == b.config and a.files == b.files and a.describe() == b.describe()


def test_eval_remainder_and_the_text_preset_object(table_ds, text_ds):
    a = plan(table_ds, batch_size=8, training=False, pad_remainder=True)
    b = plan(table_ds, batch_size=8, training=False, remainder=tfpipe.Remainder(pad_remainder=True))
    assert a.config == b.config and a.config.pad_remainder is True
    short = plan(text_ds, batch_size=4, sequence_length=64, output="causal_lm", seed=1)
    typed = plan(
        text_ds, batch_size=4, preset=tfpipe.presets.Text(sequence_length=64, output="causal_lm"), seed=1
    )
    named = plan(text_ds, batch_size=4, preset="text", sequence_length=64, output="causal_lm", seed=1)
    assert short.decoder.packing == typed.decoder.packing == named.decoder.packing
    assert short.describe() == typed.describe() == named.describe()


def test_config_is_a_base_the_keywords_override(table_ds):
    cfg = PipelineConfig(seed=5, cache="none", cycle_length=2)
    p = plan(table_ds, batch_size=8, config=cfg, seed=9, split="train")
    assert (p.config.seed, p.config.cache, p.config.cycle_length) == (9, "none", 2)
    with pytest.raises(
        ConfigError, match=r"config= holds every option .* Order would set some of them again"
    ):
        plan(table_ds, batch_size=8, config=cfg, order=tfpipe.Order(seed=1))
    # A keyword sets its one field: the config's other service fields stay as they were.
    served = PipelineConfig(job_name="a", service_peer_timeout=None)
    none = dict.fromkeys(("preset", "split", "hosts", "order", "tuning", "remainder", "integrity"))
    args = arguments.read(
        table_ds, **none, service="grpc://127.0.0.1:1", config=served, short={"processing_mode": "dynamic"}
    )
    got = (args.config.job_name, args.config.service_peer_timeout, args.config.processing_mode, args.service)
    assert got == ("a", None, "dynamic", "grpc://127.0.0.1:1")


def test_a_field_said_twice_is_refused_naming_both(table_ds, text_ds):
    with pytest.raises(ConfigError, match=r"seed= is Order.seed, and order=Order\(...\) is given too"):
        plan(table_ds, batch_size=8, seed=1, order=tfpipe.Order(cycle_length=2))
    with pytest.raises(ConfigError, match=r"cache= is Tuning.cache, and tuning=Tuning\(...\) is given too"):
        plan(table_ds, batch_size=8, cache="none", tuning=tfpipe.Tuning())
    with pytest.raises(ConfigError, match=r"host_index= says what hosts= says"):
        plan(table_ds, batch_size=8, num_hosts=2, host_index=0, hosts=tfpipe.Hosts(num_hosts=2, host_index=0))
    with pytest.raises(
        ConfigError, match=r"output= set options of the preset object .*preset=Text\(\.\.\., output="
    ):
        plan(text_ds, batch_size=4, preset=tfpipe.presets.Text(sequence_length=64), output="packed")
    with pytest.raises(ConfigError, match=r"weights= is Mixture.weights, and the data is a tfpipe.Mixture"):
        plan(tfpipe.Mixture({"a": table_ds, "b": text_ds}), batch_size=8, weights={"a": 1, "b": 1})
    with pytest.raises(ConfigError, match=r"job_name= is DataService.job_name"):
        plan(table_ds, batch_size=8, service=tfpipe.DataService("grpc://127.0.0.1:1"), job_name="x")


@dataclasses.dataclass(frozen=True)
class Seeded:
    """A user's preset whose own option is named like an option of the pipeline."""

    name = "seeded"
    seed: int = 0
    cache: str = "x"

    def bind(self, ctx, options):
        return tfpipe.presets.get_preset("tabular").bind(ctx, {})


def test_a_name_a_short_form_and_the_preset_both_claim_is_refused_naming_both(table_ds):
    """It went to the pipeline without a word: the preset never saw its option."""
    for name in ("seed", "cache"):
        with pytest.raises(ConfigError) as e:
            plan(table_ds, batch_size=8, preset=Seeded(), **{name: 3})
        message = str(e.value)
        topic = SHORT_FORMS[name][0].__name__
        assert f"{name}= is claimed twice: it is build()'s short form of {topic}.{name}" in message
        assert "an option of the preset 'seeded'" in message
    # Each said in its own object, both work: the preset's in the preset, the pipeline's in its topic.
    p = plan(table_ds, batch_size=8, preset=Seeded(seed=3), order=tfpipe.Order(seed=7))
    assert p.config.seed == 7 and p.preset == Seeded(seed=3)


def test_option_objects_check_their_own_values():
    for make, words in [
        (lambda: tfpipe.Order(seed="7"), r"seed must be an int.*Received: seed='7'"),
        (lambda: tfpipe.Order(order="fifo"), r"order must be one of \('resumable', 'shuffle_buffer'\)"),
        (lambda: tfpipe.Tuning(cache="ram"), r"cache must be one of .* Received: cache='ram'"),
        (lambda: tfpipe.Tuning(prefetch=0), r"prefetch must be AUTOTUNE \(-1\) or an int in \[1, 1024\]"),
        (lambda: tfpipe.Remainder(drop_remainder=True, pad_remainder=True), "pass one"),
        (
            lambda: tfpipe.Integrity(skip_corrupt=True, verify_shards=False),
            "skip_corrupt=True needs verify_shards",
        ),
        (lambda: tfpipe.DataService("localhost:5050"), "dispatcher address like 'grpc://host:port'"),
        (lambda: tfpipe.DataService("grpc://d:1", job_name=""), r"Received: job_name=''"),
        (
            lambda: tfpipe.Hosts(num_hosts=2, host_index=2),
            r"host_index must be an int in \[0, num_hosts - 1 = 1\]",
        ),
        (lambda: tfpipe.Mixture({"a": "p"}), "at least two names"),
        (lambda: tfpipe.Mixture({"a": "p", "b": "q"}, weights={"a": 1}), r"no weight for \['b'\]"),
        (lambda: tfpipe.Mixture({"a": "p", "b": "q"}, by="bytes"), "by must be one of"),
        (lambda: tfpipe.presets.Text(packing="greedy"), "packing must be one of"),
        (lambda: tfpipe.presets.ImageNet(image_size=0), r"image_size must be an int in \[1, 8192\]"),
        (lambda: tfpipe.presets.Tabular(features="a"), "features must be a list of column names"),
    ]:
        with pytest.raises(ConfigError, match=words):
            make()
    assert tfpipe.Order(seed=__import__("numpy").int64(3)).seed.__class__ is int  # kept as checked


def test_arguments_of_the_wrong_kind_are_refused(table_ds):
    with pytest.raises(ConfigError, match=r"order must be a tfpipe.Order or None. Received: dict"):
        plan(table_ds, batch_size=8, order={"seed": 1})
    with pytest.raises(ConfigError, match=r"preset=Text\(\.\.\.\)"):
        plan(table_ds, batch_size=8, preset=tfpipe.presets.Text)
    with pytest.raises(
        ConfigError, match=r"job_name= set options of the tf.data service job, but no service"
    ):
        plan(table_ds, batch_size=8, job_name="x")
    with pytest.raises(ConfigError, match=r"Unknown option\(s\) \['colour'\] for preset 'tabular'"):
        plan(table_ds, batch_size=8, colour="red")


def test_a_mixture_object_plans_what_its_mapping_plans(text_ds, tmp_path):
    import shutil

    copy = shutil.copytree(text_ds, tmp_path / "copy")
    kw = {"batch_size": 4, "sequence_length": 64, "seed": 3, "chunk": 40}
    short = plan({"web": text_ds, "code": str(copy)}, weights={"web": 1, "code": 3}, mix_by="documents", **kw)
    typed = plan(
        tfpipe.Mixture({"web": text_ds, "code": str(copy)}, weights={"web": 1, "code": 3}, by="documents"),
        **kw,
    )
    assert short.mixture == typed.mixture and short.describe() == typed.describe()
    # An epoch of a mixture (every source read whole once), of the object as of its short form.
    mixture = tfpipe.Mixture(
        {"web": text_ds, "code": str(copy)}, weights={"web": 1, "code": 3}, by="documents"
    )
    steps = tfpipe.steps_per_epoch(mixture, 4, sequence_length=64, chunk=40)
    sources = {"web": text_ds, "code": str(copy)}
    weights = {"web": 1, "code": 3}
    short_steps = tfpipe.steps_per_epoch(
        sources, 4, sequence_length=64, chunk=40, weights=weights, mix_by="documents"
    )
    assert steps == short_steps == typed.epoch_rows() // 4 > 0


def test_steps_per_epoch_takes_the_text_preset_object(text_ds):
    short = tfpipe.steps_per_epoch(text_ds, 4, sequence_length=64, packing="none")
    typed = tfpipe.steps_per_epoch(text_ds, 4, preset=tfpipe.presets.Text(sequence_length=64, packing="none"))
    assert short == typed > 0
    with pytest.raises(ConfigError, match="set options of the preset object"):
        tfpipe.steps_per_epoch(text_ds, 4, preset=tfpipe.presets.Text(sequence_length=64), packing="none")

"""build()'s arguments read into typed options: each short keyword mapped onto the object and
field it stands for by one table, `SHORT_FORMS`, never by guessing.

`build()` takes its options as small frozen objects by topic (config.py's `Order`, `Tuning`,
`Remainder`, `Integrity`, `DataService`; hosts.py's `Hosts`; the preset object, carrying its
own; a `Mixture` for the data). The README's and the guides' short forms (`seed=7`,
`num_hosts=2, host_index=0`, `sequence_length=512`, `weights={...}`) stay as documented sugar:
- a keyword of `SHORT_FORMS` sets the field it names (`seed` is `Order.seed`);
- any other keyword is an option of the preset (`sequence_length` is `Text.sequence_length`),
  which refuses a name it does not take;
- a keyword that names a field of an object also given in the call (`seed=7` beside
  `order=Order(...)`, `sequence_length=` beside `preset=Text(...)`) is refused: one field, one
  spelling. `config=` (a whole PipelineConfig) is the one base the keywords override.
- a keyword that both a short form and the preset's declared options claim (a custom
  preset's `seed`) is refused naming both.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from tfpipe.errors import ConfigError
from tfpipe.pipeline.config import (
    TOPIC_OF,
    DataService,
    Integrity,
    Order,
    OrderKind,
    PipelineConfig,
    Remainder,
    Topic,
    Tuning,
)
from tfpipe.pipeline.hosts import Hosts
from tfpipe.pipeline.mixture.sources import Mixture, SourceData
from tfpipe.presets import PresetLike, declared_options, get_preset

# What `build()` reads: a dataset (a path, a glob, a list of its files), or a mixture of them
# (a mapping of names to datasets is the short form of a Mixture).
Data = str | Sequence[str] | Mapping[str, SourceData] | Mixture

# Every short keyword of build()/plan(): the object and the field it sets. The first rows are
# PipelineConfig's fields by topic (config.TOPIC_OF: the keyword is the field's own name);
# `order="shuffle_buffer"` and `service="grpc://..."` are build()'s own parameters given a
# string (`Order.order`, `DataService.address`). docs/reference/api.md lists them all.
SHORT_FORMS: dict[str, tuple[type, str]] = {name: (topic, name) for name, topic in TOPIC_OF.items()} | {
    "num_hosts": (Hosts, "num_hosts"),
    "host_index": (Hosts, "host_index"),
    "input_context": (Hosts, "from_context"),  # Hosts.from_context(input_context)
    "weights": (Mixture, "weights"),
    "mix_by": (Mixture, "by"),
}


@dataclasses.dataclass(frozen=True, slots=True)
class Arguments:
    """build()'s arguments as typed options, the short forms mapped (plan()'s first read).

    Attributes:
      data: one dataset, or a Mixture.
      preset: the preset as given (a name, an object, or None: the data's).
      preset_options: the preset's options given as keywords (over the named preset's own).
      config: the split and every topic, as given (the mode's defaults not filled in yet).
      hosts: the input pipelines sharing the data and this one, or None (one, reading all).
      service: the tf.data service dispatcher's address, or None.
    """

    data: SourceData | Mixture
    preset: str | PresetLike | None
    preset_options: Mapping[str, object]
    config: PipelineConfig
    hosts: Hosts | None
    service: str | None


def read(
    data: Data,
    *,
    preset: str | PresetLike | None,
    split: str | None,
    hosts: Hosts | None,
    order: Order | OrderKind | None,
    tuning: Tuning | None,
    remainder: Remainder | None,
    integrity: Integrity | None,
    service: str | DataService | None,
    config: PipelineConfig | None,
    short: Mapping[str, Any],
) -> Arguments:
    """build()'s arguments as typed options: every short keyword set on its object.

    Raises:
      ConfigError: an argument of the wrong type, a field given twice (a keyword beside the
        object that holds it, `config=` beside a topic object), a name both a short form and
        the preset claim, host keywords that do not fit together, service options without
        a service, mixture keywords without a mixture.
    """
    short = dict(short)
    if isinstance(order, str):  # order="shuffle_buffer": Order.order
        short, order = {"order": order, **short}, None
    _check_types(
        hosts=hosts, order=order, tuning=tuning, remainder=remainder, integrity=integrity, config=config
    )
    preset_obj = get_preset(preset) if preset is not None else None
    forms, options = _split(short, preset, preset_obj)
    given: dict[type[Topic], Topic | None] = {
        Order: order,
        Tuning: tuning,
        Remainder: remainder,
        Integrity: integrity,
    }
    by_topic: dict[type, dict[str, Any]] = {}
    for name, value in forms.items():
        by_topic.setdefault(SHORT_FORMS[name][0], {})[name] = value
    service_forms = by_topic.pop(DataService, {})
    address, service_options = _service(service, service_forms)
    if config is not None:
        objects = [*given.values(), service if isinstance(service, DataService) else None]
        cfg = _over_config(config, split, objects, {**by_topic, DataService: service_forms})
    else:
        topics = [_topic(cls, obj, by_topic.get(cls, {})) for cls, obj in given.items()]
        cfg = PipelineConfig.of(split, *topics, *([service_options] if service_options else []))
    return Arguments(
        data=_data(data, by_topic.get(Mixture, {})),
        preset=preset,
        preset_options=options,
        config=cfg,
        hosts=_hosts(hosts, by_topic.get(Hosts, {})),
        service=address,
    )


def _check_types(**given: object) -> None:
    """Refuses an option object of another type, naming the parameter and the type expected."""
    expected: dict[str, type] = {
        "hosts": Hosts,
        "order": Order,
        "tuning": Tuning,
        "remainder": Remainder,
        "integrity": Integrity,
        "config": PipelineConfig,
    }
    for name, value in given.items():
        if value is not None and not isinstance(value, expected[name]):
            what = expected[name].__name__
            raise ConfigError(
                f"{name} must be a tfpipe.{what} or None. Received: {type(value).__name__} {value!r}"
            )


def _split(
    short: dict[str, Any], preset: str | PresetLike | None, preset_obj: PresetLike | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the short forms, the preset's options) of the keywords: a keyword of SHORT_FORMS is a
    short form, any other the preset's option. Refused: a name both claim, and a preset option
    beside the preset object that carries it."""
    declared = declared_options(preset_obj) if preset_obj is not None else None
    forms = {k: v for k, v in short.items() if k in SHORT_FORMS}
    options = {k: v for k, v in short.items() if k not in SHORT_FORMS}
    both = sorted(set(forms) & (declared or set()))
    if both:
        what, field = SHORT_FORMS[both[0]]
        raise ConfigError(
            f"{both[0]}= is claimed twice: it is build()'s short form of {what.__name__}.{field}, and "
            f"an option of the preset {getattr(preset_obj, 'name', preset)!r}. Pass the preset's option in the preset "
            f"object, or rename it; pass the pipeline's as {_object_form(both[0])}. Received: "
            f"{both[0]}={short[both[0]]!r}"
        )
    carried = sorted(set(options) & (declared or set())) if not isinstance(preset, str) else []
    if carried:
        raise ConfigError(
            f"{', '.join(f'{k}=' for k in carried)} set options of the preset object given as preset=, "
            f"which carries its own: set them there, e.g. preset={type(preset).__name__}(..., "
            f"{carried[0]}={options[carried[0]]!r}). Received: preset={preset!r}"
        )
    return forms, options


def _object_form(name: str) -> str:
    """How a short keyword is written as its object (`order=tfpipe.Order(seed=...)`)."""
    what, field = SHORT_FORMS[name]
    param = {Order: "order", Tuning: "tuning", Remainder: "remainder", Integrity: "integrity"}.get(what)
    if param is None:
        return f"tfpipe.{what.__name__}({field}=...)"
    return f"{param}=tfpipe.{what.__name__}({field}=...)"


def _topic(cls: type[Topic], given: Topic | None, forms: dict[str, Any]) -> Topic:
    """The topic object: as given, or made of its short forms (a keyword beside the object
    that holds it is refused)."""
    if given is not None and forms:
        name = sorted(forms)[0]
        raise ConfigError(
            f"{name}= is {cls.__name__}.{name}, and {_object_form(name).split('=')[0]}="
            f"{cls.__name__}(...) is given too: set {name} there. Received: {name}={forms[name]!r}, "
            f"{given!r}"
        )
    return given if given is not None else cls(**forms)


def _over_config(
    config: PipelineConfig,
    split: str | None,
    objects: list[Topic | None],
    by_topic: dict[type, dict[str, Any]],
) -> PipelineConfig:
    """`config` with the short forms over it, each keyword its one field; a topic object beside
    it is refused (config= holds every option)."""
    named = [type(t).__name__ for t in objects if t is not None]
    if named:
        raise ConfigError(
            f"config= holds every option of the pipeline, and {', '.join(named)} would set some of them "
            "again: pass config= alone (with keywords over it), or the topic objects without it."
        )
    fields: dict[str, Any] = {}
    for cls in (Order, Tuning, Remainder, Integrity, DataService):
        fields |= by_topic.get(cls, {})  # a keyword is the config field of its own name
    if split is not None:
        fields["split"] = split
    return dataclasses.replace(config, **fields)


def _service(
    service: str | DataService | None, forms: dict[str, Any]
) -> tuple[str | None, DataService | None]:
    """(the dispatcher's address, the DataService) of `service=` and the service keywords."""
    if service is None:
        if forms:
            names = ", ".join(f"{k}=" for k in sorted(forms))
            raise ConfigError(
                f"{names} set options of the tf.data service job, but no service is given: pass "
                "service='grpc://host:port' (or service=tfpipe.DataService(...)) with them, or leave "
                f"them out. Received: {', '.join(f'{k}={v!r}' for k, v in sorted(forms.items()))}"
            )
        return None, None
    if isinstance(service, DataService):
        _topic(DataService, service, forms)
        return service.address, service
    if not isinstance(service, str):
        raise ConfigError(
            "service must be a dispatcher address like 'grpc://host:port' or a tfpipe.DataService. "
            f"Received: {type(service).__name__} {service!r}"
        )
    made = DataService(service, **forms)
    return made.address, made


def _hosts(hosts: Hosts | None, forms: dict[str, Any]) -> Hosts | None:
    """The Hosts of `hosts=`, or of `input_context=`, or of `num_hosts=` with `host_index=`."""
    if not forms:
        return hosts
    context, n, i = forms.get("input_context"), forms.get("num_hosts"), forms.get("host_index")
    if hosts is not None:
        name = sorted(forms)[0]
        raise ConfigError(
            f"{name}= says what hosts= says (the input pipelines and this one's index): pass one. "
            f"Received: hosts={hosts!r}, {name}={forms[name]!r}"
        )
    if context is not None and (n is not None or i is not None):
        raise ConfigError(
            "num_hosts and host_index say what input_context says (the input pipelines and this "
            "one's index): pass one or the other. Received: input_context="
            f"{type(context).__name__}, num_hosts={n!r}, host_index={i!r}"
        )
    if context is not None:
        return Hosts.from_context(context)
    if n is None or i is None:
        raise ConfigError(
            "num_hosts and host_index come together (with JAX: num_hosts=jax.process_count(), "
            f"host_index=jax.process_index(); or hosts=tfpipe.Hosts.from_jax()). Received: "
            f"num_hosts={n!r}, host_index={i!r}"
        )
    return Hosts(num_hosts=n, host_index=i)


def _data(data: Data, forms: dict[str, Any]) -> SourceData | Mixture:
    """One dataset, or the Mixture of `data` (a Mixture, or a mapping with `weights=`/`mix_by=`)."""
    if isinstance(data, Mixture):
        if forms:
            name = sorted(forms)[0]
            raise ConfigError(
                f"{name}= is Mixture.{SHORT_FORMS[name][1]}, and the data is a tfpipe.Mixture: set it there. "
                f"Received: {name}={forms[name]!r}"
            )
        return data
    if isinstance(data, Mapping):
        return Mixture(data, weights=forms.get("weights"), by=forms.get("mix_by"))
    if forms:
        raise ConfigError(
            "weights and mix_by weigh the sources of a mixture: pass data as a mapping of names to "
            f"datasets, e.g. {{'web': PATH, 'code': PATH}}, or a tfpipe.Mixture. Received: data={data!r}"
        )
    return data

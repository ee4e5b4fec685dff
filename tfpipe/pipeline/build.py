"""`plan()` and `build()`: from data + preset + options to a `Pipeline` (stages/pipeline.py) and
its tf.data.Dataset. The arguments are read into typed options first (arguments.py: the short
keywords mapped onto their objects); one dataset is then planned in three steps, each a module:
request.py (the arguments checked, the data resolved), decide.py (every choice), assemble.py
(the stages); a `Mixture` is planned by mixture/plan.py, each source by `plan`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tfpipe._tf import Dataset
from tfpipe.pipeline import arguments
from tfpipe.pipeline.arguments import Arguments, Data
from tfpipe.pipeline.assemble import assemble
from tfpipe.pipeline.config import DataService, Integrity, Order, OrderKind, PipelineConfig, Remainder, Tuning
from tfpipe.pipeline.decide import decide
from tfpipe.pipeline.hosts import Hosts
from tfpipe.pipeline.mixture.plan import plan_mixture
from tfpipe.pipeline.mixture.sources import Mixture
from tfpipe.pipeline.request import make_request
from tfpipe.pipeline.stages.pipeline import Pipeline
from tfpipe.presets import PresetLike

if TYPE_CHECKING:
    from tfpipe.pipeline.order.position import Position  # imports TensorFlow

__all__ = ["build", "plan"]


def plan(
    data: Data,
    *,
    batch_size: int,
    preset: str | PresetLike | None = None,
    training: bool = True,
    split: str | None = None,
    hosts: Hosts | None = None,
    order: Order | OrderKind | None = None,
    tuning: Tuning | None = None,
    remainder: Remainder | None = None,
    integrity: Integrity | None = None,
    service: str | DataService | None = None,
    start_step: int | Position = 0,
    config: PipelineConfig | None = None,
    **short: Any,
) -> Pipeline:
    """Plans the pipeline `build()` returns: resolves data, preset and options into stages.

    The arguments are read into typed options (`arguments.read`: each short keyword set on the
    object it names); then `make_request` checks them and finds the data, `decide` makes every
    choice (the order, the config for this mode and storage, the preset bound to the data, the
    share of files, the cache), and `assemble` makes the stages.

    Args: as for `build()`.

    Returns:
      A Pipeline; `.dataset()` is the tf.data.Dataset, `.stages` the named stages.
    """
    args = arguments.read(
        data,
        preset=preset,
        split=split,
        hosts=hosts,
        order=order,
        tuning=tuning,
        remainder=remainder,
        integrity=integrity,
        service=service,
        config=config,
        short=short,
    )
    if isinstance(args.data, Mixture):
        return _mixture(args.data, args, batch_size=batch_size, training=training, start_step=start_step)
    request = make_request(args, batch_size=batch_size, training=training, start_step=start_step)
    return assemble(request, decide(request))


def _mixture(
    mix: Mixture, args: Arguments, *, batch_size: int, training: bool, start_step: int | Position
) -> Pipeline:
    """A weighted mixture (mixture/plan.py), each source planned by `plan` with these options
    (the mixture sets each one's seed and order)."""
    order = {"order": args.config.order} if args.config.order is not None else {}
    return plan_mixture(
        mix.sources,
        weights=mix.weights,
        mix_by=mix.by,
        plan_one=plan,
        start_step=start_step,
        batch_size=batch_size,
        preset=args.preset,
        training=training,
        hosts=args.hosts,
        service=args.service,
        config=args.config,
        **order,
        **args.preset_options,
    )


def build(
    data: Data,
    *,
    batch_size: int,
    preset: str | PresetLike | None = None,
    training: bool = True,
    split: str | None = None,
    hosts: Hosts | None = None,
    order: Order | OrderKind | None = None,
    tuning: Tuning | None = None,
    remainder: Remainder | None = None,
    integrity: Integrity | None = None,
    service: str | DataService | None = None,
    start_step: int | Position = 0,
    config: PipelineConfig | None = None,
    **short: Any,
) -> Dataset:
    """A tuned `tf.data.Dataset` of `(features, labels)` for `model.fit`.

    Args:
      data: a dataset directory with `tfpipe.json` (local or gs://), a glob such as
        `gs://b/imagenet/train-*`, or a list of TFRecord files (part of a sharded set is
        refused); or a `tfpipe.Mixture` of datasets (a mapping of names to datasets is its
        short form).
      batch_size: the global batch; with `hosts`, each yields `batch_size / num_hosts` (from a
        tf.distribute InputContext: per replica).
      preset: a name ("imagenet", "tabular", "text", yours) or a preset object with its options
        (`tfpipe.presets.Text(sequence_length=512)`); None: the one the data's layout calls for.
      training: shuffle, repeat and drop the remainder (True); or every record once in source
        order, with the cardinality set when the manifest knows it (False).
      split: the manifest split. None: "train" when training; in eval "validation", "test",
        else the only one.
      hosts: a `tfpipe.Hosts` (`Hosts.from_jax()`, `Hosts.from_context(ctx)`): the input
        pipelines sharing the files and this one. None: this process reads everything.
      order: a `tfpipe.Order`: the training order, its seed, buffer and interleave.
      tuning: a `tfpipe.Tuning`: the cache, threads and buffers (speed and memory).
      remainder: a `tfpipe.Remainder`: the last partial batch dropped, kept or padded.
      integrity: a `tfpipe.Integrity`: a corrupt shard raised, or skipped and counted.
      service: a tf.data service dispatcher, "grpc://host:port", or a `tfpipe.DataService`.
      start_step: the first training step, an int or a `tfpipe.resume.Position` (read when the
        iterator starts): the batches an uninterrupted run with the same seed yields from there.
      config: every option at once as a `PipelineConfig`, the short keywords over it.
      **short: the short forms, each one field of an object (`seed=7` is `Order.seed`,
        `num_hosts`/`host_index` are `Hosts`, `weights` the Mixture's); any other keyword is
        the preset's option (`sequence_length=512`). docs/reference/api.md lists them.

    Returns:
      A `tf.data.Dataset` of `(features, labels)`.

    Raises:
      ConfigError: a bad option, batch size or preset name; a field given twice, or a name
        both a short form and the preset claim.
      DataError / ManifestError: missing manifest, files or features, a partial set of
        shards, shards of the wrong size, fewer records than a training batch; naming them.
      StorageError: gs:// refused a request.

    While iterating, a corrupt shard, a shard holding other records than listed, or a read
    that kept failing raise `tf.errors.InvalidArgumentError` naming the shard.

    Example:
      >>> ds = tfpipe.build("gs://bucket/imagenet", batch_size=1024, hosts=tfpipe.Hosts.from_jax())

    Long: the docstring is the public contract of tfpipe's main entry point; the body is one call.
    """
    return plan(
        data,
        batch_size=batch_size,
        preset=preset,
        training=training,
        split=split,
        hosts=hosts,
        order=order,
        tuning=tuning,
        remainder=remainder,
        integrity=integrity,
        service=service,
        start_step=start_step,
        config=config,
        **short,
    ).dataset()

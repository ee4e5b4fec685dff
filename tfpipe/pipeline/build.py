"""`plan()` and `build()`: from data + preset + config to a `Pipeline` (stages/pipeline.py) and
its tf.data.Dataset. One dataset is planned in three steps, each a module: request.py (the
arguments checked, the data resolved), decide.py (every choice), assemble.py (the stages); a
mapping of names to datasets is a weighted mixture (mixture/plan.py), each source planned by
`plan`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tfpipe.errors import ConfigError
from tfpipe.pipeline.assemble import assemble
from tfpipe.pipeline.config import PipelineConfig
from tfpipe.pipeline.decide import decide
from tfpipe.pipeline.mixture.plan import plan_mixture
from tfpipe.pipeline.request import make_request
from tfpipe.pipeline.stages.pipeline import Pipeline
from tfpipe.presets import PresetLike

__all__ = ["build", "plan"]


def plan(
    data: str | Sequence[str] | Mapping[str, Any],
    *,
    preset: str | PresetLike | None = None,
    batch_size: int,
    training: bool = True,
    input_context: Any = None,
    num_hosts: int | None = None,
    host_index: int | None = None,
    service: str | None = None,
    config: PipelineConfig | None = None,
    start_step: Any = 0,
    weights: Mapping[str, float] | None = None,
    mix_by: str | None = None,
    **preset_options: Any,
) -> Pipeline:
    """Plans the pipeline `build()` returns: resolves data, preset and config into stages.

    Three steps: `make_request` checks the arguments and finds the data, `decide` makes every
    choice (the order, the config for this mode and storage, the preset bound to the data,
    the share of files, the cache), and `assemble` makes the stages.

    Args: as for `build()`.

    Returns:
      A Pipeline; `.dataset()` is the tf.data.Dataset, `.stages` the named stages.
    """
    if isinstance(data, Mapping) or weights is not None or mix_by is not None:
        arguments = dict(locals())  # every argument as given, for each source's own plan
        return _mixture(arguments.pop("data"), arguments.pop("preset_options"), arguments)
    request = make_request(
        data,
        preset=preset,
        batch_size=batch_size,
        training=training,
        input_context=input_context,
        num_hosts=num_hosts,
        host_index=host_index,
        service=service,
        config=config,
        start_step=start_step,
        preset_options=preset_options,
    )
    return assemble(request, decide(request))


def _mixture(data: Any, preset_options: dict[str, Any], arguments: dict[str, Any]) -> Pipeline:
    """A weighted mixture of datasets (mixture/plan.py), each source planned by `plan`."""
    if not isinstance(data, Mapping):
        raise ConfigError(
            "weights and mix_by weigh the sources of a mixture: pass data as a mapping of names to "
            f"datasets, e.g. {{'web': PATH, 'code': PATH}}. Received: data={data!r}"
        )
    return plan_mixture(data, plan_one=plan, **arguments, **preset_options)


def build(
    data: str | Sequence[str] | Mapping[str, Any],
    *,
    preset: str | PresetLike | None = None,
    batch_size: int,
    training: bool = True,
    input_context: Any = None,
    num_hosts: int | None = None,
    host_index: int | None = None,
    service: str | None = None,
    config: PipelineConfig | None = None,
    start_step: Any = 0,
    weights: Mapping[str, float] | None = None,
    mix_by: str | None = None,
    **preset_options: Any,
) -> Any:
    """A tuned `tf.data.Dataset` of `(features, labels)` for `model.fit`.

    Args:
      data: a dataset directory with `tfpipe.json` (local or gs://), a glob such as
        `gs://b/imagenet/train-*`, or a list of TFRecord files. Files beside a manifest that
        lists them are read through it; part of a sharded set is refused.
      preset: "imagenet", "tabular", a registered name or a Preset; None picks one from the
        manifest's layout (or "imagenet" for records with `image/encoded`).
      batch_size: the global batch. With `input_context`, each pipeline yields
        `input_context.get_per_replica_batch_size(batch_size)`; with `num_hosts`, each host
        `batch_size / num_hosts`.
      training: shuffle, repeat and drop the remainder (True); or yield every record exactly
        once in source order, with the cardinality set when the manifest knows it (False).
      input_context: a `tf.distribute.InputContext`; files are sharded across input pipelines.
      num_hosts: the same without tf.distribute: how many hosts read the data (with JAX:
        `jax.process_count()`). Each host reads its share of the files. Not with
        `input_context`.
      host_index: this host's index among them, from 0 (with JAX: `jax.process_index()`).
      service: a tf.data service dispatcher, "grpc://host:port".
      config: a PipelineConfig.
      start_step: the first training step: an int, or a `tfpipe.Position` whose step is read
        when the dataset's iterator starts (restored by a checkpoint or the Keras callback of
        `tfpipe.resume`). The dataset then yields exactly the batches an uninterrupted run
        with the same data, batch_size and seed yields from that step on (resumable order).
      weights: a mixture's weights by name, when `data` maps names to datasets (`{"web": PATH,
        "code": PATH}`); None: each source's size. Text: shares of the tokens.
      mix_by: what text's weights share, "tokens" (default) or "documents"; else "records".
      **preset_options: PipelineConfig fields (seed, deterministic, cache, skip_corrupt, ...)
        override `config`; the rest go to the preset (e.g. image_size, dtype, label).

    Returns:
      A `tf.data.Dataset` of `(features, labels)`.

    Raises:
      ConfigError: a bad option, batch size or preset name.
      DataError / ManifestError: missing manifest, files or features, a partial set of
        shards, shards of the wrong size, fewer records than a training batch; naming them.
      StorageError: gs:// refused a request.

    While iterating, a corrupt shard, a shard holding other records than listed, or a read
    that kept failing raise `tf.errors.InvalidArgumentError` naming the shard; a network error
    that outlasts the retries is raised as TensorFlow raised it.

    Example:
      >>> ds = tfpipe.build("gs://bucket/imagenet", preset="imagenet", batch_size=1024)
      >>> model.fit(ds, steps_per_epoch=tfpipe.steps_per_epoch("gs://bucket/imagenet", 1024))

    Long: the docstring is the public contract of tfpipe's main entry point; the body is one call.
    """
    return plan(
        data,
        preset=preset,
        batch_size=batch_size,
        training=training,
        input_context=input_context,
        num_hosts=num_hosts,
        host_index=host_index,
        service=service,
        config=config,
        start_step=start_step,
        weights=weights,
        mix_by=mix_by,
        **preset_options,
    ).dataset()

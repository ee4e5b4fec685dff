"""A preset's parse, decode and batch when a record is an example (`batching.Records` puts them
in order), and its final map (every preset's).

Per-record presets (images) parse inside the decode map ("parse" is then the identity), and
that map fuses with the batch: one map per record, as in the baseline pipeline, with no stage
and no thread hand-off between parse, decode and batch. Batched presets (tables) batch first,
then parse and decode a batch at a time. Decode drops the element's source.
"""

from __future__ import annotations

from tfpipe._tf import Dataset, Nest, Tensor, plain, tf
from tfpipe.pipeline.read import skips
from tfpipe.pipeline.stages.stage import StageFn, StagePlan


def batch_stage(p: StagePlan) -> StageFn:
    """Batches; after a per-record decode map a plain batch, which tf.data fuses with that map
    (map_and_batch_fusion: each image is written straight into its batch, no stage between)."""

    def batch(ds: Dataset) -> Dataset:
        drop = bool(p.config.drop_remainder)
        if p.order is not None and p.decoder.batched:  # the resumable order batched already
            return ds
        if p.parse_in_decode:
            return ds.batch(p.batch_size, drop_remainder=drop)
        return ds.batch(
            p.batch_size,
            drop_remainder=drop,
            num_parallel_calls=p.config.map_parallelism,
            deterministic=p.deterministic,
        )

    return batch


def parse_stage(p: StagePlan) -> StageFn:
    """`(record, source) -> (features, source)`: one record, or a batch of them. The identity
    when the decode map parses (`StagePlan.parse_in_decode`)."""
    dec = p.decoder

    def parse(ds: Dataset) -> Dataset:
        tf_ = tf()
        if p.parse_in_decode:
            return ds
        parse_fn = tf_.io.parse_example if dec.batched else tf_.io.parse_single_example
        return ds.map(
            plain(lambda records, source, *key: (parse_fn(records, dec.spec), source, *key)),
            num_parallel_calls=p.config.map_parallelism,
            deterministic=p.deterministic,
        )

    return parse


def decode_stage(p: StagePlan) -> StageFn:
    """The preset's decode of `(features, source)` (or of `(record, source)`, parsed first, when
    `parse_in_decode`), with the corrupt-image check around it and, for random augmentation one
    record at a time, a seed per record."""
    cfg, dec, counter = p.config, p.decoder, p.counter
    counting = counter is not None and dec.check is not None

    def run(features: Nest, source: Tensor, seed: Tensor | None) -> Nest:
        if p.parse_in_decode:  # `features` is still the serialized record
            features = tf().io.parse_single_example(features, dec.spec)
        features = skips.checked(features, source, dec, counter)
        out = dec.decode(features, seed, source if dec.needs_source else None)
        return skips.count_decoded(out, counter) if counting else out

    def decode(ds: Dataset) -> Dataset:
        tf_ = tf()
        par, det = cfg.map_parallelism, p.deterministic
        if p.keyed:
            # Each record's seed came with it: (seed, epoch, example id), whatever came before.
            if counting:  # drop_bad takes (features, source): carry the seed beside the source
                ds = ds.map(plain(lambda f, s, k: (f, (s, k))))
                ds = skips.drop_bad(ds, dec.check, counter).map(plain(lambda f, sk: (f, *sk)))
            ds = ds.map(
                plain(lambda features, source, seed: run(features, source, seed)),
                num_parallel_calls=par,
                deterministic=det,
            )
            return ds.ignore_errors() if counting else ds
        if counting:
            ds = skips.drop_bad(ds, dec.check, counter)
        if dec.random and not dec.batched:
            # One seed per record, drawn from a seeded stream zipped in order: the augmentation of
            # a record does not depend on which thread runs it, so seed + deterministic repeats.
            seeds = tf_.data.Dataset.random(seed=cfg.seed).batch(2)
            ds = tf_.data.Dataset.zip((ds, seeds))
            ds = ds.map(
                plain(lambda element, seed: run(*element, seed)), num_parallel_calls=par, deterministic=det
            )
        else:
            ds = ds.map(
                plain(lambda features, source: run(features, source, None)),
                num_parallel_calls=par,
                deterministic=det,
            )
        if counting:
            ds = ds.ignore_errors()  # the backstop for images that pass the check yet fail decode
        return ds

    return decode


def map_stage(p: StagePlan) -> StageFn:
    """The preset's final map on batches, if it has one."""
    finalize = p.decoder.finalize

    def final_map(ds: Dataset) -> Dataset:
        if finalize is None:
            return ds
        return ds.map(
            plain(finalize), num_parallel_calls=p.config.map_parallelism, deterministic=p.deterministic
        )

    return final_map

"""The on-disk contract of a tfpipe dataset, one module a part (docs/reference/format.md):

- `manifest`: `tfpipe.json`, its splits and shards (`manifest_text`: a text split's entries and
  the tokenizer's; `manifest_checks`: the checks both share);
- `shardnames`: `{split}-{index:05d}-of-{count:05d}`, formatted and parsed in one place;
- `tfrecord`: the TFRecord framing, read and written without TensorFlow;
- `schema` and `codec`: the features of a record and the `tf.train.Example` that holds them
  (`decode`: its bytes read back, for inspect and the tests);
- `commit_markers`: the markers that say a split on gs:// was committed;
- `verify`: every shard read and checked against the manifest (`tfpipe inspect --verify`);
- `jsonobject`: the type of a JSON object as its `to_json`/`from_json` pass one.

It stands on storage, errors and the lazy TensorFlow import alone: convert writes it, and the
pipeline, bench and the command line read it.
"""

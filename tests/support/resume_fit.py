"""What tests/test_resume_fit.py's parent and its child processes both use: the imagenet preset
with each record's file name carried beside its image, and a batch's fingerprint."""


def named_images():
    """The imagenet preset (crop, flip, resize as it is) plus each record's image/filename as
    an int64 hash: `((image, name_hash), label)`."""
    import dataclasses

    from tfpipe.modalities.images.preset import IMAGENET

    class Named:
        name = "imagenet_named"

        def bind(self, ctx, options):
            from tfpipe._tf import tf as _tf

            tf_ = _tf()
            inner = IMAGENET.bind(ctx, options)

            def decode(features, seed, source):
                image, label = inner.decode(features, seed, source)
                name = tf_.strings.to_hash_bucket_fast(features["image/filename"], 1 << 62)
                return (image, name), label

            return dataclasses.replace(inner, decode=decode, finalize=None)

    return Named()


def fingerprint_tf(x, kind):
    """(ids, fingerprints) of a batch, int64 [B] each: the filename hash or row_id, and a sum
    of pixels (or values) weighted by position, which a flip or another crop changes."""
    from tfpipe._tf import tf as _tf

    tf_ = _tf()
    if kind == "images":
        images, ids = x
        flat = tf_.reshape(tf_.cast(images, tf_.int64), [tf_.shape(images)[0], -1])
        weights = tf_.range(1, tf_.shape(flat)[1] + 1, dtype=tf_.int64) % 251 + 1
        return ids, tf_.reduce_sum(flat * weights, axis=1)
    values = tf_.cast(tf_.round(x["float32_0"] * 1e4), tf_.int64)
    return x["row_id"], values * 1_000_003 + tf_.cast(x["float32_0_missing"], tf_.int64)

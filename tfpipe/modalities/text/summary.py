"""What the command line says of a text dataset: `tfpipe convert`'s summary of a converted
split (documents, tokens, the tokenizer) and what `tfpipe inspect` adds (the tokenizer, each
split's document lengths, the fill each packing mode would give, a sample record decoded).
Lines of text; the command prints them."""

from __future__ import annotations

from tfpipe.bench.fmt import human_bytes
from tfpipe.errors import TfpipeError
from tfpipe.format.manifest import Manifest
from tfpipe.modalities.text.convert.source import sample
from tfpipe.packing.fill import predict_fill
from tfpipe.plural import counted

_QUANTILES = (0.1, 0.5, 0.9, 0.99, 1.0)
_FILL_LENGTHS = (128, 512, 2048)


def converted(manifest: Manifest, split_name: str) -> tuple[str, ...]:
    """`tfpipe convert`'s summary of the split it converted."""
    split = manifest.split(split_name)
    text, tok = split.text, manifest.tokenizer
    assert text is not None and tok is not None
    lines = [
        f"converted {counted(text.documents, 'document')} ({counted(text.tokens, 'token')}) into "
        f"{counted(len(split.shards), 'shard')}, "
        f"{human_bytes(split.bytes)}, {text.empty_documents:,} empty left out, in {split.seconds:.1f} s "
        f"-> {manifest.root}",
        f"  tokenizer: {tok.kind} {tok.file}, vocabulary {tok.vocab_size:,}, {tok.fingerprint[:19]}",
    ]
    lines += [f"  skipped {s.input}: {s.reason}" for s in split.skipped]
    lines += [f"  {'WARNING' if note.startswith('ROUND TRIP') else 'note'}: {note}" for note in split.notes]
    return tuple(lines)


def about_dataset(manifest: Manifest) -> tuple[str, ...]:
    """`tfpipe inspect` on its tokenizer: kind, file, vocabulary, special ids, and what its own
    check of the file finds."""
    from tfpipe.format.verify import check_tokenizer  # ~40 ms that `tfpipe --help` need not pay

    tok = manifest.tokenizer
    if tok is None:
        return ()
    specials = ", ".join(f"{role} {i}" for role, i in tok.special_ids.items()) or "none"
    lines = [
        f"  tokenizer: {tok.kind} {tok.file}, vocabulary {tok.vocab_size:,}, special ids: {specials}; "
        f"{tok.fingerprint}",
        f"    its round trip may change: {tok.normalization}",
    ]
    check = check_tokenizer(manifest)
    lines += [
        f"  WARNING: {tok.file}: {problem}" for problem in (check.problems if check is not None else ())
    ]
    return tuple(lines)


def about_split(manifest: Manifest, name: str) -> tuple[str, ...]:
    """`tfpipe inspect` on a split's documents: counts, length percentiles, the predicted fill,
    and its first record decoded."""
    text = manifest.split(name).text
    if text is None:
        return ()
    if not text.documents:
        return (f"    text: no documents ({text.empty_documents:,} empty left out)",)
    pct = ", ".join(
        f"p{round(q * 100)} {n:,}" for q, n in zip(_QUANTILES, text.percentiles(_QUANTILES), strict=True)
    )
    lines = [
        f"    text: {text.documents:,} documents, {text.tokens:,} tokens (mean {text.tokens / text.documents:,.1f} "
        f"a document), {text.empty_documents:,} empty left out",
        f"    document length in tokens: {pct.replace('p100', 'max')}",
    ]
    for length in _FILL_LENGTHS:  # the fill each packing mode would give, from the histogram
        modes = ", ".join(
            f"{mode} {predict_fill(text.length_histogram, length, mode):.1%}"
            for mode in ("first_fit", "concat", "none")
        )
        lines.append(f"    predicted fill at L={length}: {modes}")
    try:
        ids, decoded = sample(manifest, name)[0]
    except (TfpipeError, IndexError) as e:
        return (*lines, f"    sample: not decoded ({e})")
    shown = decoded if len(decoded) <= 200 else decoded[:200] + "..."
    return (*lines, f"    sample record 0 ({len(ids):,} tokens): {shown!r}")

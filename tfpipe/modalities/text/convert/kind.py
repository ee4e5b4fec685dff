"""The text kind: a corpus of documents, tokenized into one record each, with the tokenizer
stored beside the shards and every split's lengths file (each document's token count)."""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

from tfpipe import storage
from tfpipe.convert.kind import Kind
from tfpipe.convert.writer import ShardDone
from tfpipe.errors import DataError, ManifestError
from tfpipe.format.manifest import Checksum
from tfpipe.format.manifest_text import LengthsFile, lengths_name
from tfpipe.modalities.text.convert import detect, flags
from tfpipe.modalities.text.convert.inputs import TextInputs
from tfpipe.modalities.text.convert.source import TextSource, open_text
from tfpipe.modalities.text.convert.tally import TextTally


@dataclasses.dataclass(frozen=True, slots=True)
class TextSplit:
    """A finished text split's documents summed in shard order, and its lengths file: the entry
    the manifest lists, and the local file that holds it until it is committed beside the shards
    (`path`; written a shard at a time, so its size never sits in memory). `kind.SplitExtras`.

    Attributes:
      normalization: the tokenizer's normalisation, which the notes name.
    """

    tally: TextTally
    lengths: LengthsFile
    path: str
    normalization: str

    @property
    def files(self) -> tuple[tuple[str, str], ...]:
        return ((self.lengths.file, self.path),)

    @property
    def notes(self) -> tuple[str, ...]:
        return tuple(self.tally.notes(self.normalization))

    @property
    def fields(self) -> dict[str, Any]:
        return {"text": self.tally.split_text(self.lengths)}

    def check(self, src: str) -> None:
        """Refuses to commit a text split whose every document was left out as empty (text the
        tokenizer drops whole: the first pass refuses a corpus of empty documents already)."""
        if self.tally.documents:
            return
        raise DataError(
            f"{src}: expected documents that tokenize to something. Received: every one of the "
            f"{self.tally.empty:,} left out, the first at {self.tally.first_empty}; nothing was committed. "
            + " ".join(self.notes)
        )

    def discard(self) -> None:
        if os.path.exists(self.path):
            os.remove(self.path)


def finish_text(
    plan: Any, done: Sequence[ShardDone], tally_of: Callable[[ShardDone], Any] | None = None
) -> TextSplit:
    """A text split's figures, summed in shard order, and its lengths file, written to a local
    file a shard at a time: what the run commits and the manifest lists.

    Args:
      plan: the split's `ConvertPlan`.
      tally_of: the whole tally of a shard whose done-record holds no lengths in memory (the
        local engine keeps them in its journal only, `ShardDone.kept`).

    Raises:
      ManifestError: a shard whose done-record counts other documents than it holds records.
    """
    name = lengths_name(plan.split)
    text, checksum, size = TextTally(), Checksum(), 0
    folder = tempfile.gettempdir() if storage.is_gcs(plan.dest) else plan.dest
    fd, path = tempfile.mkstemp(prefix=storage.temp_name(name), dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            for d in done:
                tally = d.tally if isinstance(d.tally, TextTally) else TextTally()
                if not tally.lengths and tally_of is not None:
                    tally = tally_of(d)
                data = tally.lengths_bytes()
                if len(data) != 4 * d.info.examples:
                    raise ManifestError(
                        f"shard {d.info.name}: expected a length for each of its {d.info.examples} records. "
                        f"Received: {len(data) // 4} lengths"
                    )
                f.write(data)
                checksum.update(data)
                size += len(data)
                text.merge(tally.kept())
    except BaseException:
        os.remove(path)
        raise
    tokenizer = plan.manifest_fields.get("tokenizer")
    normalization = tokenizer.normalization if tokenizer is not None else ""
    return TextSplit(text, LengthsFile(name, size, str(checksum)), path, normalization)


def _manifest_fields(source: TextSource) -> dict[str, Any]:
    return {"tokenizer": source.tokenizer}


def _open(src: str, fmt: str, cfg: Any, joins: Any, dest: str, on_workers: Any = None) -> TextSource:
    return open_text(src, cfg, joins, dest)


TEXT = Kind(
    name="text",
    formats=("text",),
    open=_open,
    inputs_from_json=TextInputs.from_json,
    tally_from_json=TextTally.from_json,
    finish=finish_text,
    manifest_fields=_manifest_fields,
    options={
        "label": (),
        "text_field": (),
        "lines": (),
        "tokenizer": (),
        "train_tokenizer": (),
        "vocab_size": (),
        "special_tokens": (),
    },
    own_options_only=True,
    split_files=lambda split: (lengths_name(split),),
    claims=detect.claims,
    explains=detect.explains,
    sources={("text",): "text corpora"},
    nouns={"text": "a text corpus"},
    rereads_inputs=True,
    add_flags=flags.add_flags,
    flag_options=flags.flag_options,
)

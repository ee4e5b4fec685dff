"""A fifth kind of data, whole, as a user would add one: audio clips (files of bytes, `*.wav`),
a `Modality` registered by name with its three halves and nothing of tfpipe's edited.

- convert: the clips listed and found by `--format auto` (a folder of `.wav` files), two a
  piece of encoding work, each one record (`audio/bytes`, `audio/length`); their tally (clips,
  bytes) added up per shard and written beside the split, a split of empty clips refused.
- read: the `audio` preset: a clip's first `SAMPLES` bytes as float32 samples (zero-padded),
  its label its length's parity; decoded one record at a time (the default batching, records).
- bench: made-up clips as its synthetic data, no model of its own, a step time as its consumer.

`registered()` registers it for the length of a block (a test's own).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

from tfpipe import storage
from tfpipe.convert.encode import Encoded, EncodedPiece, Piece, Work, read_input
from tfpipe.convert.kind import Folder, FormatChoice, Kind
from tfpipe.convert.writer import ShardDone
from tfpipe.errors import DataError
from tfpipe.format.codec import encode_example
from tfpipe.format.schema import Field, Schema
from tfpipe.modalities import register_modality, unregister_modality
from tfpipe.modalities.modality import BenchHalf, Modality, Synthetic
from tfpipe.presets import Decoder, PresetContext

SCHEMA = Schema((Field("audio/bytes", "bytes"), Field("audio/length", "int64")))
SAMPLES = 32  # the samples of a clip the preset keeps


# ---- convert ----


@dataclasses.dataclass(slots=True)
class ClipTally:
    kind: ClassVar[str] = "audio"
    clips: int = 0
    bytes: int = 0

    def merge(self, later: ClipTally) -> None:
        self.clips += later.clips
        self.bytes += later.bytes

    def to_json(self) -> dict[str, Any]:
        return {"clips": self.clips, "bytes": self.bytes}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ClipTally:
        return cls(int(obj["clips"]), int(obj["bytes"]))

    def kept(self) -> ClipTally:
        return self


@dataclasses.dataclass(frozen=True, slots=True)
class ClipTask(Work):
    paths: tuple[str, ...]

    def encode(self, shard: int, first: int) -> EncodedPiece:
        out, tally = [], ClipTally()
        for path in self.paths:
            data = read_input(path)
            tally.merge(ClipTally(1, len(data)))
            record = encode_example({"audio/bytes": data, "audio/length": len(data)}, SCHEMA)
            out.append(Encoded(record, None, len(data)))
        return EncodedPiece(shard, first, out, tally)


@dataclasses.dataclass(frozen=True, slots=True)
class ClipInputs:
    kind: ClassVar[str] = "audio"
    paths: tuple[str, ...]

    def pieces(self, shard: int, first: int, count: int) -> Iterator[Piece]:
        for start in range(0, count, 2):
            yield Piece(shard, first + start, ClipTask(self.paths[start : min(count, start + 2)]))

    def to_json(self) -> dict[str, Any]:
        return {"paths": list(self.paths)}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ClipInputs:
        return cls(tuple(obj["paths"]))


@dataclasses.dataclass(frozen=True, slots=True)
class ClipSource:
    paths: tuple[str, ...]
    kind = "audio"
    layout = "wav"
    unit = "clips"
    schema = SCHEMA
    class_names = ()
    label_offset = 0
    skipped = ()
    dropped_rows = 0
    notes = ()

    n_items = property(lambda self: len(self.paths))
    inputs = property(lambda self: self.paths)
    identities = property(lambda self: tuple(storage.identity(p) for p in self.paths))
    estimated_bytes = property(lambda self: sum(os.path.getsize(p) for p in self.paths))
    fingerprint = property(lambda self: hashlib.sha256("\n".join(self.paths).encode()).hexdigest())
    attachments = property(
        lambda self: (("clips.txt", "\n".join(map(os.path.basename, self.paths)).encode()),)
    )

    def shard_inputs(self, first: int, end: int) -> ClipInputs:
        return ClipInputs(self.paths[first:end])

    def pieces(self, tasks: Sequence[Any]) -> Iterator[Piece]:
        for task in tasks:
            yield from task.pieces()

    def with_schema(self, schema: Schema) -> ClipSource:
        return self


@dataclasses.dataclass(frozen=True, slots=True)
class ClipSplit:
    tally: ClipTally
    path: str
    files: tuple[tuple[str, str], ...]

    notes = property(lambda self: (f"{self.tally.clips} clips of {self.tally.bytes} bytes",))
    fields: ClassVar[dict[str, Any]] = {}

    def check(self, src: str) -> None:
        if not self.tally.bytes:
            raise DataError(
                f"{src}: expected clips that hold sound. Received: {self.tally.clips} empty clips"
            )

    def discard(self) -> None:
        if os.path.exists(self.path):  # committed: moved under its name
            os.remove(self.path)


def finish(plan: Any, done: Sequence[ShardDone], tally_of: Any) -> ClipSplit:
    total = ClipTally()
    for d in done:
        total.merge(tally_of(d))  # the whole tally, read back from the shard's done-record
    fd, path = tempfile.mkstemp(dir=plan.dest, prefix=".clips-")
    with os.fdopen(fd, "w") as f:
        json.dump(total.to_json(), f)
    return ClipSplit(total, path, ((f"{plan.split}.clips.json", path),))


def open_clips(src: str, fmt: str, cfg: Any, joins: Any, dest: str, on_workers: Any = None) -> ClipSource:
    return ClipSource(tuple(sorted(storage.join(src, n) for n in storage.listdir(src) if n.endswith(".wav"))))


def wav_folder(folder: Folder) -> FormatChoice | None:
    """`--format auto`: a folder of .wav files and nothing else."""
    if folder.files and not folder.dirs and all(n.endswith(".wav") for n in folder.files):
        return FormatChoice("wav", f"a folder of {len(folder.files)} .wav clips")
    return None


KIND = Kind(
    name="audio",
    formats=("wav",),
    open=open_clips,
    inputs_from_json=ClipInputs.from_json,
    tally_from_json=ClipTally.from_json,
    finish=finish,
    rereads_inputs=True,
    sources={("wav",): "audio clips"},
    nouns={"wav": "a folder of clips"},
    split_files=lambda split: (f"{split}.clips.json",),
    signs=((60, wav_folder),),
    expects="a folder of .wav clips",
)


# ---- read ----


class ClipPreset:
    """`preset="audio"`: a clip's first SAMPLES bytes as float32 samples, its label the parity
    of its length."""

    name = "audio"

    def bind(self, ctx: PresetContext, options: Mapping[str, Any]) -> Decoder:
        from tfpipe._tf import tf

        tf_ = tf()
        spec = {
            "audio/bytes": tf_.io.FixedLenFeature([], tf_.string),
            "audio/length": tf_.io.FixedLenFeature([], tf_.int64),
        }

        def decode(features: Any, seed: Any, source: Any) -> Any:
            raw = tf_.io.decode_raw(features["audio/bytes"], tf_.uint8)[:SAMPLES]
            samples = tf_.pad(tf_.cast(raw, tf_.float32), [[0, SAMPLES - tf_.shape(raw)[0]]])
            label = tf_.cast(features["audio/length"] % 2, tf_.int32)
            return tf_.ensure_shape(samples, [SAMPLES]), label

        return Decoder(spec=spec, required=tuple(spec), decode=decode, batched=False)


# ---- bench ----


def generate(spec: Any, raw: str) -> str:
    """`spec.examples` clips of 1..100 bytes, made from the seed."""
    sizes = [1 + (spec.seed + 37 * i) % 100 for i in range(spec.examples)]
    return str(clips(raw, sizes))


BENCH = BenchHalf(
    default_batch=4,
    models=(),
    max_consumer_rate=1e9,
    synthetic=Synthetic(examples=40, shards=2, generate=generate, describe=lambda spec: ("Making", "clips")),
    noun="an audio dataset",
)

AUDIO = Modality(name="audio", convert=KIND, preset=ClipPreset(), bench=BENCH)


@contextlib.contextmanager
def registered() -> Iterator[Modality]:
    """The audio modality registered for the block."""
    register_modality(AUDIO)
    try:
        yield AUDIO
    finally:
        unregister_modality(AUDIO.name)


def clips(folder: Any, sizes: Sequence[int]) -> Any:
    """A folder of `clip<i>.wav` files of these sizes (bytes counting from i)."""
    os.makedirs(folder, exist_ok=True)
    for i, n in enumerate(sizes):
        with open(os.path.join(folder, f"clip{i}.wav"), "wb") as f:
            f.write(bytes((i + j) % 256 for j in range(n)))
    return folder

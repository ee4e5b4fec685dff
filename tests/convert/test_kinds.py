"""A fourth modality, added without touching convert's core: a test kind of audio clips (files
of bytes, `*.wav`), registered as the built-in kinds are and converted by the real engine, its
plan, writer, journal and manifest, end to end."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

import pytest

import tfpipe
from tfpipe import storage
from tfpipe.convert.encode import Encoded, EncodedPiece, Piece, Work, read_input
from tfpipe.convert.kind import Kind
from tfpipe.convert.kinds import kind_of_format, register_kind, unregister_kind
from tfpipe.convert.writer import ShardDone
from tfpipe.errors import ConfigError, DataError
from tfpipe.format.codec import encode_example
from tfpipe.format.manifest import Manifest
from tfpipe.format.schema import Field, Schema

SCHEMA = Schema((Field("audio/bytes", "bytes"), Field("audio/length", "int64")))


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
            out.append(
                Encoded(
                    encode_example({"audio/bytes": data, "audio/length": len(data)}, SCHEMA), None, len(data)
                )
            )
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


def open_clips(src: str, fmt: str, cfg: Any, joins: Any, scan_table: Any, dest: str) -> ClipSource:
    return ClipSource(tuple(sorted(storage.join(src, n) for n in storage.listdir(src) if n.endswith(".wav"))))


AUDIO = Kind(
    name="audio",
    formats=("wav",),
    open=open_clips,
    inputs_from_json=ClipInputs.from_json,
    tally_from_json=ClipTally.from_json,
    finish=finish,
    rereads_inputs=True,
    default_preset="audio",
    bench_hook="audio",
)


@pytest.fixture
def audio_kind():
    register_kind(AUDIO)
    yield AUDIO
    unregister_kind(AUDIO.name)


def clips(folder, sizes):
    folder.mkdir()
    for i, n in enumerate(sizes):
        (folder / f"clip{i}.wav").write_bytes(bytes((i + j) % 256 for j in range(n)))
    return folder


def test_a_new_kind_is_converted_by_the_real_engine(tmp_path, audio_kind):
    src = clips(tmp_path / "src", [5, 0, 300, 17, 64])
    m = tfpipe.convert(str(src), str(tmp_path / "out"), format="wav", num_shards=2, workers=1)
    assert (m.layout, m.splits["train"].examples) == ("wav", 5)
    assert m.splits["train"].notes == ("5 clips of 386 bytes",)
    assert json.loads((tmp_path / "out" / "train.clips.json").read_text()) == {"clips": 5, "bytes": 386}
    assert (
        tmp_path / "out" / "clips.txt"
    ).read_text() == "clip0.wav\nclip1.wav\nclip2.wav\nclip3.wav\nclip4.wav"
    again = Manifest.load(str(tmp_path / "out"))
    assert again.schema == SCHEMA and again.split("train").options["format"] == "wav"
    import tensorflow as tf

    got = []
    for path in again.shard_paths("train"):
        for raw in tf.data.TFRecordDataset(path):
            ex = tf.io.parse_single_example(
                raw,
                {
                    "audio/bytes": tf.io.FixedLenFeature([], tf.string),
                    "audio/length": tf.io.FixedLenFeature([], tf.int64),
                },
            )
            got.append((ex["audio/bytes"].numpy(), int(ex["audio/length"])))
    assert got == [((src / f"clip{i}.wav").read_bytes(), n) for i, n in enumerate([5, 0, 300, 17, 64])]


def test_a_new_kinds_refusal_stops_the_commit(tmp_path, audio_kind):
    src = clips(tmp_path / "src", [0, 0])
    with pytest.raises(DataError, match=r"expected clips that hold sound\. Received: 2 empty clips"):
        tfpipe.convert(str(src), str(tmp_path / "out"), format="wav", workers=1)
    assert not (tmp_path / "out" / "tfpipe.json").exists()


def test_a_format_no_kind_reads_is_refused_by_name(tmp_path):
    with pytest.raises(ConfigError, match=r"format must be one of \[.*'text'.*\]. Received: 'wav'"):
        kind_of_format("wav")
    with pytest.raises(ConfigError, match="format must be one of"):
        tfpipe.convert(str(tmp_path), str(tmp_path / "out"), format="wav")
    assert not (tmp_path / "out").exists()

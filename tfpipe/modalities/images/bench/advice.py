"""The images modality's word in a bench report (judge): what to do when decoding and
augmenting the images is the bottleneck."""

from __future__ import annotations

from tfpipe.bench.judge.advice import Recommendation


def stage_advice(stage: str, share: str, data_on_gcs: bool) -> Recommendation | None:
    """Decode-bound: smaller JPEGs decode several times faster. None for the other stages."""
    if stage != "decode":
        return None
    return Recommendation(
        "decode_bound",
        f"Decode/augment is the bottleneck: {share}.",
        "Decoding and augmenting images dominates. Convert with `tfpipe convert "
        "--resize-shorter 256` (smaller JPEGs decode several times faster, and the crop "
        "is decoded alone).",
    )

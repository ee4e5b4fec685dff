"""The text section of the report's JSON (`BenchHalf.section_json`): its `text` object, and a
mixture's `mixture` list, as the report's schema (tfpipe/bench/report.schema.json) describes
them and the report's serializers write them."""

from __future__ import annotations

from typing import Any

from tfpipe.bench.judge.report import mixture_json, text_json
from tfpipe.modalities.text.bench.figures import TextFigures


def section_json(t: TextFigures | None) -> dict[str, Any]:
    if t is None:
        return {}
    return {"text": text_json(t)} | ({"mixture": mixture_json(t)} if t.mixture else {})

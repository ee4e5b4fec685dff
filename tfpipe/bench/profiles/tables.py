"""The Profiler's outputs, read into a HostAnalysis: its JSON (Google DataTables) and its protos.

The Profiler writes the same per-step figures in three shapes, and each is read as written:
- the JSON `xspace_to_tool_data(..., "overview_page" | "input_pipeline_analyzer", ...)`
  returns, which older TensorBoard profile plugins also saved beside the trace
  (`<host>.overview_page.json`, plain or gzipped): a list of DataTables, one of them the step
  table (a `stepnum` column). GPU and CPU tables give `stepTimeMs` and `infeedTimeMs` (input
  wait) per step; TPU tables give the step time and input wait in each step's tooltip, as
  xprof formats it, and the per-step input share in `infeedPercentMax`.
- the pre-converted protos of older profile folders: `OverviewPage` (`<host>.overview_page.pb`)
  and `InputPipelineAnalysisResult` (`<host>.input_pipeline.pb`), from `xprof.protobuf`.

A TPU step's time is xprof's: compute, input, output and idle time of the TensorCore (and
SparseCore v0), which is what its step table shows. A generic (GPU) step's input share is
(host waiting for input + host-to-device) / step time, as xprof computes it per step.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any, TypeVar

from tfpipe.bench.profiles.analysis import HostAnalysis, ProfileError, Step
from tfpipe.errors import UnknownFormat

if TYPE_CHECKING:
    from google.protobuf.message import Message
    from xprof.protobuf.input_pipeline_pb2 import InputPipelineAnalysisResult

_STEP_TIME = re.compile(r"Step time = ([0-9.eE+-]+) ms")
_INPUT_TIME = re.compile(r"Time waiting for input data = ([0-9.eE+-]+) ms")
_LEADING_INT = re.compile(r"^\s*(\d+)")
M = TypeVar("M", bound="Message")


def from_datatables(obj: object, *, host: str, files: tuple[str, ...], fmt: str, known: str) -> HostAnalysis:
    """Reads the DataTable JSON of xprof's overview page or input-pipeline analyzer.

    Args:
      obj: the parsed JSON.
      host, files, fmt: where it came from, for the result and for errors.
      known: which versions of the Profiler tfpipe reads, for the unknown-format error.

    Raises:
      UnknownFormat: not a list of DataTables with a step table tfpipe can read.
    """
    where = ", ".join(files)
    if not isinstance(obj, list) or not all(isinstance(t, dict) for t in obj):
        raise UnknownFormat(
            f"{where}: expected the Profiler's JSON, a list of DataTables; received "
            f"{type(obj).__name__}. {known}"
        )
    step_table = next((t for t in obj if "stepnum" in _column_ids(t)), None)
    if step_table is None:
        raise UnknownFormat(
            f"{where}: no step-time table (a DataTable with a 'stepnum' column) among its "
            f"{len(obj)} tables. {known}"
        )
    props: dict[str, Any] = {}
    for table in obj:
        for key, value in (table.get("p") or {}).items():
            props.setdefault(key, value)
    step_props = step_table.get("p") or {}
    ids = _column_ids(step_table)
    steps = tuple(
        step
        for row in step_table.get("rows") or []
        if (step := _row_step(ids, row, where=where, known=known)) is not None
    )
    conclusion = (
        step_props.get("input_conclusion")
        or step_props.get("summary_conclusion")
        or props.get("statement")
        or ""
    )
    return HostAnalysis(
        host=host,
        files=files,
        format=fmt,
        device=str(props.get("device_type") or ""),
        hardware=str(step_props.get("hardware_type") or props.get("hardware_type") or ""),
        cores=_leading_int(props.get("device_core_count")),
        host_count=_leading_int(props.get("host_count")),
        batch_size=_leading_int(props.get("batch_size")),
        steps=steps,
        conclusion=str(conclusion),
    )


def _column_ids(table: dict[str, Any]) -> list[str]:
    return [str(c.get("id")) for c in table.get("cols") or [] if isinstance(c, dict)]


def _row_step(ids: list[str], row: object, *, where: str, known: str) -> Step | None:
    """One step-table row as a Step; None for a row without a positive step time."""
    cells = row.get("c") if isinstance(row, dict) else None
    if not isinstance(cells, list):
        raise UnknownFormat(f"{where}: a step-table row is not a DataTable row ({row!r:.80}). {known}")
    values = {i: (c.get("v") if isinstance(c, dict) else None) for i, c in zip(ids, cells, strict=False)}
    tooltip = str(values.get("tooltip") or "")
    number = str(values.get("stepnum"))
    step_ms = _number(values.get("stepTimeMs"))
    if step_ms is None and (m := _STEP_TIME.search(tooltip)):
        step_ms = float(m.group(1))
    if step_ms is None:
        parts = [_number(v) for k, v in values.items() if k.endswith("TimeMs")]
        if not parts:
            raise UnknownFormat(
                f"{where}: step {number} has no step time (no stepTimeMs column, no 'Step time = ' in "
                f"its tooltip, no time columns). {known}"
            )
        step_ms = math.fsum(p for p in parts if p)
    input_ms = _number(values.get("infeedTimeMs"))
    if input_ms is None and (m := _INPUT_TIME.search(tooltip)):
        input_ms = float(m.group(1))
    if input_ms is None:
        input_ms = _number(values.get("inputTimeMs"))
    if input_ms is None:
        raise UnknownFormat(
            f"{where}: step {number} has no input time (no infeedTimeMs or inputTimeMs column, no "
            f"'Time waiting for input data = ' in its tooltip). {known}"
        )
    if not step_ms > 0:
        return None
    # TPU tables carry the Profiler's per-step input share; its summary averages each step's
    # largest share across cores. Other tables give input time and step time.
    percent = _number(values.get("infeedPercentMax"))
    if percent is None:
        percent = _number(values.get("infeedPercentAverage"))
    if percent is None:
        percent = 100.0 * input_ms / step_ms
    return Step(number, step_ms, input_ms, _clamp(percent))


def from_overview_pb(data: bytes, *, host: str, files: tuple[str, ...], known: str) -> HostAnalysis:
    """Reads a pre-converted `OverviewPage` (`<host>.overview_page.pb`)."""
    from xprof.protobuf import overview_page_pb2

    page = _parse(overview_page_pb2.OverviewPage, data, files)
    env = page.run_environment
    analysis = _from_input_pipeline(
        page.input_analysis, host=host, files=files, fmt="overview_page.pb", known=known
    )
    conclusion = page.recommendation.statement or analysis.conclusion
    return HostAnalysis(
        host=host,
        files=files,
        format="overview_page.pb",
        device=env.device_type,
        hardware=analysis.hardware,
        cores=env.device_core_count or None,
        host_count=env.host_count or None,
        batch_size=None,
        steps=analysis.steps,
        conclusion=conclusion,
    )


def from_input_pipeline_pb(data: bytes, *, host: str, files: tuple[str, ...], known: str) -> HostAnalysis:
    """Reads a pre-converted `InputPipelineAnalysisResult` (`<host>.input_pipeline.pb`)."""
    from xprof.protobuf import input_pipeline_pb2

    result = _parse(input_pipeline_pb2.InputPipelineAnalysisResult, data, files)
    return _from_input_pipeline(result, host=host, files=files, fmt="input_pipeline.pb", known=known)


def _parse(cls: type[M], data: bytes, files: tuple[str, ...]) -> M:
    from google.protobuf.message import DecodeError

    message = cls()
    try:
        message.ParseFromString(data)
    except DecodeError as e:
        raise ProfileError(
            f"{', '.join(files)} is corrupt: it does not parse as the Profiler's {cls.DESCRIPTOR.name} "
            f"proto ({len(data):,} bytes). Received: {e}"
        ) from None
    return message


def _from_input_pipeline(
    result: InputPipelineAnalysisResult, *, host: str, files: tuple[str, ...], fmt: str, known: str
) -> HostAnalysis:
    from xprof.protobuf import input_pipeline_pb2, tpu_input_pipeline_pb2

    steps = []
    for any_details in result.step_details:
        if any_details.Is(input_pipeline_pb2.PerGenericStepDetails.DESCRIPTOR):
            d = input_pipeline_pb2.PerGenericStepDetails()
            any_details.Unpack(d)
            step_ms, input_ms = d.step_time_ms, d.host_wait_input_ms + d.host_to_device_ms
            percent = 100.0 * input_ms / step_ms if step_ms > 0 else 0.0
            number = d.step_name or str(d.step_number)
        elif any_details.Is(tpu_input_pipeline_pb2.PerTpuStepDetails.DESCRIPTOR):
            d = tpu_input_pipeline_pb2.PerTpuStepDetails()
            any_details.Unpack(d)
            # xprof's StepTimeMs less its all-reduce time: what its TPU step table shows.
            input_ms = d.tc_infeed_time_ms + d.scv0_infeed_time_ms
            step_ms = d.tc_compute_time_ms + d.scv0_compute_time_ms + input_ms
            step_ms += d.tc_outfeed_time_ms + d.tc_idle_time_ms
            percent, number = d.infeed_percent_maximum, str(d.step_number)
        else:
            raise UnknownFormat(
                f"{', '.join(files)}: a step of type {any_details.type_url!r}, expected "
                f"PerGenericStepDetails or PerTpuStepDetails. {known}"
            )
        if step_ms > 0:
            steps.append(Step(number, step_ms, input_ms, _clamp(percent)))
    conclusion = ""
    bottleneck = result.recommendation.bottleneck_analysis
    for cls in (input_pipeline_pb2.BottleneckAnalysis, tpu_input_pipeline_pb2.TpuBottleneckAnalysis):
        if bottleneck.Is(cls.DESCRIPTOR):
            unpacked = cls()
            bottleneck.Unpack(unpacked)
            conclusion = unpacked.input_statement
    return HostAnalysis(
        host=host,
        files=files,
        format=fmt,
        device=result.hardware_type,
        hardware=result.hardware_type,
        cores=None,
        host_count=None,
        batch_size=None,
        steps=tuple(steps),
        conclusion=conclusion,
    )


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _leading_int(value: object) -> int | None:
    """12 from "12", "12 (Replica count = 8, ...)" or 12; None otherwise."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value or None
    m = _LEADING_INT.match(str(value)) if isinstance(value, str) else None
    return (int(m.group(1)) or None) if m else None


def _clamp(percent: float) -> float:
    return min(100.0, max(0.0, float(percent)))

"""Checks a bench report's JSON against `report.schema.json`, for the tests.

jsonschema (a test extra) does the full check; `_check` is a small independent reading of the
same rules (required keys, enums, constants, nulls and numeric ranges, every rule the schema
uses), so the tests also prove the schema says what the report writes without trusting one
validator.
"""

from __future__ import annotations

from typing import Any

from tfpipe.bench.judge.report import schema
from tfpipe.errors import DataError


def validate(obj: Any, *, use_jsonschema: bool = True) -> None:
    """Checks a report's JSON against `report.schema.json`.

    Uses the jsonschema package; with use_jsonschema=False, `_check` instead.

    Raises:
      DataError: naming the first field that breaks the schema.
    """
    if use_jsonschema:
        import jsonschema

        try:
            jsonschema.validate(obj, schema())
        except jsonschema.ValidationError as e:
            raise DataError(f"{'.'.join(map(str, e.absolute_path)) or 'report'}: {e.message}") from None
        return
    _check(obj, schema(), "report")


def _check(obj: Any, spec: dict[str, Any], where: str) -> None:
    types = spec.get("type", [])
    types = [types] if isinstance(types, str) else types
    if "const" in spec and obj != spec["const"]:
        raise DataError(f"{where}: {obj!r} is not {spec['const']!r}")
    if "enum" in spec and obj not in spec["enum"]:
        raise DataError(f"{where}: {obj!r} is not one of {spec['enum']}")
    if obj is None:
        if types and "null" not in types and None not in spec.get("enum", [None]):
            raise DataError(f"{where}: None is not of type {types}")
        return
    if isinstance(obj, dict):
        for key in spec.get("required", []):
            if key not in obj:
                raise DataError(f"{where}: '{key}' is a required property")
        for key, sub in spec.get("properties", {}).items():
            if key in obj:
                _check(obj[key], sub, key if where == "report" else f"{where}.{key}")
    elif isinstance(obj, list) and "items" in spec:
        for i, item in enumerate(obj):
            _check(item, spec["items"], f"{where}[{i}]")
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        if "minimum" in spec and obj < spec["minimum"]:
            raise DataError(f"{where}: {obj} is below the minimum {spec['minimum']}")
        if "exclusiveMinimum" in spec and obj <= spec["exclusiveMinimum"]:
            raise DataError(f"{where}: {obj} is not above {spec['exclusiveMinimum']}")
        if "maximum" in spec and obj > spec["maximum"]:
            raise DataError(f"{where}: {obj} is above the maximum {spec['maximum']}")

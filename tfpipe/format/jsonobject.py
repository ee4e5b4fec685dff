"""`JsonObject`: a JSON object as `json.loads` gives it and a `to_json` writes it (the manifest's
entries, a conversion's plan, the bench report). Its values are checked where they are read, by
the `from_json` that reads them, so to a type checker they are any JSON value."""

from __future__ import annotations

from typing import Any, TypeAlias

JsonObject: TypeAlias = dict[str, Any]

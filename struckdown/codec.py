"""The one JSON codec: how answers read as text and as JSON-ready data.

`as_text` is what an answer looks like when it becomes an assistant turn or
prompt text; `jsonable` is the plain data written to outputs, events and the CLI.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping
from typing import Any


def as_text(value: Any) -> str:
    """How an answer reads when it becomes an assistant turn or prompt text."""
    if isinstance(value, str):
        return value
    if isinstance(value, (_dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, _dt.timedelta):
        return str(value)
    if hasattr(value, "model_dump_json"):
        return str(value.model_dump_json())
    return json.dumps(value, default=str, ensure_ascii=False)


def jsonable(value: Any) -> Any:
    """Plain JSON-ready data for outputs, events and the CLI."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (_dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, _dt.timedelta):
        return value.total_seconds()
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if hasattr(value, "model_dump"):
        return jsonable(value.model_dump(mode="json"))
    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {value}"
    return str(value)

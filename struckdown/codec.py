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
        return iso_duration(value)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if hasattr(value, "model_dump"):
        return jsonable(value.model_dump(mode="json"))
    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {value}"
    return str(value)


def iso_duration(value: _dt.timedelta) -> str:
    """Render a timedelta as ISO 8601 (``PT1H30M``), the form the model is asked for."""
    micro_total = (value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds
    sign = "-" if micro_total < 0 else ""
    seconds_total, micro = divmod(abs(micro_total), 1_000_000)
    days, rest = divmod(seconds_total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    date_part = f"{days}D" if days else ""
    time_part = (f"{hours}H" if hours else "") + (f"{minutes}M" if minutes else "")
    if micro:
        time_part += f"{seconds}.{micro:06d}".rstrip("0") + "S"
    elif seconds or not (days or hours or minutes):
        time_part += f"{seconds}S"
    return f"{sign}P{date_part}" + (f"T{time_part}" if time_part else "")


_JSON_ESCAPES: dict[int, str] = {
    code: f"\\u{code:04x}" for code in (0x7F, *range(0x80, 0xA0), *range(0xD800, 0xE000))
}


def json_text(encoded: str) -> str:
    """JSON text (from `json.dumps(…, ensure_ascii=False)`) with DEL, C1 controls and lone
    surrogates written as `\\uXXXX` escapes: the same JSON value, safe on a terminal and
    always encodable as UTF-8 (json.dumps escapes C0 itself)."""
    return encoded.translate(_JSON_ESCAPES)

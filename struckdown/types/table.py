"""Every builtin type's facts, one row each (SPEC §2.2, §22): the type options it takes, its
default temperature, the family that sizes its default token cap, its positional options,
the description its schema carries and the line the language server shows.

`builtin.py` (options, descriptions), `legacy.py` (0.x's names), `temperatures.py`,
`slot_options.type_family` and the editor's hovers all read these rows; a new builtin type
is a row here plus its item plan in `builtin.plan_builtin`. Plain data: no pydantic here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

_TEXT = frozenset({"min_length", "max_length", "pattern"})
_RANGE = frozenset({"min", "max"})
_NONE: frozenset[str] = frozenset()


@dataclass(frozen=True)
class TypeRow:
    name: str
    options: frozenset[str]  # type options it accepts besides `required`
    temperature: float | None  # its default sampling temperature (SPEC §11, as 0.x had them)
    family: Literal["text", "value", "structured"]  # what sizes its default max_tokens (slot_options)
    doc: str  # one line for hovers and docs
    description: str | None = None  # the answer's description in its schema (text and temporal types)
    positional: bool = False  # its positional options mean something (choices, levels)
    legacy: bool = False  # a struckdown 0.x name (SPEC §11)
    alias_of: str | None = None  # another builtin under a second name


_T = TypeRow
TYPES: Mapping[str, TypeRow] = {t.name: t for t in (
    _T("respond", _TEXT, 0.7, "text", "Free text (the default type: `[[name]]`).", "The answer"),
    _T("extract", _TEXT, 0.0, "text", "Text copied verbatim from the input.", "Text copied verbatim from the input"),
    _T("think", _TEXT, 0.5, "text", "Free text for reasoning; later text can use it.", "Your reasoning, step by step"),
    _T("speak", _TEXT, 0.8, "text", "Free text meant to be said to the user.", "What to say, in your own words"),
    _T("pick", _NONE, 0.0, "value", "One of the positional choices: `[[pick:colour|red, green, blue]]`.", positional=True),
    _T("bool", _NONE, 0.0, "value", "`true` or `false`."),
    _T("int", _RANGE, 0.0, "value", "A whole number; `min=` / `max=` bound it."),
    _T("number", _RANGE, 0.0, "value", "A number; `min=` / `max=` bound it."),
    _T("date", _RANGE, 0.0, "value", "A `datetime.date` (ISO 8601 on the wire).", "ISO 8601 date (YYYY-MM-DD)"),
    _T("datetime", _RANGE, 0.0, "value", "A `datetime.datetime` (ISO 8601 on the wire).",
       "ISO 8601 date and time (YYYY-MM-DDTHH:MM:SS, optional UTC offset)"),
    _T("time", _RANGE, 0.0, "value", "A `datetime.time` (ISO 8601 on the wire).", "ISO 8601 time (HH:MM:SS)"),
    _T("duration", _RANGE, 0.0, "value", "A `datetime.timedelta` (ISO 8601 duration on the wire).",
       "ISO 8601 duration (e.g. PT1H30M, P3D)"),
    _T("json", _NONE, 0.0, "structured", "Any JSON value."),
    _T("record", _NONE, 0.0, "structured", "A JSON object."),
    _T("score", _RANGE, 0.0, "value",
       "The index of one of the ordered positional levels: `[[score:urgency|low, high]]`.", positional=True),
    _T("halt", _NONE, 0.0, "value",
       "A guard: the run halts when the verdict `{triggered, reason}` has `triggered` equal to `when`."),
    # struckdown 0.x's names (legacy.py, legacy_plans.py)
    _T("default", _TEXT, 0.7, "text", "0.x's name of `respond`.", "The answer", legacy=True, alias_of="respond"),
    _T("boolean", _NONE, 0.0, "value", "0.x's name of `bool`.", legacy=True, alias_of="bool"),
    _T("poem", _TEXT, 1.5, "text", "A poem (0.x; free text at a high temperature).", "A poem", legacy=True),
    _T("decide", _NONE, 0.0, "structured", "0.x: a bool, or one of its positional choices.", positional=True,
       legacy=True),
    _T("date_rule", _NONE, 0.0, "structured", "0.x: a recurrence rule shaped like RFC 5545's RRULE.", legacy=True),
    _T("chunked_conversation", _NONE, 0.3, "structured", "0.x: a list of `{description, start, end}` spans.",
       legacy=True),
)}


def names(**where: object) -> frozenset[str]:
    """The names of the rows whose fields equal `where` (`names(family="text")`)."""
    return frozenset(t.name for t in TYPES.values() if all(getattr(t, k) == v for k, v in where.items()))


#: Which type options each builtin accepts (``required`` is always accepted).
BUILTIN_OPTIONS: Mapping[str, frozenset[str]] = {t.name: t.options for t in TYPES.values()}
BUILTIN_TYPES: frozenset[str] = frozenset(BUILTIN_OPTIONS)
#: Types whose positional options mean something (choices for pick, levels for score).
POSITIONAL_TYPES: frozenset[str] = names(positional=True)
#: Free-text types (the answer streams as plain text).
TEXT_TYPES: frozenset[str] = names(family="text")

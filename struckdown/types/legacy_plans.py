"""The answer models of two 0.x type names, `date_rule` and `chunked_conversation`
(their item plans are in `builtin`, beside the others')."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

#: As `builtin.ANSWER_MODEL_CONFIG` (which imports this module).
ANSWER_MODEL_CONFIG = ConfigDict(extra="forbid", regex_engine="python-re")

Weekday = Literal["MO", "TU", "WE", "TH", "FR", "SA", "SU"]
Frequency = Literal["YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY", "SECONDLY"]


class DateRule(BaseModel):
    """A recurrence rule with the fields of an RFC 5545 RRULE (as `dateutil.rrule` takes them)."""

    model_config = ANSWER_MODEL_CONFIG

    freq: Frequency = Field(description="How often it repeats")
    dtstart: dt.date | dt.datetime | None = Field(default=None, description="First occurrence (ISO 8601)")
    count: int | None = Field(default=None, ge=1, description="How many occurrences in all")
    until: dt.date | dt.datetime | None = Field(default=None, description="Last possible occurrence (ISO 8601)")
    interval: int = Field(default=1, ge=1, description="Every n-th period (2 with WEEKLY: every other week)")
    byweekday: list[Weekday] | None = Field(default=None, description="Days of the week")
    bymonth: list[int] | None = Field(default=None, description="Months, 1 = January")
    bymonthday: list[int] | None = Field(default=None, description="Days of the month; -1 is the last")
    bysetpos: list[int] | None = Field(default=None, description="Which occurrence in each period; -1 is the last")


class ConversationChunk(BaseModel):
    """One stretch of a conversation about one thing."""

    model_config = ANSWER_MODEL_CONFIG

    description: str = Field(description="What this part of the conversation is about")
    start: int = Field(ge=0, description="Number of its first turn (the first turn of the conversation is 0)")
    end: int = Field(ge=0, description="Number of its last turn")


def dump_rule(value: DateRule) -> dict[str, Any]:
    return value.model_dump()


def dump_chunks(value: list[ConversationChunk]) -> list[dict[str, Any]]:
    return [chunk.model_dump() for chunk in value]

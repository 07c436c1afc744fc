"""The events one engine produces (SPEC §6); every one has `.type` and `to_json()`."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar, Union

if TYPE_CHECKING:
    from .results import Result, SlotResult


@dataclass(frozen=True)
class _Event:
    type: ClassVar[str] = "event"

    def to_dict(self) -> dict[str, Any]:
        from .codec import jsonable

        out: dict[str, Any] = {"type": self.type}
        for f in fields(self):
            value = getattr(self, f.name)
            if hasattr(value, "to_dict"):
                value = value.to_dict()
            out[f.name] = jsonable(value)
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)


@dataclass(frozen=True)
class SlotStreamStart(_Event):
    type: ClassVar[str] = "slot_stream_start"
    slot: str


@dataclass(frozen=True)
class TokenDelta(_Event):
    type: ClassVar[str] = "token_delta"
    slot: str
    delta: str
    accumulated: str


@dataclass(frozen=True)
class ThinkingDelta(_Event):
    type: ClassVar[str] = "thinking_delta"
    slot: str
    delta: str


@dataclass(frozen=True)
class ToolStarted(_Event):
    type: ClassVar[str] = "tool_started"
    slot: str
    tool_name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ToolCompleted(_Event):
    type: ClassVar[str] = "tool_completed"
    slot: str
    tool_name: str
    arguments: dict[str, Any]
    output: Any
    ok: bool
    error: str | None
    elapsed_ms: float
    was_cached: bool


@dataclass(frozen=True)
class SlotCompleted(_Event):
    type: ClassVar[str] = "slot_completed"
    slot: str
    result: SlotResult
    elapsed_ms: float
    was_cached: bool
    truncated: bool = False  # the answer's last response stopped at its token limit (SPEC §14)


@dataclass(frozen=True)
class SlotRetracted(_Event):
    type: ClassVar[str] = "slot_retracted"
    slot: str
    reason: str


@dataclass(frozen=True)
class CheckpointReached(_Event):
    type: ClassVar[str] = "checkpoint_reached"
    segment: int
    name: str | None


@dataclass(frozen=True)
class ProcessingComplete(_Event):
    type: ClassVar[str] = "processing_complete"
    result: Result
    early_termination: bool = False


@dataclass(frozen=True)
class ProcessingError(_Event):
    type: ClassVar[str] = "processing_error"
    slot: str | None
    error: BaseException


@dataclass(frozen=True)
class SlotRetry(_Event):
    """A transient provider failure: the request is sent again after `delay_s` seconds
    (`attempt` counts the retries of that request from 1; SPEC §14)."""

    type: ClassVar[str] = "slot_retry"
    slot: str
    attempt: int
    error: str
    delay_s: float


@dataclass(frozen=True)
class SlotFallback(_Event):
    """The slot starts again on its next fallback model (models named by their pydantic-ai
    `model_name`; SPEC §14)."""

    type: ClassVar[str] = "slot_fallback"
    slot: str
    from_model: str
    to_model: str
    reason: str


Event = Union[
    SlotStreamStart,
    TokenDelta,
    ThinkingDelta,
    ToolStarted,
    ToolCompleted,
    SlotCompleted,
    SlotRetracted,
    CheckpointReached,
    ProcessingComplete,
    ProcessingError,
    SlotRetry,
    SlotFallback,
]

__all__ = [
    "CheckpointReached",
    "Event",
    "ProcessingComplete",
    "ProcessingError",
    "SlotCompleted",
    "SlotFallback",
    "SlotRetracted",
    "SlotRetry",
    "SlotStreamStart",
    "ThinkingDelta",
    "TokenDelta",
    "ToolCompleted",
    "ToolStarted",
]

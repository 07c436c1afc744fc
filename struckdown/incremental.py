"""The events one engine produces (SPEC §6); every one has `.type` and `to_json()`."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar, Union

if TYPE_CHECKING:
    from .results import Result, SlotResult, Usage


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

    @property
    def slot_key(self) -> str | None:
        """0.x's name of `slot` (read-only), on the events that have one."""
        if "slot" not in {f.name for f in fields(self)}:
            raise AttributeError(f"{type(self).__name__} has no slot")
        slot: str | None = getattr(self, "slot")
        return slot


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
    confidence: float | None = None  # SPEC §27: the answer's confidence (confidence=logprobs|vote:N)


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

    @property
    def segment_index(self) -> int:
        """0.x's name of `segment` (read-only)."""
        return self.segment

    @property
    def segment_name(self) -> str | None:
        """0.x's name of `name` (read-only)."""
        return self.name


@dataclass(frozen=True)
class ProcessingComplete(_Event):
    type: ClassVar[str] = "processing_complete"
    result: Result
    early_termination: bool = False
    paused: bool = False  # SPEC §12: the run waits for approval decisions (`result.paused` holds them)


@dataclass(frozen=True)
class ProcessingError(_Event):
    type: ClassVar[str] = "processing_error"
    slot: str | None
    error: BaseException
    result: Result | None = None  # the answers so far, with every request the run made in its usage


@dataclass(frozen=True)
class ModelResponded(_Event):
    """One model request answered (SPEC §13): a line of the usage ledger. `usage` is that
    request's (one request and its tokens), `cost` its price in USD (None when unknown,
    0 for an answer served from the response cache, which is `cached`)."""

    type: ClassVar[str] = "model_responded"
    slot: str
    model: str
    usage: Usage
    cost: float | None
    elapsed_ms: float
    cached: bool
    finish_reason: str | None


@dataclass(frozen=True)
class ApprovalRequested(_Event):
    """A tool call needs a person's yes (SPEC §12); pending guards were joined first."""

    type: ClassVar[str] = "approval_requested"
    slot: str
    request_id: str
    tool_name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ApprovalDecided(_Event):
    """The decision on a request: `message` is None when approved, else the denial text
    the model receives."""

    type: ClassVar[str] = "approval_decided"
    slot: str
    request_id: str
    approved: bool
    message: str | None


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
    ApprovalRequested,
    ApprovalDecided,
    ModelResponded,
    SlotRetry,
    SlotFallback,
]

__all__ = [
    "ApprovalDecided",
    "ApprovalRequested",
    "CheckpointReached",
    "Event",
    "ModelResponded",
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

"""The events one engine produces (SPEC §6); every one has `.type` and `to_json()`.

For code written against struckdown 0.x: `event.type` also equals 0.x's name of the
event (`event.type == "checkpoint"` holds for a `CheckpointReached`), `model_dump()`
gives the event as a dict carrying 0.x's type and field names besides today's, and
the renamed fields read under their 0.x names (`slot_key`, `segment_index`, ...)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar, Union

if TYPE_CHECKING:
    from .results import Result, SlotResult, Usage


class EventType(str):
    """An event's `type`: today's name, which also compares equal to 0.x's (`legacy`)."""

    legacy: str

    def __new__(cls, name: str, legacy: str | None = None) -> EventType:
        self = super().__new__(cls, name)
        self.legacy = legacy or name
        return self

    def __eq__(self, other: object) -> bool:
        return str.__eq__(self, other) or (isinstance(other, str) and other == self.legacy)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        # hashed as 0.x's name, so a 0.x handler table (`handlers[event.type]`) finds it;
        # a table keyed by today's names looks up `str(event.type)` (a plain str)
        return hash(self.legacy)

    def __reduce__(self) -> tuple[Any, ...]:
        return (EventType, (str(self), self.legacy))


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

    def model_dump(self, *, mode: str = "python") -> dict[str, Any]:
        """The event as 0.x's pydantic events dumped it: `type` is 0.x's name, renamed
        fields appear under their 0.x names too (`slot_key`, `segment_index`, ...); the
        values are JSON-ready in either `mode` (0.x's keyword, accepted)."""
        out = self.to_dict()
        out["type"] = getattr(self.type, "legacy", str(self.type))
        for old, new in _OLD_NAMES:
            if new in out:
                out[old] = out[new]
        if "slot" in out and "segment_index" not in out:
            out["segment_index"] = self.segment_index
        if isinstance(self, ProcessingError):
            out["error_message"] = self.error_message
            out["error"] = str(self.error)
        return out

    def model_dump_json(self, *, indent: int | None = None) -> str:
        """`model_dump()` as JSON text (0.x's way of sending an event to a web client)."""
        return json.dumps(self.model_dump(), ensure_ascii=False, indent=indent)

    @property
    def segment_index(self) -> int:
        """0.x's field on every event: the index of the segment the event's slot is in
        (0 for a one-segment template and for events of the whole run)."""
        index: int = self.__dict__.get("_segment", 0)
        return index

    @property
    def slot_key(self) -> str | None:
        """0.x's name of `slot` (read-only), on the events that have one."""
        if "slot" not in {f.name for f in fields(self)}:
            raise AttributeError(f"{type(self).__name__} has no slot")
        slot: str | None = getattr(self, "slot")
        return slot


@dataclass(frozen=True)
class SlotStreamStart(_Event):
    type: ClassVar[str] = EventType("slot_stream_start", "stream_start")
    slot: str


@dataclass(frozen=True)
class TokenDelta(_Event):
    type: ClassVar[str] = EventType("token_delta")
    slot: str
    delta: str
    accumulated: str


@dataclass(frozen=True)
class ThinkingDelta(_Event):
    type: ClassVar[str] = EventType("thinking_delta")
    slot: str
    delta: str


@dataclass(frozen=True)
class ToolStarted(_Event):
    type: ClassVar[str] = EventType("tool_started")
    slot: str
    tool_name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ToolCompleted(_Event):
    type: ClassVar[str] = EventType("tool_completed")
    slot: str
    tool_name: str
    arguments: dict[str, Any]
    output: Any
    ok: bool
    error: str | None
    elapsed_ms: float
    was_cached: bool
    #: SPEC §29: how a call that did not run was answered: "replayed from the journal",
    #: "reconciled: happened" (the tool's reconcile hook), "decided: happened" (the user); None: it ran
    source: str | None = None


@dataclass(frozen=True)
class SlotCompleted(_Event):
    type: ClassVar[str] = EventType("slot_completed")
    slot: str
    result: SlotResult
    elapsed_ms: float
    was_cached: bool
    truncated: bool = False  # the answer's last response stopped at its token limit (SPEC §14)
    confidence: float | None = None  # SPEC §27: the answer's confidence (confidence=logprobs|vote:N)


@dataclass(frozen=True)
class SlotPartial(_Event):
    """A typed answer (an object or a list) so far (SPEC §26): `value` the partial answer
    validated so far, `complete_fields` the members the model has moved past (field names
    of an object, indexes of a list). The last one of a slot equals its final answer."""

    type: ClassVar[str] = "slot_partial"
    slot: str
    value: Any
    complete_fields: tuple[str | int, ...]


@dataclass(frozen=True)
class SlotRetracted(_Event):
    type: ClassVar[str] = EventType("slot_retracted")
    slot: str
    reason: str


@dataclass(frozen=True)
class CheckpointReached(_Event):
    type: ClassVar[str] = EventType("checkpoint_reached", "checkpoint")
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
    type: ClassVar[str] = EventType("processing_complete", "complete")
    result: Result
    early_termination: bool = False
    paused: bool = False  # SPEC §12: the run waits for approval decisions (`result.paused` holds them)


@dataclass(frozen=True)
class ProcessingError(_Event):
    type: ClassVar[str] = EventType("processing_error", "error")
    slot: str | None
    error: BaseException
    result: Result | None = None  # the answers so far, with every request the run made in its usage

    @property
    def error_message(self) -> str:
        """0.x's field: the error's text."""
        return str(self.error)

    @property
    def partial_results(self) -> dict[str, Any]:
        """0.x's field: slot key → SlotResult of the answers so far."""
        return dict(self.result.results) if self.result is not None else {}


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


def stamp_segment(event: Any, index: int) -> None:
    """Record on an event the segment its slot is in (read back as `segment_index`)."""
    object.__setattr__(event, "_segment", index)


def stamping(emit: Callable[[Any], Awaitable[None]], program: Any) -> Callable[[Any], Awaitable[None]]:
    """`emit` that records on each slot event the segment its slot is in (0.x's `segment_index`)."""
    segment_of: dict[str, int] = program.memo.get("segment_of") or program.memo.setdefault(
        "segment_of", {key: seg.index for seg in program.segments for key in seg.keys}
    )

    async def stamped(event: Any) -> None:
        index = segment_of.get(getattr(event, "slot", None) or "")
        if index:
            stamp_segment(event, index)
        await emit(event)

    return stamped


_OLD_NAMES = (("slot_key", "slot"), ("segment_index", "segment"), ("segment_name", "name"))

Event = Union[
    SlotStreamStart,
    TokenDelta,
    ThinkingDelta,
    ToolStarted,
    ToolCompleted,
    SlotCompleted,
    SlotPartial,
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

#: 0.x's name of the union of every event
IncrementalEvent = Event

__all__ = [
    "ApprovalDecided",
    "EventType",
    "IncrementalEvent",
    "ApprovalRequested",
    "CheckpointReached",
    "Event",
    "ModelResponded",
    "ProcessingComplete",
    "ProcessingError",
    "SlotCompleted",
    "SlotFallback",
    "SlotPartial",
    "SlotRetracted",
    "SlotRetry",
    "SlotStreamStart",
    "ThinkingDelta",
    "TokenDelta",
    "ToolCompleted",
    "ToolStarted",
]

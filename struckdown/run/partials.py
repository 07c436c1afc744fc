"""Typed answers that stream (SPEC §26): `SlotPartial` events while an object or list answer
arrives, validated the way pydantic-ai's `stream_output` validates a partial answer.

The answer's JSON (the output tool call's arguments, or the text of a native/prompted
answer) is gathered from the slot's model stream. Each piece is scanned once for the
answer's completed members (a comma at the answer's level means the member before it is
done; its closing bracket means all are). At most `PER_SECOND` partials go out per slot:
a piece that arrives sooner after the last one only updates what the next one will show,
and the end of the answer always sends one with the complete value (unless it is the one
shown already). No timer runs: a pause in the stream shows the latest partial when the
next piece (or the end) arrives.
"""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterable, Awaitable, Callable
from time import monotonic
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import TypeAdapter, ValidationError
from pydantic_ai.messages import (
    FinalResultEvent,
    PartDeltaEvent,
    PartEndEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ToolCallPart,
    ToolCallPartDelta,
)

from ..incremental import SlotPartial, SlotRetracted

if TYPE_CHECKING:
    from ..types import OutputSpec


class SlotEnv(Protocol):
    """What the partials need of the slot's run (run/slot.py's SlotEnv)."""

    @property
    def emit(self) -> Callable[[Any], Awaitable[None]]: ...
    @property
    def join_guards(self) -> Callable[[], Awaitable[None]]: ...
    @property
    def streaming_now(self) -> set[str]: ...

PER_SECOND = 20  # SPEC §26: at most this many SlotPartial events a second per slot


@functools.lru_cache(maxsize=256)
def streams_partials(spec: OutputSpec) -> bool:
    """Whether the slot's answer is an object or a list (or any JSON value): the answers
    that arrive piece by piece. Scalars (`int`, `pick`, `bool`, …) come whole. Once per
    spec (specs are cached and compare by identity)."""
    if spec.is_text:
        return False
    return _shaped(spec.answer_schema, spec.answer_schema.get("$defs", {}))


def _shaped(schema: Any, defs: dict[str, Any]) -> bool:
    if not isinstance(schema, dict):
        return False
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return _shaped(defs.get(ref.rsplit("/", 1)[-1]), defs)
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return any(_shaped(s, defs) for s in schema[key] if s != {"type": "null"})
    kind = schema.get("type")
    if kind is None:
        return "enum" not in schema and "const" not in schema  # any JSON value
    kinds = kind if isinstance(kind, list) else [kind]
    return "object" in kinds or "array" in kinds


class _Scanner:
    """Reads the answer's JSON piece by piece: how many members of the answer (the value
    of the wrapper's `response`, at depth 2) are complete, and whether it closed."""

    __slots__ = ("depth", "in_string", "escape", "done", "closed", "opened")

    def __init__(self) -> None:
        self.depth = 0
        self.in_string = self.escape = self.closed = self.opened = False
        self.done = 0

    def feed(self, text: str) -> None:
        if self.closed:
            return
        for char in text:
            if self.in_string:
                if self.escape:
                    self.escape = False
                elif char == "\\":
                    self.escape = True
                elif char == '"':
                    self.in_string = False
            elif char == '"':
                self.in_string = True
            elif char in "{[":
                self.depth += 1
                if self.depth == 2:
                    self.opened = True
            elif char in "}]":
                if self.depth == 2 and self.opened:
                    self.closed = True
                    return
                self.depth -= 1
            elif char == "," and self.depth == 2:
                self.done += 1


class Partials:
    """Turns one typed slot's model stream into `SlotPartial` events (an `event_stream_handler`)."""

    def __init__(self, env: SlotEnv, slot: str, spec: OutputSpec) -> None:
        self.env, self.slot, self.spec = env, slot, spec
        self.adapter = _adapter(spec)
        self.started = False  # a partial went out (and was not retracted)
        self.last: tuple[Any, tuple[str | int, ...]] | None = None
        self.sent_at = float("-inf")
        self.parts: dict[int, str] = {}  # the arguments (or text) of each part of this response
        self.ids: dict[int, str] = {}
        self.answer: int | None = None  # the part that is the answer
        self.text_answer = False
        self.scanner = _Scanner()

    async def handle(self, ctx: Any, events: AsyncIterable[Any]) -> None:
        self._reset()
        fresh = True
        async for event in events:
            if isinstance(event, PartStartEvent):
                if fresh and self.started:  # a new response after an answer shown: it was rejected
                    await self.retract("retry")
                fresh = False
                await self._start(event.index, event.part)
            elif isinstance(event, FinalResultEvent):
                if event.tool_name is None:
                    self.text_answer = True
                    self.answer = max((i for i in self.parts if i not in self.ids), default=None)
                else:
                    self.answer = next((i for i, c in self.ids.items() if c == event.tool_call_id), None)
                if self.answer is not None and self.answer in self.parts:
                    await self._grew(self.parts[self.answer])
            elif isinstance(event, PartDeltaEvent) and event.index in self.parts:
                delta = event.delta
                piece = ""
                if isinstance(delta, ToolCallPartDelta) and isinstance(delta.args_delta, str):
                    piece = delta.args_delta
                elif isinstance(delta, TextPartDelta):
                    piece = delta.content_delta
                if piece:
                    self.parts[event.index] += piece
                    if event.index == self.answer:
                        await self._grew(piece)
            elif isinstance(event, PartEndEvent) and event.index == self.answer:
                part = event.part
                await self._final(_args(part) if isinstance(part, ToolCallPart) else getattr(part, "content", ""))

    def _reset(self) -> None:
        """A response starts (or starts again after a retry): nothing of it is read yet."""
        self.parts = {}
        self.ids = {}
        self.answer = None
        self.text_answer = False
        self.scanner = _Scanner()

    async def _start(self, index: int, part: Any) -> None:
        if index in self.parts:  # the same response streamed again (a retried request)
            self._reset()
        if isinstance(part, ToolCallPart):
            self.parts[index] = _args(part)
            self.ids[index] = part.tool_call_id
        elif isinstance(part, TextPart):
            self.parts[index] = part.content
            if self.text_answer:
                self.answer = index
                await self._grew(part.content)

    async def _grew(self, piece: str) -> None:
        scanner = self.scanner
        scanner.feed(piece)
        assert self.answer is not None
        text = self.parts[self.answer]
        now = monotonic()
        if now - self.sent_at < 1.0 / PER_SECOND:
            return  # coalesced: the next piece (or the end) shows it
        try:
            model = self.adapter.validate_json(text, experimental_allow_partial="trailing-strings")
            value = self.spec.to_value(model)
        except (ValidationError, ValueError):
            return  # not an answer yet (e.g. a required field has not started)
        if isinstance(value, dict | list) and not value:
            return  # `{"response": {` is no answer yet: an object shows from its first key, a list from its first item
        await self._send(value, _complete(text, value, scanner.done, scanner.closed), now)

    async def _final(self, text: str) -> None:
        try:
            value = self.spec.to_value(self.adapter.validate_json(text or "{}"))
        except (ValidationError, ValueError):
            return  # an answer pydantic-ai will reject (and ask again): nothing final to show
        await self._send(value, _complete(text, value, 0, True), monotonic())

    async def _send(self, value: Any, complete: tuple[str | int, ...], now: float) -> None:
        if self.last is not None and self.last[1] == complete and _same(self.last[0], value):
            return
        if not self.started:
            await self.env.join_guards()  # no partial before the preceding guards' verdicts
            self.started = True
            self.env.streaming_now.add(self.slot)
        self.last = (value, complete)
        self.sent_at = now
        await self.env.emit(SlotPartial(self.slot, value, complete))

    async def retract(self, reason: str) -> None:
        """A failed attempt's partials are void (SPEC §14): the next attempt starts empty."""
        if self.started:
            self.started = False
            self.last = None
            self.sent_at = float("-inf")
            self.env.streaming_now.discard(self.slot)
            self._reset()
            await self.env.emit(SlotRetracted(self.slot, reason))


@functools.lru_cache(maxsize=256)
def _adapter(spec: OutputSpec) -> TypeAdapter[Any]:
    """The answer type's validator, built once per spec (not on every slot run: building
    it was most of the partial reader's own cost to the first `SlotPartial`)."""
    return TypeAdapter(spec.output_type)


def _args(part: ToolCallPart) -> str:
    """The call's arguments as written so far (`args_as_json_str` wraps unfinished JSON)."""
    if isinstance(part.args, str):
        return part.args
    return json.dumps(part.args) if part.args else ""


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:
        return False


def _complete(text: str, value: Any, done: int, closed: bool) -> tuple[str | int, ...]:
    """The answer's members the model has moved past: names for an object, indexes for a list."""
    if isinstance(value, list):
        return tuple(range(len(value) if closed else min(done, len(value))))
    keys = _keys(text, value)
    return tuple(keys if closed else keys[:done])


def _keys(text: str, value: Any) -> list[str]:
    """The answer's keys in the order the model wrote them."""
    from pydantic_core import from_json

    try:
        raw = from_json(text or "{}", allow_partial="trailing-strings")
    except ValueError:
        raw = None
    answer = raw.get("response") if isinstance(raw, dict) else None
    if isinstance(answer, dict):
        return [str(k) for k in answer]
    if isinstance(value, dict):
        return [str(k) for k in value]
    return []

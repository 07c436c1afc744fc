"""Free-text answers that stream (SPEC §6): pydantic-ai's stream events of a slot as
`SlotStreamStart`, `TokenDelta` and `ThinkingDelta` events (typed answers: `partials.py`)."""

from __future__ import annotations

from collections.abc import AsyncIterable, Callable
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.messages import (
    FunctionToolCallEvent,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
    ToolCallPart,
)

from ..incremental import SlotRetracted, SlotStreamStart, ThinkingDelta, TokenDelta
from .loop_guard import LoopDetector
from .partials import SlotEnv  # what a stream reader needs of the slot's run


class TextStream:
    """Turns pydantic-ai stream events into TokenDelta/ThinkingDelta events.

    The first token waits for pending guards (a join point). In a tool slot the
    text of each response is held until the response proves final (no tool call
    follows), so only the final answer streams.
    """

    def __init__(
        self, env: SlotEnv, slot: str, *, buffer_text: bool, quiet: bool = False, guard: LoopDetector | None = None
    ) -> None:
        self.env, self.slot, self.buffer_text = env, slot, buffer_text
        self.quiet = quiet  # only collects the text (a deadline's answer, the loop guard's), emits nothing
        self.guard = guard  # SPEC §34: watches the answer for a loop (run/loop_guard.py) …
        self.stop: Callable[[], Any] | None = None  # … and stops the request when it sees one (run/loop_retry.py)
        self.accumulated = ""
        self.held: list[str] = []
        self.started = False

    async def handle(self, ctx: RunContext[Any], events: AsyncIterable[Any]) -> None:
        async for event in events:
            if isinstance(event, PartStartEvent):
                if isinstance(event.part, TextPart):
                    await self._text(event.part.content)
                elif isinstance(event.part, ThinkingPart) and event.part.content:
                    await self.env.emit(ThinkingDelta(self.slot, event.part.content))
                elif isinstance(event.part, ToolCallPart):
                    self._drop_held()
            elif isinstance(event, PartDeltaEvent):
                if isinstance(event.delta, TextPartDelta):
                    await self._text(event.delta.content_delta)
                elif isinstance(event.delta, ThinkingPartDelta) and event.delta.content_delta:
                    await self.env.emit(ThinkingDelta(self.slot, event.delta.content_delta))
            elif isinstance(event, FunctionToolCallEvent):
                self._drop_held()
        await self.flush()

    def _drop_held(self) -> None:
        """A response that turned out to call a tool: its text is not the answer."""
        self.held.clear()
        if self.guard is not None:
            self.guard.reset()

    async def _text(self, delta: str) -> None:
        if not delta:
            return
        if self.buffer_text:
            self.held.append(delta)
        else:
            await self._emit(delta)
        if self.guard is not None and self.guard.feed(delta) is not None and self.stop is not None:
            self.stop()  # cancels the request (run/loop_retry.py decides what next)

    async def retract(self, reason: str) -> None:
        """A failed attempt's text is void (SPEC §14): retract what went out; the next
        attempt streams from an empty `accumulated`."""
        self.held.clear()
        self.accumulated = ""  # a quiet stream's too
        if self.guard is not None:
            self.guard.reset()
        if self.started:
            self.started = False
            self.env.streaming_now.discard(self.slot)
            await self.env.emit(SlotRetracted(self.slot, reason))

    async def show(self, text: str) -> None:
        """Stream `text` as is (the text a loop-cut answer keeps: run/loop_retry.py)."""
        await self._emit(text)

    async def flush(self) -> None:
        held, self.held = self.held, []
        for delta in held:
            await self._emit(delta)

    async def _emit(self, delta: str) -> None:
        if self.quiet:
            self.accumulated += delta
            return
        if not self.started:
            await self.env.join_guards()
            self.started = True
            self.env.streaming_now.add(self.slot)
            await self.env.emit(SlotStreamStart(self.slot))
        self.accumulated += delta
        await self.env.emit(TokenDelta(self.slot, delta, self.accumulated))

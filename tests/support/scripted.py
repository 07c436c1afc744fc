"""Scripted pydantic-ai models that record every request, for exact assertions."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel


@dataclass
class Call:
    messages: list[ModelMessage]
    info: AgentInfo

    @property
    def turns(self) -> list[tuple[str, str]]:
        return turns(self.messages)

    @property
    def last_user(self) -> str:
        users = [t for r, t in self.turns if r == "user"]
        return users[-1] if users else ""

    @property
    def instructions(self) -> str | None:
        return self.info.instructions

    @property
    def tool_names(self) -> list[str]:
        return [t.name for t in self.info.function_tools]

    @property
    def schema(self) -> dict[str, Any] | None:
        return self.info.output_tools[0].parameters_json_schema if self.info.output_tools else None


def turns(messages: list[ModelMessage]) -> list[tuple[str, str]]:
    """(role, text) of the user and assistant turns, ignoring pydantic-ai's own notes."""
    out: list[tuple[str, str]] = []
    for message in messages:
        for part in message.parts:
            if type(part) is UserPromptPart:
                out.append(("user", str(part.content)))
            elif isinstance(part, TextPart):
                out.append(("assistant", part.content))
            elif isinstance(part, ToolCallPart):
                out.append(("call", f"{part.tool_name}({json.dumps(part.args_as_dict(), sort_keys=True)})"))
            elif isinstance(part, ToolReturnPart):
                out.append(("return", str(part.content)))
            elif isinstance(part, RetryPromptPart):
                out.append(("retry", str(part.content)))
    return out


T = TypeVar("T")
Answer = Callable[[Call], Any]
MEET_GUARD_S = 60.0  # only so a missing overlap fails instead of hanging; no test waits for it


@dataclass
class Script:
    """`answer(call)` returns: a str (text answer, or output value when the slot is
    typed), a dict/list/number/bool (the typed value), a ModelResponse (sent as is),
    or a `Tools([...])` list of (name, args) tool calls."""

    answer: Answer
    calls: list[Call] = field(default_factory=list)
    chunk: int = 0  # stream text in pieces of this many characters (0 = words)
    meet: int = 0  # hold each request until this many are in flight together (a gate; never met: fails)
    meet_when: Callable[[Call], bool] = lambda call: True  # which requests the meeting is for
    gate: Callable[[Call], Awaitable[None]] | None = None  # awaited before answering: the test releases it
    in_flight: int = 0
    peak: int = 0
    _met: asyncio.Event | None = None

    def model(self, name: str = "scripted") -> FunctionModel:
        return FunctionModel(self._fn, stream_function=self._stream, model_name=name)

    def _record(self, messages: list[ModelMessage], info: AgentInfo) -> Call:
        call = Call(list(messages), info)
        self.calls.append(call)
        return call

    async def _wait_turn(self, call: Call) -> None:
        """The overlap proof: with `meet=n`, wait until n requests are in
        flight at once; the nth to arrive opens the gate for all. A missing overlap fails
        the test (after MEET_GUARD_S, a guard against hanging, not a wait anyone relies on)."""
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            if self.meet and self.meet_when(call):
                if self._met is None:
                    self._met = asyncio.Event()
                if self.in_flight >= self.meet:
                    self._met.set()
                try:  # the bound is only a guard against hanging the suite: it fails the test
                    await asyncio.wait_for(self._met.wait(), timeout=MEET_GUARD_S)
                except asyncio.TimeoutError:
                    raise AssertionError(
                        f"meet={self.meet}: the requests never were in flight together (peak {self.peak})"
                    ) from None
            if self.gate is not None:
                await self.gate(call)
        finally:
            self.in_flight -= 1

    async def _fn(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        call = self._record(messages, info)
        await self._wait_turn(call)
        return respond(self.answer(call), info)

    async def _stream(self, messages: list[ModelMessage], info: AgentInfo):  # type: ignore[no-untyped-def]
        call = self._record(messages, info)
        await self._wait_turn(call)
        response = respond(self.answer(call), info)
        for index, part in enumerate(response.parts):
            if isinstance(part, TextPart):
                for piece in _pieces(part.content, self.chunk):
                    yield piece
            elif isinstance(part, ToolCallPart):
                # one key per tool call of the response (`id(part) % 97` used to collide now and
                # then, merging two calls into one: a flaky test)
                yield {len(self.calls) * 100 + index: DeltaToolCall(name=part.tool_name, json_args=part.args_as_json_str())}


# -- gates that wait for the run to stand still ---------------------------------------
#
# A test proves "X cannot happen before the verdict" by answering the guard *last*: only
# when every other task of the run is waiting on something. Were the engine to allow X,
# X would happen before that point (nothing stops it), and the test would see it; the
# engine is what keeps it from happening. No clock decides anything.

SETTLE_ROUNDS = 3  # consecutive looks at a still loop (a pending call_soon callback shows up in one)
SETTLE_GUARD = 200_000  # looks before giving up: a task that never waits fails the test, not hangs it
_settling: set[asyncio.Task[Any]] = set()


def _runnable(task: asyncio.Task[Any]) -> bool:
    waiter = getattr(task, "_fut_waiter", None)  # what the task awaits (asyncio's, as anyio reads it)
    return waiter is None or waiter.done()


async def settled() -> None:
    """Return once every other task of the running loop is waiting (on an event, a lock,
    a worker thread or a socket) for SETTLE_ROUNDS looks in a row: the run can go no
    further until the test releases something. Tasks in `settled()` themselves count as
    waiting. (A worker thread or a socket may still be busy: gate those on what they do.)"""
    me = asyncio.current_task()
    assert me is not None
    _settling.add(me)
    try:
        still = 0
        for _ in range(SETTLE_GUARD):
            await asyncio.sleep(0)  # a yield to the other tasks, not a wait on the clock
            busy = any(t is not me and t not in _settling and _runnable(t) for t in asyncio.all_tasks())
            still = 0 if busy else still + 1
            if still >= SETTLE_ROUNDS:
                return
        raise AssertionError("the run never stood still: some task kept running")
    finally:
        _settling.discard(me)


def answered_last(
    pick: Callable[[Call], bool], after: Callable[[Call], Awaitable[None]] | None = None
) -> Callable[[Call], Awaitable[None]]:
    """A `gate=` that holds the calls `pick` chooses until the run stands still (after
    `after(call)`, when given): e.g. `answered_last(is_guard)` gives every verdict as late
    as it can come, so whatever the engine does not hold back for it happens first."""

    async def gate(call: Call) -> None:
        if pick(call):
            if after is not None:
                await after(call)
            await settled()

    return gate


@dataclass
class Scheduler:
    """A seeded random order of releases, driven by the test instead of random sleeps.

    Model calls (as a `Script` `gate=`) and tool bodies `park()`; `drive()` waits until
    the run stands still, releases one parked waiter chosen by `rng`, and repeats until
    `done` is set. `log` numbers what happened in one sequence (`note()`), so a test judges
    order by position, not by clocks. `weight(call)` makes some calls likelier to go
    first (a light one is usually released late, as a slow model would answer)."""

    rng: Any  # random.Random
    weight: Callable[[Call], float] | None = None
    parked: list[tuple[str, asyncio.Event, float]] = field(default_factory=list)
    log: list[tuple[str, str]] = field(default_factory=list)
    releases: int = 0

    def note(self, kind: str, what: str) -> int:
        self.log.append((kind, what))
        return len(self.log) - 1

    async def park(self, label: str, weight: float = 1.0) -> None:
        event = asyncio.Event()
        entry = (label, event, weight)
        self.parked.append(entry)
        try:
            await event.wait()
        finally:
            if entry in self.parked:  # cancelled while parked (a trip): nothing to release
                self.parked.remove(entry)

    async def gate(self, call: Call) -> None:
        await self.park(call.last_user, self.weight(call) if self.weight else 1.0)

    async def drive(self, done: asyncio.Event) -> None:
        while True:
            await settled()
            if done.is_set():
                return
            if not self.parked:
                raise AssertionError("the run stands still with nothing to release: a deadlock")
            weights = [w for _, _, w in self.parked]
            chosen = self.rng.choices(range(len(self.parked)), weights)[0]
            _, event, _ = self.parked.pop(chosen)
            self.releases += 1
            event.set()

    async def run(self, body: Awaitable[T]) -> T:
        """Run `body` (the test's consumer of the run) while driving the releases."""
        done = asyncio.Event()
        driver = asyncio.create_task(self.drive(done))
        work = asyncio.ensure_future(body)
        try:
            await asyncio.wait({driver, work}, return_when=asyncio.FIRST_COMPLETED)
            if not work.done():  # the driver failed (a deadlock): stop the run, report it
                work.cancel()
                driver.result()
            return await work
        finally:
            done.set()
            if not work.done():
                work.cancel()
            await driver


def _pieces(text: str, size: int) -> list[str]:
    if size:
        return [text[i : i + size] for i in range(0, len(text), size)] or [""]
    words = text.split(" ")
    return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]


@dataclass
class Tools:
    calls: list[tuple[str, dict[str, Any]]]


def respond(value: Any, info: AgentInfo) -> ModelResponse:
    if isinstance(value, ModelResponse):
        return value
    if isinstance(value, Tools):
        return ModelResponse(parts=[ToolCallPart(name, args) for name, args in value.calls])
    if info.output_tools:
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"response": value})])
    return ModelResponse(parts=[TextPart(value if isinstance(value, str) else json.dumps(value))])


def echo_last(prefix: str = "A:") -> Answer:
    """Answer each request with `prefix` + its last user turn."""
    return lambda call: f"{prefix}{call.last_user}"


def by_prompt(mapping: dict[str, Any]) -> Answer:
    """Answer by the first mapping key found in the last user turn."""

    def answer(call: Call) -> Any:
        for key, value in mapping.items():
            if key in call.last_user:
                return value
        raise AssertionError(f"no scripted answer for {call.last_user!r}")

    return answer


def value_for(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> Any:
    """A valid value for a JSON schema (the subset struckdown's answer types use)."""
    defs = defs or {}
    if "$ref" in schema:
        return value_for(defs[schema["$ref"].split("/")[-1]], defs)
    if "anyOf" in schema:
        options = [s for s in schema["anyOf"] if s.get("type") != "null"]
        return value_for(options[0], defs) if options else None
    if "enum" in schema:
        return schema["enum"][-1]
    kind = schema.get("type")
    if kind == "boolean":
        return True
    if kind == "integer":
        return max(int(schema.get("minimum", 0)), min(int(schema.get("maximum", 3)), 3))
    if kind == "number":
        return max(float(schema.get("minimum", 0)), 1.5)
    if kind == "string":
        if schema.get("pattern", "").startswith("^[1-9][0-9]{3}-"):  # datetime (a pattern, not a format)
            return "2025-03-03T10:00:00Z"
        if schema.get("pattern", "").startswith("^([01][0-9]|2[0-3]):"):  # time
            return "10:30:00"
        return {"date": "2025-03-03", "duration": "PT1H30M"}.get(schema.get("format", ""), "text")
    if kind == "array":
        count = max(schema.get("minItems", 1), 1)
        return [value_for(schema.get("items", {}), defs) for _ in range(count)]
    if kind == "object" and "properties" in schema:
        return {k: value_for(v, defs) for k, v in schema["properties"].items()}
    if kind == "object":
        return {"key": "value"}
    return {"any": "json"}


def auto_answer(call: Call) -> Any:
    """Answer any slot validly: text for free text, a schema-valid value otherwise."""
    if call.schema:
        response = call.schema["properties"]["response"]
        return value_for(response, call.schema.get("$defs"))
    return f"answer to: {call.last_user[:40]}"

"""The one engine: runs a Program and produces the SPEC §6 events.

`events()` is the only execution path; `complete()` drains it, the incremental
API hands it out, the CLI prints it and batch runs many of them. Everything the
run starts (segments, slots, guards, tools) lives in one anyio task group, so
closing the generator, cancelling the consumer or a guard trip reaches all of it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import anyio
from anyio.abc import TaskGroup

from ..actions import call_action, default_actions
from ..compile import Program, Segment, carried_instructions
from ..errors import Halted, TemplateRuntimeError
from ..incremental import (
    CheckpointReached,
    ProcessingComplete,
    ProcessingError,
    SlotCompleted,
    SlotRetracted,
)
from ..models import resolve_model
from ..render import as_text, evaluate, render_text
from .slot import evaluate_option
from ..results import Result, SlotResult
from ..syntax.checks import walk
from ..syntax.nodes import Action, If, Instructions, JinjaValue, Node, Slot, Text, Together, Turn
from .conversation import Conversation, Layers
from .guards import GuardBoard
from .slot import SlotEnv, output_for, resolve_plan, run_model_slot
from .tools import ToolBox

_END = object()


@dataclass
class RunOptions:
    model: Any = None
    tools: Sequence[Any] = ()
    deps: Any = None
    limits: Any = None
    on_halt: str = "raise"
    settings: Mapping[str, Any] | None = None
    cache: Any = None
    stop_at: str | None = None
    stream: bool = True


class _StopRun(Exception):
    """stop_at reached: end this segment's walk quietly."""


@dataclass
class Run:
    program: Program
    context: Mapping[str, Any]
    options: RunOptions
    queue: asyncio.Queue[Any]
    variables: dict[str, Any] = field(init=False)
    results: dict[str, SlotResult] = field(default_factory=dict)
    ready: dict[str, anyio.Event] = field(init=False)
    guards: GuardBoard = field(init=False)
    env: SlotEnv = field(init=False)
    stopped: bool = False
    _tg: TaskGroup | None = None

    def __post_init__(self) -> None:
        self.variables = dict(self.context)
        self.ready = {key: anyio.Event() for key in self.program.keys}
        self.guards = GuardBoard({seg.index: self.guards_of(seg) for seg in self.program.segments})
        default_model = self.options.model
        resolved_default: list[Any] = []

        def model_for(name: str | None) -> Any:
            if name:
                return resolve_model(name)
            if not resolved_default:
                resolved_default.append(resolve_model(default_model))
            return resolved_default[0]

        if self.options.stop_at is not None and self.options.stop_at not in self.program.keys:
            raise ValueError(f"stop_at={self.options.stop_at!r} is not a slot of this template")
        self.model_for = model_for
        self.env = SlotEnv(
            emit=self.emit,
            join_guards=self.guards.join_all,
            before_model_call=self.guards.before_model_call,
            resolve_model=model_for,
            toolbox=ToolBox.build(self.options.tools),
            deps=self.options.deps,
            limits=self.options.limits,
            settings=self.options.settings,
            stream=self.options.stream,
            cache=_cache(self.options.cache),
            has_guards=bool(self.guards.states),
        )

    async def emit(self, event: Any) -> None:
        self.queue.put_nowait(event)

    # -- the run -------------------------------------------------------------
    async def main(self) -> None:
        try:
            if any(isinstance(n, Slot) for s in self.program.segments for n in walk(s.nodes)):
                self.model_for(None)  # fail fast on a missing model, before any work
            segments = self._segments_to_run()
            if len(segments) == 1 and not self.guards.states:
                await self._run_segment(segments[0])  # nothing runs beside it: no task group needed
            else:
                async with anyio.create_task_group() as tg:
                    self._tg = tg
                    for segment in segments:
                        tg.start_soon(self._run_segment, segment)
            await self.guards.join_all()
        except BaseException as exc:  # noqa: BLE001 - sorted out below, then re-raised
            halted = _find(exc, Halted) or self.guards.trip
            if halted is not None:
                await self._finish_halted(halted)
                return
            error = _unwrap(exc)
            if isinstance(error, (KeyboardInterrupt, SystemExit, asyncio.CancelledError)):
                raise
            await self._retract("errored")
            await self.emit(ProcessingError(getattr(error, "struckdown_slot", None), error))
            error.__suppress_context__ = True  # hide the task-group wrapping, keep __cause__
            raise error
        result = Result(self.results, self.program.keys)
        await self.emit(ProcessingComplete(result, early_termination=False))

    def _segments_to_run(self) -> list[Segment]:
        if self.options.stop_at is None:
            return list(self.program.segments)
        last = self.program.segment_of(self.options.stop_at)
        skipped = [s for s in self.program.segments if s.index > last]
        for seg in skipped:
            self.guards.skip(self.guards_of(seg))
            for key in seg.keys:
                self.ready[key].set()
        return [s for s in self.program.segments if s.index <= last]

    def guards_of(self, segment: Segment) -> list[str]:
        return [n.key for n in walk(segment.nodes) if isinstance(n, Slot) and n.is_guard]

    async def _finish_halted(self, halted: Halted) -> None:
        await self._retract("halted")
        result = Result(self.results, self.program.keys, halted=halted)
        halted.results = result
        await self.emit(ProcessingComplete(result, early_termination=True))
        if self.options.on_halt != "return":
            raise halted

    async def _retract(self, reason: str) -> None:
        for slot in sorted(self.env.streaming_now):
            await self.emit(SlotRetracted(slot, reason))
        self.env.streaming_now.clear()

    # -- segments ------------------------------------------------------------
    async def _run_segment(self, segment: Segment) -> None:
        earlier = {k for s in self.program.segments[: segment.index] for k in s.keys}
        for key in sorted(segment.reads & earlier):
            await self.ready[key].wait()
        conversation = self._inherited(segment)
        try:
            await self._walk(segment.nodes, conversation, segment.index)
        except _StopRun:
            pass
        finally:
            self.guards.skip(self.guards_of(segment))
            for key in segment.keys:
                self.ready[key].set()
        await self.emit(CheckpointReached(segment.index, segment.name))

    def _inherited(self, segment: Segment) -> Conversation:
        """System/header text carried in from earlier segments (global scope only)."""
        conversation = Conversation()
        nodes: list[Node] = []
        for earlier in self.program.segments[: segment.index]:
            nodes += carried_instructions(earlier.nodes)
        self._apply_instructions(nodes, conversation)
        conversation.system = conversation.system.carried()
        conversation.header = conversation.header.carried()
        return conversation

    def _apply_instructions(self, nodes: Sequence[Node], conversation: Conversation) -> None:
        for node in nodes:
            if isinstance(node, Instructions) and node.scope == "global":
                self._instructions(node, conversation)
            elif isinstance(node, If):
                branch = self._branch(node)
                if branch is not None:
                    self._apply_instructions(branch, conversation)

    # -- walking the AST -----------------------------------------------------
    async def _walk(self, nodes: Sequence[Node], conversation: Conversation, segment: int) -> None:
        for node in nodes:
            if self.stopped:
                raise _StopRun
            if isinstance(node, Text):
                conversation.add_text(self._render(node.source))
            elif isinstance(node, Instructions):
                self._instructions(node, conversation)
            elif isinstance(node, Turn):
                conversation.add_turn(node.role, self._render_body(node.body))
            elif isinstance(node, If):
                branch = self._branch(node)
                if branch is not None:
                    await self._walk(branch, conversation, segment)
            elif isinstance(node, Action):
                await self._action(node, segment)
            elif isinstance(node, Slot) and node.is_guard:
                self._start_guard(node, conversation, segment)
            elif isinstance(node, Slot):
                await self._slot(node, conversation, segment)
            elif isinstance(node, Together):
                await self._together(node, conversation, segment)

    def _render(self, source: str) -> str:
        try:
            return render_text(source, self.variables, self.program.compiled)
        except Exception as exc:
            raise TemplateRuntimeError(f"rendering failed: {type(exc).__name__}: {exc}") from exc

    def _render_body(self, body: Sequence[Node]) -> str:
        return "".join(self._render(n.source) for n in body if isinstance(n, Text)).strip()

    def _instructions(self, node: Instructions, conversation: Conversation) -> None:
        layers: Layers = conversation.system if node.kind == "system" else conversation.header
        layers.apply(self._render_body(node.body), node.scope, node.mode)

    def _branch(self, node: If) -> tuple[Node, ...] | None:
        for branch in node.branches:
            if branch.condition is None:
                return branch.body
            try:
                taken = evaluate(branch.condition, self.variables)
            except Exception as exc:
                raise TemplateRuntimeError(
                    f"line {branch.pos.line}: condition {branch.condition!r} failed: {exc}"
                ) from exc
            if taken:
                return branch.body
        return None

    def _store(self, result: SlotResult) -> None:
        self.results[result.key] = result
        self.variables[result.key] = result.output
        event = self.ready.get(result.key)
        if event is not None:
            event.set()

    async def _slot(self, node: Slot, conversation: Conversation, segment: int) -> None:
        prompt = conversation.take_prompt()
        history, user_prompt = conversation.request(prompt)
        result = await self._fill(node, history, user_prompt, conversation.instructions(), segment)
        conversation.record(prompt, as_text(result.output))
        self._after(node.key)

    async def _fill(
        self,
        node: Slot,
        history: list[Any],
        prompt: str | None,
        instructions: str | None,
        segment: int,
        *,
        is_guard: bool = False,
    ) -> SlotResult:
        plan = self.program.plan(node)
        with _blame(node.key):
            return await self._fill_inner(node, plan, history, prompt, instructions, segment, is_guard)

    async def _fill_inner(
        self,
        node: Slot,
        plan: Any,
        history: list[Any],
        prompt: str | None,
        instructions: str | None,
        segment: int,
        is_guard: bool,
    ) -> SlotResult:
        resolved = resolve_plan(plan, self.variables)
        spec = output_for(plan, resolved)
        env = replace(
            self.env, join_guards=partial(self.guards.join, segment, node.key if is_guard else None)
        )
        result = await run_model_slot(
            env, plan, resolved, spec, history=history, prompt=prompt,
            instructions=instructions, is_guard=is_guard,
        )
        self.env.streaming_now.discard(node.key)
        self._store(result)
        await self.emit(SlotCompleted(node.key, result, result.elapsed_ms, result.cached))
        return result

    def _after(self, key: str) -> None:
        if self.options.stop_at == key:
            self.stopped = True
            raise _StopRun

    def _start_guard(self, node: Slot, conversation: Conversation, segment: int) -> None:
        prompt = conversation.take_prompt()
        history, user_prompt = conversation.request(prompt, with_history=False)
        when = bool(self.program.plan(node).control.get("when", True))
        self.guards.start(node.key, when)
        instructions = conversation.instructions()
        assert self._tg is not None
        self._tg.start_soon(self._guard_task, node, history, user_prompt, instructions, segment)

    async def _guard_task(
        self, node: Slot, history: list[Any], prompt: str | None, instructions: str | None, segment: int
    ) -> None:
        result = await self._fill(node, history, prompt, instructions, segment, is_guard=True)
        verdict = result.output if isinstance(result.output, dict) else {"triggered": False, "reason": ""}
        if self.guards.finish(node.key, verdict):
            raise self.guards.halted(self.guards.states[node.key])

    async def _action(self, node: Action, segment: int) -> None:
        spec = default_actions.get(node.name)
        if spec.side_effects:
            await self.guards.join(segment)
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for option in node.options:
            value = option.value
            if isinstance(value, JinjaValue):
                value = evaluate_option(value.expression, self.variables, f"@{node.name}")
            if option.key is None:
                args.append(value)
            else:
                kwargs[option.key] = value
        started = time.perf_counter()
        with _blame(node.key or f"@{node.name}"):
            try:
                value = await call_action(spec, args, kwargs, self.variables)
            except Exception as exc:
                raise TemplateRuntimeError(f"action @{node.name} failed: {type(exc).__name__}: {exc}") from exc
        if node.key is not None:
            result = SlotResult(node.key, f"@{node.name}", value, elapsed_ms=(time.perf_counter() - started) * 1000)
            self._store(result)
            await self.emit(SlotCompleted(node.key, result, result.elapsed_ms, False))
            self._after(node.key)

    async def _together(self, block: Together, conversation: Conversation, segment: int) -> None:
        """Members run at once, each seeing the text before the block plus its own question."""
        shared = conversation.take_prompt()
        members: list[tuple[Slot, str]] = []
        pending: list[str] = []
        for node in block.body:
            if isinstance(node, Text):
                pending.append(self._render(node.source))
            else:
                assert isinstance(node, Slot)
                members.append((node, "".join(pending).strip()))
                pending = []
        base_history, _ = conversation.request("")
        for node, question in members:
            if node.is_guard:
                prompt = "\n\n".join(p for p in (shared, question) if p)
                guard_conv = Conversation(system=conversation.system, header=conversation.header)
                guard_conv.add_text(prompt)
                self._start_guard(node, guard_conv, segment)
        answers: dict[str, SlotResult] = {}

        async def member(node: Slot, question: str) -> None:
            prompt = "\n\n".join(p for p in (shared, question) if p)
            history = list(base_history)
            answers[node.key] = await self._fill(node, history, prompt or None, conversation.instructions(), segment)

        async with anyio.create_task_group() as tg:
            for node, question in members:
                if not node.is_guard:
                    tg.start_soon(member, node, question)
        await self.guards.join(segment)
        if shared:
            conversation.history.append(_user(shared))
        for node, question in members:
            if node.key in answers:
                conversation.record(question, as_text(answers[node.key].output))
        for node, _ in members:
            if node.key in answers:
                self._after(node.key)


@contextmanager
def _blame(slot: str) -> Iterator[None]:
    """Tag an error with the slot it came from (for ProcessingError.slot)."""
    try:
        yield
    except Exception as exc:
        if getattr(exc, "struckdown_slot", None) is None:
            try:
                exc.struckdown_slot = slot  # type: ignore[attr-defined]
            except AttributeError:
                pass
        raise


def _user(text: str) -> Any:
    from .conversation import user_turn

    return user_turn(text)


def _find(exc: BaseException, kind: type[Halted]) -> Halted | None:
    if isinstance(exc, kind):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _find(inner, kind)
            if found is not None:
                return found
    return None


def _unwrap(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup):
        real = [e for e in exc.exceptions if not isinstance(e, asyncio.CancelledError)]
        exc = real[0] if real else exc.exceptions[0]
    return exc


class _FinalResult:
    """An event sink that keeps only the run's Result (for complete())."""

    result: Result | None = None

    def put_nowait(self, event: Any) -> None:
        if isinstance(event, ProcessingComplete):
            self.result = event.result


async def run_to_result(program: Program, context: Mapping[str, Any] | None, options: RunOptions) -> Result:
    """The same engine as `events()`, consumed in place: no queue, no extra task."""
    sink = _FinalResult()
    await Run(program, dict(context or {}), options, sink).main()  # type: ignore[arg-type]
    assert sink.result is not None
    return sink.result


async def events(program: Program, context: Mapping[str, Any] | None, options: RunOptions) -> AsyncGenerator[Any, None]:
    """The event stream of one run. Closing it cancels everything the run started."""
    queue: asyncio.Queue[Any] = asyncio.Queue()
    run = Run(program, dict(context or {}), options, queue)

    async def main() -> None:
        try:
            await run.main()
        finally:
            queue.put_nowait(_END)

    task = asyncio.create_task(main())
    try:
        while True:
            event = await queue.get()
            if event is _END:
                break
            yield event
        await task
    finally:
        if not task.done():
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass


def _cache(cache: Any) -> Any:
    """The run's response cache; the sqlite-backed module loads only when one is asked for."""
    if cache is None or cache is False:
        return None
    from ..cache import resolve_cache

    return resolve_cache(cache)

"""Agent-slot tools: readonly marking, the per-slot call wrapper and the budget.

The tools live in a cached agent; an agent-level capability wraps them, for each
slot run, in a `SlotToolset` holding that run's state (the `tools` of its `SlotRun`). It gives every call
`ToolStarted`/`ToolCompleted` events, runs identical calls once (single flight,
per slot), waits for pending guards before any tool that is not `@readonly`, and
turns a raising tool into pydantic-ai's `ToolFailed` carrying the string
`"<ExceptionClass>: <message>"` the model reads. pydantic-ai already validates arguments (an invented argument is sent
back as a retry before the call) and runs sync tools in a worker thread; with a
`tool_timeout`, in a thread of their own that the deadline leaves behind (`ThreadPerCall`).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import Executor, Future
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, ParamSpec, Protocol, TypeVar

import anyio
from pydantic_ai import Agent, ModelRetry, RunContext, Tool
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ApprovalRequired, ToolFailed, UnexpectedModelBehavior, UsageLimitExceeded
from pydantic_ai.messages import ModelResponse, ToolCallPart
from pydantic_ai.toolsets import WrapperToolset

from ..errors import OutcomeUnknown, StruckdownError, exception_text
from ..incremental import ToolCompleted, ToolStarted
from ..results import ToolCall
from ..tools import READONLY_ATTR, SEQUENTIAL_ATTR, is_readonly, tool_name
from .problems import validation_problem
from .slot_run import CURRENT

T = TypeVar("T")
P = ParamSpec("P")


class ToolLimitExceeded(UsageLimitExceeded, StruckdownError):
    """An agent slot hit its ceiling (requests, tool calls or tokens) without answering.

    Also a pydantic-ai `UsageLimitExceeded`, so either `except` catches it.
    """

    def __init__(self, slot: str, message: str) -> None:
        super().__init__(f"slot {slot!r}: {message}")  # pydantic-ai's `message`
        self.args = (slot, message)  # what pickling passes back to __init__
        self.slot = slot
        self.detail = message


class BadModelOutput(StruckdownError, UnexpectedModelBehavior):
    """The model kept answering in a form the slot cannot accept (invalid JSON, a value
    its type refuses, a malformed tool call) after pydantic-ai sent it back the
    validation error each time. Also a pydantic-ai `UnexpectedModelBehavior`."""

    def __init__(self, slot: str, model: str, error: UnexpectedModelBehavior | str, reason: str | None = None) -> None:
        detail = error if isinstance(error, str) else error.message
        if reason is None:
            reason = "" if isinstance(error, str) else validation_problem(error)
        super().__init__(
            f"slot {slot!r}: model {model} gave no usable answer{_in_words(detail)}"
            + (f" (last problem: {reason})" if reason else "")
            + ". Hint: make the question clearer about the form of the answer, try a stronger model, "
            "or loosen the slot's options"
        )
        self.args = (slot, model, detail, reason)  # what pickling passes back to __init__
        self.slot = slot
        self.model = model
        self.detail = detail
        self.reason = reason  # the last validation problem, in words ("" if unknown)

    def __reduce__(self) -> tuple[Any, ...]:  # pydantic-ai's base pickles (message, body): ours is `args`
        return (type(self), self.args)


def _in_words(detail: str) -> str:
    """pydantic-ai's "Exceeded maximum output retries (2)" as what happened: " in 3 tries";
    any other detail as ": <detail>"."""
    retries = _RETRIES.fullmatch(detail)
    if retries is None:
        return f": {detail}"
    return f" in {int(retries.group(1)) + 1} tries"


_RETRIES = re.compile(r"Exceeded maximum (?:output )?retries \((\d+)\)")


def _as_tool(tool: Any) -> Any:
    """A function marked `@sequential` as the `Tool(sequential=True)` pydantic-ai runs alone; one
    with an `effect_id` parameter as a tool that gets it (SPEC §25, run/durable/effects.py)."""
    if not isinstance(tool, Tool) and callable(tool):
        from .durable.effects import with_effect_id

        tool = with_effect_id(tool)
    if not isinstance(tool, Tool) and getattr(tool, SEQUENTIAL_ATTR, False):
        wrapped = Tool(tool, sequential=True)
        if is_readonly(tool):
            setattr(wrapped, READONLY_ATTR, True)
        return wrapped
    return tool


@dataclass(frozen=True)
class ToolBox:
    """The caller's tools and which of them are readonly."""

    tools: tuple[Any, ...]
    readonly_names: frozenset[str]
    names: tuple[str, ...]

    @classmethod
    def build(cls, tools: tuple[Any, ...]) -> ToolBox:
        tools = tuple(_as_tool(t) for t in tools)
        names = tuple(tool_name(t) for t in tools)
        return cls(tools, frozenset(tool_name(t) for t in tools if is_readonly(t)), names)

    @property
    def all_readonly(self) -> bool:
        return set(self.names) <= self.readonly_names


Emit = Callable[[Any], Awaitable[None]]


@dataclass
class Flight:
    """One tool call that identical calls of the same slot share (single flight):
    `done` is set when it has an outcome, or when the task running it was cancelled."""

    done: anyio.Event = field(default_factory=anyio.Event)
    outcome: tuple[Any, bool, str | None] | None = None  # (output, ok, error)
    retry: ModelRetry | ApprovalRequired | OutcomeUnknown | None = None  # re-raised to every waiter, never cached
    source: str | None = None  # SPEC §29: "replayed from the journal", "reconciled: happened", …: it did not run


def _canonical(arguments: Any) -> str:
    return json.dumps(arguments, sort_keys=True, default=str, separators=(",", ":"))


@dataclass
class ToolWrap:
    """One slot run's tool state: what `SlotToolset` needs, and the calls it made."""

    slot: str
    emit: Emit
    join_guards: Callable[[], Awaitable[None]]
    readonly_names: frozenset[str] = frozenset()
    last_request: int | None = None  # with max_iter: this request offers no tools
    timeout: float | None = None  # seconds one call may take
    max_result: int | None = None  # characters of one result the model reads (the host's max_tool_result)
    approval: frozenset[str] = frozenset()  # tools whose calls wait for a decision (SPEC §12, run/approval/calls.py)
    defer: Callable[[Any, Any], Awaitable[Any]] | None = None  # decides calls pydantic-ai deferred (its handler)
    budget: Any = None  # per-tool budgets and the run's tool-call limit (run/budgets.py ToolBudget)
    tracing: Any = None  # struckdown spans (observe.py), or None
    effects: Any = None  # SPEC §25: the run's journal scope (run/durable/effects.EffectScope), or None
    calls: list[ToolCall] = field(default_factory=list)
    failed: int = 0  # calls that ran and failed (pydantic-ai counts only the ones that succeeded)
    inflight: dict[tuple[str, str], Flight] = field(default_factory=dict)
    happened: dict[tuple[str, str], Any] = field(default_factory=dict)  # SPEC §29: "it happened" decisions


def _abandonable(timeout: float | None) -> Any:
    """With a deadline, sync tools run where the deadline can leave them (`ThreadPerCall`)."""
    return nullcontext() if timeout is None else Agent.using_thread_executor(_THREAD_PER_CALL)


def _unsendable(name: str, output: Any) -> str | None:
    """The error string for a tool result that cannot travel to the model as JSON
    (issue 24 item 12: it used to fail the whole slot without naming the tool)."""
    if output is None or isinstance(output, (str, int, float, bool)):
        return None
    from pydantic_core import to_jsonable_python

    try:
        to_jsonable_python(output)
    except Exception:  # noqa: BLE001 - pydantic raises several serialisation errors
        return (
            f"TypeError: tool {name!r} returned a {type(output).__name__}, which cannot be sent to the model "
            "as JSON; return text, numbers, lists, dicts, dataclasses or pydantic models"
        )
    return None


def capped_result(name: str, output: Any, limit: int) -> Any:
    """A result longer than `limit` characters (as text, or as JSON for anything else)
    cut to its first `limit`, with a note the model reads; a shorter one as it is.
    Multimodal parts (an MCP tool's image) are left to `max_images`."""
    if isinstance(output, str):
        text = output
    elif output is None or isinstance(output, (int, float, bool)) or _is_binary(output):
        return output
    else:
        from pydantic_core import to_json

        text = to_json(output).decode("utf-8", "replace")  # `_unsendable` has checked it serialises
    if len(text) <= limit:
        return output
    return (
        f"{text[:limit]}\n[truncated by struckdown: the result of tool {name!r} had {len(text):,} characters; "
        f"only the first {limit:,} are shown (max_tool_result)]"
    )


def _is_binary(output: Any) -> bool:
    from pydantic_ai.messages import BinaryContent

    items = output if isinstance(output, (list, tuple)) else [output]
    return any(isinstance(item, BinaryContent) for item in items)


def _unapproved(tools: dict[str, Any], names: frozenset[str]) -> dict[str, Any]:
    """Those tools declared 'unapproved', as `Tool(requires_approval=True)` is: pydantic-ai
    defers their calls to the slot's approval gate (run/approval/calls.py)."""
    return {
        name: replace(tool, tool_def=replace(tool.tool_def, kind="unapproved"))
        if name in names and tool.tool_def.kind == "function"
        else tool
        for name, tool in tools.items()
    }


@dataclass
class SlotToolset(WrapperToolset[Any]):
    """Per-slot tool interception: each call's events around `TOOL_CHAIN`, the tool stack.

    A wrapper toolset rather than a capability: it is consulted only when a tool
    is called, not on every hook of every step. pydantic-ai has already validated
    the arguments when `call_tool` runs.
    """

    state: ToolWrap | None = None

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, Any]:
        """On the last permitted request (max_iter), offer no gathering tools, so the
        model must answer; output tools are not ours and stay."""
        assert self.state is not None
        if self.state.last_request is not None and ctx.run_step >= self.state.last_request:
            return {}
        tools = await super().get_tools(ctx)
        return _unapproved(tools, self.state.approval) if self.state.approval else tools

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: Any) -> Any:
        assert self.state is not None
        cut_short(ctx)
        if self.state.tracing is not None:
            return await self.state.tracing.tool(name, lambda: self._call_tool(name, tool_args, ctx, tool))
        return await self._call_tool(name, tool_args, ctx, tool)

    async def _call_tool(self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: Any) -> Any:
        """`ToolStarted`, the call down the tool stack, `ToolCompleted`; a failed call raises
        pydantic-ai's `ToolFailed`, whose message the model reads."""
        state = self.state
        assert state is not None
        arguments = dict(tool_args)
        await state.emit(ToolStarted(state.slot, name, arguments))
        started = time.perf_counter()
        key = (name, _canonical(arguments))
        call = ToolCallRun(state, name, tool_args, ctx, tool, self.wrapped.call_tool, key, shared=key in state.inflight)
        output, ok, error = await TOOL_CHAIN(call)
        state.failed += call.ran and not ok
        elapsed = (time.perf_counter() - started) * 1000
        state.calls.append(ToolCall(name, arguments, output, ok, error, elapsed, call.shared))
        await state.emit(ToolCompleted(state.slot, name, arguments, output, ok, error, elapsed, call.shared, call.source))
        if state.tracing is not None:
            state.tracing.tool_outcome(call.shared, ok)
        if not ok:
            # pydantic-ai's terminal tool failure: the model reads the SPEC §3 string as a
            # failed tool result (outcome="failed"), and the run goes on
            raise ToolFailed(str(error))
        return output


#: A tool call's outcome: (what the model reads, ok, the error text or None).
Outcome = tuple[Any, bool, str | None]


@dataclass(slots=True)
class ToolCallRun:
    """One tool call on its way down the tool stack."""

    state: ToolWrap  # the slot run's tool state
    name: str
    tool_args: dict[str, Any]  # the arguments as pydantic-ai validated them
    ctx: RunContext[Any]
    tool: Any
    call: Callable[[str, dict[str, Any], RunContext[Any], Any], Awaitable[Any]]  # the wrapped toolset's call_tool
    key: tuple[str, str]  # (name, canonical arguments): identical calls share a flight
    shared: bool = False  # an identical call of the slot ran, or runs: this one shares its outcome
    ran: bool = True  # False: refused before it ran (its budget)
    start: Callable[[], None] | None = None  # the journal's "started", written as the tool begins
    unknown: bool = False  # cut at its deadline: it may still take effect
    source: str | None = None  # SPEC §29: "replayed from the journal", "reconciled: happened", …: it did not run


ToolHandler = Callable[[ToolCallRun], Awaitable[Outcome]]


class ToolLayer(Protocol):
    def __call__(self, call: ToolCallRun, inner: ToolHandler) -> Awaitable[Outcome]: ...


async def approval(call: ToolCallRun, inner: ToolHandler) -> Outcome:
    """SPEC §12: a call of a tool that needs a person's yes runs only once approved.
    pydantic-ai defers those calls before they reach the toolset (`get_tools` declares such
    tools 'unapproved'); one that reaches it undecided is deferred here, as pydantic-ai's
    `ApprovalRequiredToolset` does."""
    if call.name in call.state.approval and not call.ctx.tool_call_approved:
        raise ApprovalRequired()
    return await inner(call)


async def budget(call: ToolCallRun, inner: ToolHandler) -> Outcome:
    """SPEC §13: a call past its tool's budget does not run, the model reads why (a call
    that shares an identical call's outcome costs nothing)."""
    spending = call.state.budget
    if spending is None:
        return await inner(call)
    refused = spending.spend(call.name) if not call.shared else None
    if refused is not None:
        call.ran = False
        return refused, False, refused
    outcome = await inner(call)
    if outcome[1]:
        spending.returned()
    return outcome


async def single_flight(call: ToolCallRun, inner: ToolHandler) -> Outcome:
    """Identical calls of one slot run once and share the outcome; a retry or a deferral is
    re-raised to every caller, never shared afterwards."""
    inflight = call.state.inflight
    while True:
        flight = inflight.get(call.key)
        if flight is None:
            flight = inflight[call.key] = Flight()
            await _fly(flight, call, inner)
        # waiting is not sharing: a cancelled waiter leaves the call the others wait for alone
        await flight.done.wait()
        if flight.retry is not None:
            raise flight.retry
        if flight.outcome is not None:
            call.source = flight.source
            return flight.outcome
        # the task running the shared call was cancelled (not this one): run it here


async def _fly(flight: Flight, call: ToolCallRun, inner: ToolHandler) -> None:
    inflight = call.state.inflight
    try:
        flight.outcome = await inner(call)
        flight.source = call.source
    except (ModelRetry, ApprovalRequired, OutcomeUnknown) as exc:
        # a retry is not an answer to cache; nor is a call that asks for approval from
        # inside (pydantic-ai's ApprovalRequiredToolset): it is deferred, then called again
        del inflight[call.key]
        flight.retry = exc
    except Exception as exc:  # a failing tool is information for the model
        error = exception_text(exc)
        flight.outcome = (error, False, error)
    except BaseException:
        del inflight[call.key]  # cancelled: a waiter runs the call itself
        raise
    finally:
        flight.done.set()


async def effect_journal(call: ToolCallRun, inner: ToolHandler) -> Outcome:
    """SPEC §25: with `journal=`, a call of a write tool is answered from the journal when it
    finished before, reconciled or held for approval when it was cut off, and else journaled
    as started (when the tool begins) and done."""
    state = call.state
    effects: Any = state.effects if call.name not in state.readonly_names else None
    if effects is None:
        return await inner(call)
    arguments = key_arguments(call.key)
    settled = await _settled(effects, state.slot, call.name, arguments, call.ctx, state.happened, call.key)
    if isinstance(settled, tuple):  # done before (or reconciled, or decided): answered from the journal
        outcome, call.source = settled
        return outcome
    effect = settled
    call.ctx = replace(call.ctx)
    setattr(call.ctx, "effect_id", effect)  # the tool's idempotency key: ctx.effect_id
    call.start = lambda: effects.journal.started(effect, call.name, arguments, state.slot, effects.row)
    try:
        outcome = await inner(call)
    except (ModelRetry, ApprovalRequired, OutcomeUnknown):
        effects.journal.cleared(effect)  # the tool said no by raising: no effect
        raise
    except Exception as exc:
        error = exception_text(exc)
        effects.journal.done(effect, error, False, error)
        raise
    if not call.unknown:  # cut at its deadline, it stays started (outcome unknown)
        effects.journal.done(effect, *outcome)
    return outcome


async def guard_join(call: ToolCallRun, inner: ToolHandler) -> Outcome:
    """A tool that is not `@readonly` waits for the pending guards' verdicts."""
    if call.name not in call.state.readonly_names:
        await call.state.join_guards()
    return await inner(call)


async def timeout(call: ToolCallRun, inner: ToolHandler) -> Outcome:
    """SPEC §14: `tool_timeout` ends the wait (a sync tool is left running in its thread),
    the model reads why."""
    seconds = call.state.timeout
    with anyio.move_on_after(seconds) as deadline, _abandonable(seconds):
        outcome = await inner(call)
    if deadline.cancelled_caught:
        assert seconds is not None
        call.unknown = True  # the call may still take effect
        problem = f"TimeoutError: tool {call.name!r} took longer than {seconds:g} s"
        return problem, False, problem
    return outcome


async def run_tool(call: ToolCallRun) -> Outcome:
    """The bottom of the stack: the tool itself; a result that cannot travel as JSON is an
    error the model reads, one longer than `max_tool_result` is cut."""
    if call.start is not None:
        call.start()
    output = await call.call(call.name, call.tool_args, call.ctx, call.tool)
    problem = _unsendable(call.name, output)
    if problem is None and call.state.max_result is not None:
        output = capped_result(call.name, output, call.state.max_result)
    return (output, True, None) if problem is None else (problem, False, problem)


#: The tool stack, outermost first: the list `fold_tools` folds into `TOOL_CHAIN`.
TOOL_STACK: list[ToolLayer] = [approval, budget, single_flight, effect_journal, guard_join, timeout]


def fold_tools(layers: Sequence[ToolLayer], tool: ToolHandler) -> ToolHandler:
    """`tool` inside `layers` (the first outermost), each layer around the ones after it."""
    handler = tool
    for layer in reversed(layers):
        handler = partial(layer, inner=handler)
    return handler


#: Every tool call of an agent slot goes down this chain (built once).
TOOL_CHAIN = fold_tools(TOOL_STACK, run_tool)


def cut_short(ctx: RunContext[Any]) -> None:
    """SPEC §14: a response cut at its output token limit cannot be used, so a tool call it
    holds does not run (nor wait for approval): the slot fails with a TruncatedError, as a
    cut typed answer does."""
    for message in reversed(ctx.messages):
        if isinstance(message, ModelResponse):
            if message.finish_reason == "length":  # slot_error makes it struckdown's TruncatedError
                from pydantic_ai.exceptions import IncompleteToolCall

                calls = [p.tool_name for p in message.parts if isinstance(p, ToolCallPart)]
                raise IncompleteToolCall(
                    f"{'(), '.join(calls)}() did not run: a tool call cut short cannot be used"
                )
            return


def key_arguments(key: tuple[str, str]) -> dict[str, Any]:
    value = json.loads(key[1])
    return value if isinstance(value, dict) else {}


REPLAYED = "replayed from the journal"


async def _settled(
    effects: Any, slot: str, name: str, arguments: dict[str, Any], ctx: RunContext[Any],
    happened: Mapping[tuple[str, str], Any], key: tuple[str, str],
) -> tuple[tuple[Any, bool, str | None], str] | str:
    """SPEC §25: a call's outcome from the journal (and how it was settled, SPEC §29), or its effect id when it is to run.
    A call started but never finished goes to the tool's reconcile hook, else waits for a
    person's decision marked "outcome unknown" (run/approval/calls.py): "it happened" answers
    with the result they gave, "did not happen" (an approval) runs it. A batch row cannot
    wait: it ends as `OutcomeUnknown` (SPEC §29), for `sd batch --resume --decide`."""
    effect: str = effects.id_of(slot, name, arguments)
    record = effects.journal.state(effect)
    if record is None or record.get("state") == "cleared":
        return effect
    if record.get("state") == "done":
        ok = bool(record.get("ok"))
        outcome = (record.get("output"), True, None) if ok else (record.get("error"), False, record.get("error"))
        return outcome, REPLAYED
    if ctx.tool_call_approved:  # a person decided
        if key in happened:  # it happened: answered with the result they gave, never run again
            effects.journal.done(effect, happened[key], True, None, decided="happened")
            return (happened[key], True, None), "decided: happened"
        effects.journal.decided(effect, "not-happened")
        return effect  # it did not happen: run it now
    try:
        known, output = await effects.reconcile(name, effect, arguments)
    except LookupError:
        if effects.row is not None:
            raise OutcomeUnknown(effect, name, arguments, effects.row) from None
        raise ApprovalRequired(metadata={"outcome": "unknown", "effect_id": effect}) from None
    if not known:
        effects.journal.decided(effect, "not-happened", by="reconcile")
        return effect
    effects.journal.done(effect, output, True, None, decided="happened", by="reconcile")
    return (output, True, None), "reconciled: happened"


class ThreadPerCall(Executor):
    """Runs each sync tool call in a daemon thread of its own (SPEC §14 timeouts).

    pydantic-ai's default thread runner waits for a worker thread even when the waiting task
    is cancelled, so a sync tool past its deadline used to hold the slot until it returned.
    Through an executor, the slot's deadline cancels only the wait: the slot goes on at once,
    the thread runs to its end unobserved and its late result or error is dropped (a cancelled
    asyncio future ignores it). Daemon, so a tool that never returns does not keep the
    process alive at exit.
    """

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        future: Future[T] = Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # noqa: BLE001 - handed to the waiter, who re-raises it
                future.set_exception(exc)

        threading.Thread(target=run, name="struckdown-tool", daemon=True).start()
        return future


_THREAD_PER_CALL = ThreadPerCall()


@dataclass
class WrapSlotTools(AbstractCapability[Any]):
    """Built into every tool agent: wraps its tools in a `SlotToolset` for each run,
    from the state of the slot run that is in progress (its `SlotRun`). An
    agent-level capability, so the per-run capability set stays empty."""

    def get_wrapper_toolset(self, toolset: Any) -> Any:
        state: ToolWrap | None = CURRENT.get().tools
        assert state is not None, "a tool agent runs only inside a slot run"
        return SlotToolset(toolset, state=state)

    async def handle_deferred_tool_calls(self, ctx: RunContext[Any], *, requests: Any) -> Any:
        """Calls that need approval (SPEC §12) go to the slot's gate (run/approval/calls.py); no
        gate: they stay open, and the agent run ends with them."""
        state: ToolWrap | None = CURRENT.get().tools
        if state is None or state.defer is None:
            return None
        cut_short(ctx)
        return await state.defer(ctx, requests)


@dataclass
class ModelCallHook(AbstractCapability[Any]):
    """Runs before each model request of a slot: the guard join point "second call
    after the guard started"."""

    before_call: Callable[[], Awaitable[None]]

    async def before_model_request(self, ctx: RunContext[Any], request_context: Any) -> Any:
        await self.before_call()
        return request_context

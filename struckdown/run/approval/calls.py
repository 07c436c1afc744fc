"""Human approval of tool calls (SPEC §12), on pydantic-ai's deferred tools.

A call needs approval when its tool is `Tool(requires_approval=True)` (pydantic-ai's
`ToolDefinition.kind == 'unapproved'`), is marked `@needs_approval`, or the slot's
`approve=` names it; the slot's `SlotToolset` marks the last two 'unapproved' too, so
pydantic-ai defers every such call alike: the other calls of the response run, the
deferred ones reach the `handle_deferred_tool_calls` hook of the tool agents' capability
(`WrapSlotTools`), which hands them to the slot run's `SlotGate` here. It joins
the pending guards, then asks the run's `approve=` (one request at a time, one decision
per identical call within the slot), or, with nothing to ask, leaves the calls open: the
agent run ends with `DeferredToolRequests` and the slot pauses (`SlotPaused`). The engine
lets the rest of the run go as far as it can, then ends it paused (`ApprovalRun.pause`);
`resume` replays that state: finished slots come back without a model call and the
paused slot's agent run continues from its messages with `DeferredToolResults`, so the
response that asked is not sent again and its calls that ran are not run again.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied

from ...approval.state import (
    ANSWER_TOOL,
    ApprovalRequest,
    Decision,
    Happened,
    PausedSlot,
    ResumePoint,
    answer_decided,
    build_state,
    check_decision,
    denial_message,
)
from ...errors import Paused, TemplateRuntimeError
from ...incremental import ApprovalDecided, ApprovalRequested
from ...results import SlotResult, ToolCall, Usage
from ...slot_options import server_names, tool_names
from ...syntax.nodes import Action, JinjaValue
from ...tools import host_needs_approval
from ..tools import Flight, ToolBox, ToolWrap, _canonical

if TYPE_CHECKING:
    from ...plan import Program
    from ...tools.mcp import SlotTools
    from ...types import OutputSpec
    from ..guards import GuardBoard


T = TypeVar("T")

#: What `approve=` takes: a callback `(ApprovalRequest) -> bool | str` (sync or async),
#: True / False (approve / deny every call), or None (pause the run).
Approver = Callable[[ApprovalRequest], Any] | bool | None


class SlotPaused(Exception):
    """A slot's agent run ended with calls waiting for decisions (engine-internal)."""

    def __init__(self, record: PausedSlot) -> None:
        super().__init__(record.slot)
        self.record = record


class SegmentPaused(Exception):
    """Stops the walk of a segment whose slot paused, or that waits for one (engine-internal)."""


def _decision_result(decision: Decision) -> ToolApproved | ToolDenied:
    message = denial_message(decision)
    return ToolApproved() if message is None else ToolDenied(message)


def _spent(usage: Any) -> Usage:
    return Usage(
        usage.requests, usage.tool_calls, usage.input_tokens or 0, usage.output_tokens or 0,
        cache_read_tokens=usage.cache_read_tokens or 0, cache_write_tokens=usage.cache_write_tokens or 0,
    )


class ApprovalRun:
    """One run's approval state: who decides, what paused, what a resume brings back."""

    def __init__(
        self,
        *,
        decide: Approver,
        emit: Callable[[Any], Awaitable[None]],
        guards: GuardBoard,
        toolbox: ToolBox,
        resume: ResumePoint | None = None,
    ) -> None:
        if not (decide is None or isinstance(decide, bool) or callable(decide)):
            raise TypeError(
                f"approve= takes a function (request) -> True | False | 'reason', True or False, not {decide!r}"
            )
        self.decide = decide
        self.emit = emit
        self.guards = guards
        self.toolbox = toolbox
        self.resume = resume
        self.host_names = frozenset(
            name for name, tool in zip(toolbox.names, toolbox.tools) if host_needs_approval(tool)
        )
        self.paused: list[PausedSlot] = []
        self.held: set[str] = set()  # answers a paused segment did not produce
        self.actions: dict[str, list[Any]] = {}  # keyless actions that ran, for the state
        self._replayed: dict[str, int] = {}  # how many of a position's stored actions were replayed
        self._lock: Any = None  # an anyio.Lock: one request shown at a time
        self._mcp_named: list[tuple[Any, str, str]] = []  # (slot plan, `approve=` name of an MCP tool, its server)

    # -- before the run ------------------------------------------------------------
    def check_names(self, program: Program, servers: Sequence[str] = ()) -> None:
        """`approve=` names that are not tools of this run: a positioned error before any
        model call (`{{ }}` values are checked when their slot runs). A name of the form
        `<server>_<tool>` for an MCP server of the run waits for `check_mcp_names`, which
        lists that server's tools."""
        known = list(self.toolbox.names)
        self._mcp_named = []
        for plan in program.plans.values():
            raw = plan.control.get("approve")
            if raw is None or isinstance(raw, JinjaValue):
                continue
            for name in tool_names(raw):
                if name == "*" or name in known:
                    continue
                server = _server_of(name, servers)
                if server is None:
                    raise _unknown_name(program, plan, name, known, servers)
                used = plan.control.get("mcp")  # the slot's servers, when it names them
                if used is not None and not isinstance(used, JinjaValue) and server not in server_names(used):
                    raise _unknown_name(program, plan, name, known, servers, used)
                self._mcp_named.append((plan, name, server))

    async def check_mcp_names(self, program: Program, sessions: Any) -> None:
        """The `approve=` names of MCP tools (`check_names` set them aside): the sessions of
        their servers open now, before any model call, and list their tools."""
        if not self._mcp_named or sessions is None:
            return
        for plan, name, server in self._mcp_named:
            listed = await sessions.slot_tools(plan.key, [server])
            if name not in listed.names and listed.listed:
                known = sorted(set(self.toolbox.names) | listed.names)
                raise _unknown_name(program, plan, name, known, sessions.names)

    async def announce(self) -> None:
        """A resumed run: the decisions it brings, as `ApprovalDecided` events."""
        if self.resume is None:
            return
        for slot in self.resume.paused.values():
            for request, _ in slot.requests:
                decision = self.resume.decisions[request.id]
                if request.tool_name == ANSWER_TOOL:  # escalate=approve (SPEC §27): the person's answer
                    await self.emit(ApprovalDecided(slot.slot, request.id, *answer_decided(decision)))
                    continue
                await self.emit(ApprovalDecided(slot.slot, request.id, decision is True, denial_message(decision)))

    # -- per slot ------------------------------------------------------------------
    def names_for(self, option: Any, slot: str, mcp: SlotTools | None = None) -> frozenset[str]:
        """The tools whose calls in this slot need approval: the host's, the slot's MCP
        tools marked `destructiveHint`, plus what the slot's `approve=` adds (it can add,
        never remove; `*` is every tool of the slot, MCP ones included, that is not read-only)."""
        names = set(self.host_names) | (mcp.destructive if mcp is not None else frozenset())
        if option is None:
            return frozenset(names)
        box = self.toolbox
        mcp_names = mcp.names if mcp is not None else frozenset()
        for name in tool_names(option):
            if name == "*":
                names |= set(box.names) - box.readonly_names
                if mcp is not None:
                    names |= mcp.names - mcp.readonly
            elif name in box.names or name in mcp_names:
                names.add(name)
            else:  # a `{{ }}` value (the run-start check could not see it), or a server's other slot
                raise TemplateRuntimeError(f"slot {slot!r}: approve= names {name!r}, which is not a tool of this slot")
        return frozenset(names)

    def gate(
        self, slot: str, option: Any, join: Callable[[], Awaitable[None]], is_guard: bool, mcp: SlotTools | None = None
    ) -> SlotGate:
        """The approvals of one tool slot run (a tool may also ask from inside, by raising
        pydantic-ai's `ApprovalRequired`, so every tool slot has one)."""
        names = self.names_for(option, slot, mcp)
        resumed = self.resume.paused.get(slot) if self.resume is not None else None
        if resumed is not None:
            _check_resumed_tools(resumed, set(self.toolbox.names) | (mcp.names if mcp is not None else set()))
        return SlotGate(self, slot, names, join, is_guard, resumed)

    async def ask(self, request: ApprovalRequest) -> Decision:
        decide = self.decide
        if isinstance(decide, bool):
            return decide
        assert decide is not None
        if inspect.iscoroutinefunction(decide):
            answer = await decide(request)
        else:
            import anyio

            answer = await anyio.to_thread.run_sync(decide, request)  # a person at a prompt: not on the loop
            if inspect.isawaitable(answer):
                answer = await answer
        return check_decision(answer, request.id, request.outcome)

    def lock(self) -> Any:
        if self._lock is None:
            import anyio

            self._lock = anyio.Lock()
        return self._lock

    async def join_pending(self, join: Callable[[], Awaitable[None]], exclude: str | None) -> None:
        """Before a request is shown: the guards preceding the slot, and every guard that
        is running anywhere in the run (a trip raises `Halted`: nobody is asked)."""
        await join()
        for state in list(self.guards.states.values()):
            if state.key != exclude and state.started:
                await state.done.wait()
                if state.tripped:
                    raise self.guards.halted(state)

    # -- resuming --------------------------------------------------------------------
    def restored(self, key: str, spec: OutputSpec | None) -> SlotResult | None:
        """A slot (or keyed action) that finished before the pause, as it was."""
        if self.resume is None or key not in self.resume.finished:
            return None
        from ...approval.state import restore_slot

        return restore_slot(self.resume.finished[key], spec)

    def replayed_action(self, node: Action) -> tuple[bool, Any]:
        """(True, value) for a keyless action that ran before the pause (not run again)."""
        where = _position(node)
        stored = self.resume.actions.get(where, []) if self.resume is not None else []
        done = self._replayed.get(where, 0)
        if done < len(stored):
            self._replayed[where] = done + 1
            return True, stored[done]
        return False, None

    def ran_action(self, node: Action, value: Any) -> None:
        self.actions.setdefault(_position(node), []).append(value)

    # -- pausing ---------------------------------------------------------------------
    def hold(self, record: PausedSlot) -> None:
        self.paused.append(record)

    def block(self, keys: Sequence[str], produced: Mapping[str, Any]) -> None:
        """A paused segment: its answers that do not exist hold back what waits for them."""
        self.held.update(k for k in keys if k not in produced)

    def blocks(self, waits_for: Sequence[str]) -> bool:
        return any(key in self.held for key in waits_for)

    def pause(
        self, program: Program, context: Mapping[str, Any], results: Mapping[str, SlotResult],
        options: Mapping[str, Any] | None = None,
    ) -> Paused:
        """The run ends paused: the requests, the finished slots and a JSON state."""
        template = program.template
        state = build_state(
            template=template.source,
            template_path=template.filename,
            included_files=template.included_files,
            context=context,
            finished=results,
            actions=self.actions,
            paused=self.paused,
            tools=self.toolbox.names,
            options=options,
        )
        requests = [request for slot in self.paused for request, _ in slot.requests]
        paused = Paused(requests, state)
        spent = Usage()
        for slot in self.paused:
            spent = spent + _spent(slot.usage)
        paused.keep(results, program.keys, spent)
        return paused


def _server_of(name: str, servers: Sequence[str]) -> str | None:
    """The MCP server whose tool `name` would be (`<server>_<tool>`; the longest such server)."""
    matching = [server for server in servers if name.startswith(f"{server}_")]
    return max(matching, key=len) if matching else None


def _unknown_name(
    program: Program, plan: Any, name: str, known: Sequence[str], servers: Sequence[str], used: Any = None
) -> Exception:
    """The positioned error for an `approve=` name that is no tool of the run (or, `used`
    given, a tool of a server the slot's `mcp=` leaves out)."""
    from ...errors import close_match
    from ...syntax.source import SourceMap

    option = next(o for o in plan.slot.options if o.key == "approve")
    pos = option.value_pos or option.pos
    source = SourceMap(program.template.source, program.template.filename).for_file(pos.filename)
    if used is not None:
        message = f"approve= names {name!r}, a tool of an MCP server this slot does not use (mcp={used})"
        return source.error(message, pos.line, pos.column, "add its server to the slot's mcp=, or drop the name")
    if known:
        hint = close_match(name, list(known), "the run's tools")
    elif servers:
        hint = f"MCP tools are named <server>_<tool>; this run's servers: {', '.join(servers)}"
    else:
        hint = "the run has no tools; pass tools=[…]"
    return source.error(f"approve= names {name!r}, which is not a tool of this run", pos.line, pos.column, hint)


def _check_resumed_tools(paused: PausedSlot, known: set[str]) -> None:
    """A resumed slot's paused calls need their tools (an MCP server's too) in this run."""
    for request, _ in paused.requests:
        if request.tool_name not in known:
            raise TemplateRuntimeError(
                f"slot {paused.slot!r}: the paused call {request.id} uses tool {request.tool_name!r}, which this run "
                "does not have; resume with the tools and MCP servers (tools=…, mcp=…) the paused run had"
            )


def _position(node: Action) -> str:
    return f"@{node.name}:{node.pos.line}:{node.pos.column}:{node.pos.filename or ''}"


@dataclass
class SlotGate:
    """One slot run's approvals: the handler of the calls pydantic-ai deferred, the
    decisions it holds for identical calls, and (resumed) the paused run it continues."""

    run: ApprovalRun
    slot: str
    names: frozenset[str]
    join: Callable[[], Awaitable[None]]
    is_guard: bool
    resumed: PausedSlot | None = None
    decided: dict[tuple[str, str], Decision] = field(default_factory=dict)
    pending: list[tuple[ApprovalRequest, list[str]]] = field(default_factory=list)
    asked: int = 0
    unsettled: bool = False  # SPEC §25: the run's journal holds calls that started and never finished
    unknown_calls: set[str] = field(default_factory=set)  # tool call ids deferred as "outcome unknown"
    wrap: ToolWrap | None = None  # the slot run's tool state: where "it happened" decisions go (SPEC §29)

    def __post_init__(self) -> None:
        paused = self.resumed
        if paused is None:
            return
        self.asked = paused.asked
        for tool, arguments, decision in paused.decided:
            self.decided[(tool, _canonical(arguments))] = decision
        assert self.run.resume is not None
        for request, _ in paused.requests:
            self.decided[(request.tool_name, _canonical(request.arguments))] = self.run.resume.decisions[request.id]

    @property
    def may_pause(self) -> bool:
        """Whether the agent run may end on open requests: nobody to ask, and tools that
        need approval (the output type then admits `DeferredToolRequests`, which costs
        pydantic-ai some work at every step, so other slots do without)."""
        return self.run.decide is None and (bool(self.names) or self.unsettled)

    @property
    def steps(self) -> int:
        """Model requests the slot made before it paused (its resumed run counts from 0)."""
        return int(self.resumed.usage.requests) if self.resumed is not None else 0

    def resume_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """`agent.run` keywords of a resumed slot: the paused run's messages and usage, and
        the decisions as `DeferredToolResults`, instead of the prompt and the history."""
        paused = self.resumed
        assert paused is not None and self.run.resume is not None
        approvals: dict[str, Any] = {}
        for request, ids in paused.requests:
            for tool_call_id in ids:
                approvals[tool_call_id] = _decision_result(self.run.resume.decisions[request.id])
        return {
            **arguments,
            "user_prompt": None,
            "message_history": list(paused.messages),
            "deferred_tool_results": DeferredToolResults(approvals=approvals),
            "usage": paused.usage,
        }

    def restore_calls(self, wrap: ToolWrap) -> None:
        """Resumed: the calls made before the pause stay the slot's, and identical calls
        after it get their results (the per-slot cache)."""
        self.wrap = wrap
        self._happened(self.decided.items())
        if self.resumed is None:
            return
        for call in self.resumed.tool_calls:
            wrap.calls.append(call)
            key = (call.tool_name, _canonical(call.arguments))
            if key not in wrap.inflight:
                flight = Flight(outcome=(call.output, call.ok, call.error))
                flight.done.set()
                wrap.inflight[key] = flight

    async def handle(self, ctx: Any, requests: DeferredToolRequests) -> DeferredToolResults | None:
        """pydantic-ai hands over the calls of one response that need approval."""
        results: dict[str, Any] = {}
        fresh: dict[tuple[str, str], list[Any]] = {}
        self.unknown_calls = {
            call.tool_call_id for call in requests.approvals
            if (requests.metadata.get(call.tool_call_id) or {}).get("outcome") == "unknown"
        }
        for call in requests.approvals:
            key = (call.tool_name, _canonical(call.args_as_dict()))
            if key in self.decided:  # nobody is asked twice in a slot
                results[call.tool_call_id] = _decision_result(self.decided[key])
            else:
                fresh.setdefault(key, []).append(call)
        if fresh:
            await self.run.join_pending(self.join, self.slot if self.is_guard else None)
            if self.run.decide is None:
                await self._leave_open(fresh)
            else:
                async with self.run.lock():
                    for key, calls in fresh.items():
                        decision = await self._decide(key, calls)
                        for call in calls:
                            results[call.tool_call_id] = _decision_result(decision)
        self._happened((key, self.decided[key]) for key in fresh if key in self.decided)
        return DeferredToolResults(approvals=results) if results else None

    def _happened(self, decided: Any) -> None:
        """SPEC §29: a call decided as "it happened" does not run: its result is answered
        (and journaled as done) by the tool wrapper, which the approval lets through."""
        if self.wrap is None:
            return
        for key, decision in decided:
            if isinstance(decision, Happened):
                self.wrap.happened[key] = decision.result

    def _request(self, calls: list[Any]) -> ApprovalRequest:
        self.asked += 1
        outcome = "unknown" if calls[0].tool_call_id in self.unknown_calls else None
        return ApprovalRequest(
            f"{self.slot}.{self.asked}", self.slot, calls[0].tool_name, calls[0].args_as_dict(), outcome
        )

    async def _decide(self, key: tuple[str, str], calls: list[Any]) -> Decision:
        request = self._request(calls)
        await self.run.emit(ApprovalRequested(self.slot, request.id, request.tool_name, request.arguments))
        decision = await self.run.ask(request)
        self.decided[key] = decision
        await self.run.emit(ApprovalDecided(self.slot, request.id, decision is True, denial_message(decision)))
        return decision

    async def _leave_open(self, fresh: dict[tuple[str, str], list[Any]]) -> None:
        """No one to ask: the requests are announced and the agent run ends with them."""
        name = next(iter(fresh))[0]
        if self.is_guard:
            raise TemplateRuntimeError(
                f"guard {self.slot!r} called {name!r}, which needs approval, and the run has no approve= to decide: "
                "a guard cannot pause; pass approve= (a function, True or False)"
            )
        unknown = self.unknown_calls
        asked_inside = {key[0] for key, calls in fresh.items() if calls[0].tool_call_id not in unknown}
        undeclared = sorted(asked_inside - self.names)
        if undeclared:  # asked from inside the tool (ApprovalRequired): the slot was not made to pause
            raise TemplateRuntimeError(
                f"slot {self.slot!r}: tool {undeclared[0]!r} asked for approval from inside (ApprovalRequired) "
                "and the run has no approve= to decide; pass approve=, or declare the tool with "
                "@struckdown.needs_approval (or approve= in the template) so that the run can pause"
            )
        for calls in fresh.values():
            request = self._request(calls)
            self.pending.append((request, [call.tool_call_id for call in calls]))
            await self.run.emit(ApprovalRequested(self.slot, request.id, request.tool_name, request.arguments))

    def check(self, run: Any, calls: list[ToolCall]) -> None:
        """After the agent run: raise `SlotPaused` when it ended on open requests."""
        output = run.output
        if not isinstance(output, DeferredToolRequests):
            return
        if output.calls:
            raise TemplateRuntimeError(
                f"slot {self.slot!r}: tool {output.calls[0].tool_name!r} deferred its call (CallDeferred); "
                "struckdown resolves calls that need approval only"
            )
        open_ids = {call.tool_call_id for call in output.approvals}
        requests = [(r, [i for i in ids if i in open_ids]) for r, ids in self.pending]
        self.pending = []
        decided = [(tool, _arguments(arguments), decision) for (tool, arguments), decision in self.decided.items()]
        raise SlotPaused(
            PausedSlot(
                slot=self.slot,
                messages=run.all_messages(),
                usage=run.usage,
                tool_calls=list(calls),
                decided=decided,
                requests=[(r, ids) for r, ids in requests if ids],
                asked=self.asked,
            )
        )


def _arguments(canonical: str) -> dict[str, Any]:
    import json

    value = json.loads(canonical)
    return value if isinstance(value, dict) else {}

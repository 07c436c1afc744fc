"""The one engine: runs a Program and produces the SPEC §6 events.

`events()` is the only execution path; `complete()` drains it, the incremental
API hands it out, the CLI prints it and batch runs many of them. Everything the
run starts (segments, slots, guards, tools) lives in one anyio task group, so
closing the generator, cancelling the consumer or a guard trip reaches all of it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import anyio
from anyio.abc import TaskGroup

from ..actions import call_action, check_allowed, option_argument
from ..authority import allow, check_program, resolve_model
from ..codec import as_text
from ..errors import (
    BudgetExceeded,
    Halted,
    SlotBlame,
    TemplateRuntimeError,
    error_slot,
    exception_text,
    find_error,
    first_error,
)
from ..incremental import (
    CheckpointReached,
    ProcessingComplete,
    ProcessingError,
    SlotCompleted,
    SlotRetracted,
    stamping,
)
from ..labels import split_context
from ..observe import slot_span
from ..plan import Program, Segment
from ..results import Result, SlotResult
from ..syntax.nodes import Action, If, Instructions, JinjaValue, Node, Slot, Text, Together, Turn
from ..variables import check_context
from .accounting import check_run, so_far
from .approval.calls import ApprovalRun, SegmentPaused, SlotPaused
from .confidence import check_logprob_models, check_votes
from .conversation import Conversation, Layers, user_turn
from .durable.rerun import Reruns, check_rerun_from
from .flow_run import answer_labels, check_run_flow, flow_run, with_labels
from .guards import GuardBoard
from .ledger import RunLedger
from .prompt_cache import plan_prompt_cache
from .resolve import evaluate_option, output_for, resolve_plan
from .settings import RunSettings
from .slot import SlotEnv, run_model_slot
from .slot_run import entered
from .tool_checks import check_tool_names
from .tools import ModelCallHook


@dataclass
class Run:
    program: Program
    context: Mapping[str, Any]
    options: RunSettings
    emit: Callable[[Any], Awaitable[None]]
    variables: dict[str, Any] = field(init=False)
    results: dict[str, SlotResult] = field(default_factory=dict)
    ready: dict[str, anyio.Event] = field(init=False)
    guards: GuardBoard = field(init=False)
    env: SlotEnv = field(init=False)
    _tg: TaskGroup | None = None
    _stop_scope: anyio.CancelScope | None = None  # the walk of the segment that holds stop_at
    _stop_segment: int | None = None
    _rendered: dict[int, str] = field(default_factory=dict)  # instructions node → its text, once per run
    _taken: dict[int, tuple[Node, ...] | None] = field(default_factory=dict)  # If node → branch taken
    reruns: Reruns = field(default_factory=Reruns.off)  # SPEC §25: with a journal, slots reused (run/durable/rerun.py)
    _segment_envs: dict[int, SlotEnv] = field(default_factory=dict)  # segment → its slots' env (`_slot_env`)

    def __post_init__(self) -> None:
        # SPEC §33: sd.Private / sd.Untrusted values unwrapped, their names' labels kept
        self.context, self.flow_labels = split_context(
            self.context, self.options.options["private"], self.options.options["untrusted"]
        )
        self.variables = dict(self.context)
        if len(self.program.segments) > 1:  # 0.x's `segment_index` on slot events (0 unless stamped)
            self.emit = stamping(self.emit, self.program)
        # only the answers a later segment waits for get an Event (an anyio.Event costs ~20 µs)
        self.ready = {key: anyio.Event() for key in _awaited(self.program)}
        self.guards = GuardBoard({seg.index: list(seg.guards) for seg in self.program.segments})
        environment = self.program.environment
        self.renderer = environment.renderer
        batching = self.options.provider_batch  # holds the request cap around batch API calls instead
        self.ledger = RunLedger(
            self.emit, budget=self.options.budget, pricing=self.options.pricing, batch=self.options.batch,
            requests=self.options.requests if batching is None else None,  # the meter holds the cap per request
        )
        if self.options.spent is not None:
            self.ledger.carry(self.options.spent)
        tracing = self.options.tracing
        self._limit: tuple[Any, ...] = (
            *(tracing.capabilities if tracing is not None else ()),  # pydantic-ai's instrumentation, for guards too
        )
        default_model = self.options.options["model"]
        resolved_default: list[Any] = []

        policy = environment.policy

        def model_for(name: str | None, option: str = "model") -> Any:
            # SPEC §30: every model name a run reaches is resolved here, through the host's policy
            if name:
                model = resolve_model(name, environment.models, policy, option=option)
                return batching.wrap(model) if batching is not None else model
            if not resolved_default:
                model = resolve_model(default_model, environment.models, policy, option="model")
                resolved_default.append(batching.wrap(model) if batching is not None else model)
            return resolved_default[0]

        if self.options.options["stop_at"] is not None and self.options.options["stop_at"] not in self.program.keys:
            raise ValueError(f"stop_at={self.options.options['stop_at']!r} is not a slot of this template")
        check_context(self.program, self.context, strict=self.options.options["strict_undefined"])
        check_rerun_from(self.program, self.options.options["rerun_from"], self.options.options["journal"])
        self.model_for = model_for
        self.env = SlotEnv(
            emit=self.emit,
            join_guards=self.guards.join_all,
            resolve_model=model_for,
            toolbox=environment.engine_caches().toolbox(tuple(self.options.options["tools"])),
            run=self.options,  # the run's merged options: the slot reads them there
            environment=environment,
            # the "second model call after a guard started" join point, for every slot but a guard
            capabilities=(
                *((ModelCallHook(self.guards.before_model_call),) if self.program.guards else ()),
                *self._limit,
            ),
            cache=_cache(self.options.options["cache"], environment.response_caches),
            ledger=self.ledger,
            resolve_fallback=partial(resolve_model, store=environment.models, policy=policy, option="fallback"),
            prompt_cache=plan_prompt_cache(self.program, self.options.options["prompt_cache"], policy.tenant),
        )
        self.approval = ApprovalRun(
            decide=self.options.options["approve"], emit=self.emit, guards=self.guards, toolbox=self.env.toolbox,
            resume=self.options.resume,
        )
        servers = self.options.mcp.names if self.options.mcp is not None else ()
        self.approval.check_names(self.program, servers)  # approve= names that are no tools: before any model call
        self.env.approval = self.approval

    # -- the run -------------------------------------------------------------
    async def main(self) -> None:
        """The run; with `journal=`, its tool effects are journaled (SPEC §25, run/durable/effects.py)."""
        if self.options.options["journal"] is None:
            return await self._main()
        from .durable.effects import acquire, release, scope_for

        journal = acquire(self.options.options["journal"])
        self.env.effects = scope_for(journal, self.env.toolbox.tools, self.env.toolbox.names)
        self.reruns = Reruns.start(
            journal, self.env.effects.row, self.program, self.options.options["rerun_from"], self.options.resume
        )
        try:
            await self._main()
        finally:
            release(journal)

    async def _main(self) -> None:
        guarded = flow_run(self)  # SPEC §33: the request-boundary layer's view of this run
        if guarded is None:
            await self._walk_run()
            return
        with entered(flow=guarded):  # the slot attempts' SlotRuns inherit it
            await self._walk_run()

    async def _walk_run(self) -> None:
        try:
            policy = self.env.environment.policy
            if not policy.permissive:  # SPEC §30: every marked option against the host's policy, before any call
                check_program(self.program, policy)
            check_allowed(self.program, self.env.environment.actions)  # @fetch/@search not allowed: before any request
            check_votes(self.program, self.env.limits)  # vote:N within the slot's request limit (issue 47)
            if self.program.needs_model:
                self.model_for(None)  # fail fast on a missing model, before any work
                check_run(self)  # budgets' tool names, max_cost's prices: before any model call
                check_logprob_models(self)  # confidence=logprobs on the test model (no logprobs): refused
                # budget=, tool_choice= names that are no tools (approve=: above): before any model call
                check_tool_names(self.program, self.env.toolbox.names, mcp=self.env.mcp is not None)
                check_run_flow(self)  # SPEC §33: a labelled value that can reach a sink it may not
                await self.approval.check_mcp_names(self.program, self.options.mcp)  # lists those servers' tools
            await self.approval.announce()
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
            halted = find_error(exc, Halted) or self.guards.trip
            if halted is not None:
                await self._finish_halted(halted)
                return
            error = find_error(exc, BudgetExceeded) or first_error(exc)
            if isinstance(error, (KeyboardInterrupt, SystemExit, anyio.get_cancelled_exc_class())):
                raise
            partial = so_far(self, error)  # the answers so far; every request made counts in its usage
            await self._retract("budget" if isinstance(error, BudgetExceeded) else "errored")
            await self.emit(ProcessingError(self.slot_of(error), error, partial))
            error.__suppress_context__ = True  # hide the task-group wrapping, keep __cause__
            raise error
        if self.approval.paused:  # SPEC §12: calls wait for decisions; the state resumes the run
            recorded = self.options.recorded() if self.options.recorded else None
            paused = self.approval.pause(self.program, self.context, self.results, with_labels(self, recorded))
            await self.emit(ProcessingComplete(paused.results, early_termination=False, paused=True))
            return
        result = Result(self.results, self.program.keys, reruns=self.reruns.report())
        await self.emit(ProcessingComplete(result, early_termination=False))

    def slot_of(self, error: BaseException) -> str | None:
        """The slot (or action) an error came from."""
        return error_slot(error)

    def blaming(self, slot: str) -> SlotBlame:
        """struckdown's own errors leaving a slot name it in `.slot`. Any other error (from
        the model library, a provider SDK, the caller's model function) passes through
        as it is, with only a PEP 678 note naming the slot (`slot_note`)."""
        return SlotBlame(slot)

    def _segments_to_run(self) -> list[Segment]:
        if self.options.options["stop_at"] is None:
            return list(self.program.segments)
        last = self.program.segment_of(self.options.options["stop_at"])
        skipped = [s for s in self.program.segments if s.index > last]
        for seg in skipped:
            self.guards.skip(seg.guards)
            for key in seg.keys:
                self._ready(key)
        return [s for s in self.program.segments if s.index <= last]

    async def _finish_halted(self, halted: Halted) -> None:
        """SPEC §4: the slots before the tripping guard and its verdict are the result; an
        answer computed beside the guard (after it in the template) is discarded, never
        delivered, though its requests count in the usage."""
        await self._retract("halted")
        keys = self.program.keys
        guard_at = keys.index(halted.slot) if halted.slot in keys else len(keys)
        kept = {k: r for k, r in self.results.items() if k not in keys or keys.index(k) <= guard_at}
        discarded = self.ledger.cut_off()  # slots cut off by the trip: their requests count too
        for key, slot in self.results.items():
            if key not in kept:
                discarded = discarded + slot.usage
        halted.keep(kept, keys, discarded)
        result = Result(kept, keys, halted=halted, discarded=discarded)
        await self.emit(ProcessingComplete(result, early_termination=True))
        if self.options.options["on_halt"] != "return":
            raise halted

    async def _retract(self, reason: str) -> None:
        for slot in sorted(self.env.streaming_now):
            await self.emit(SlotRetracted(slot, reason))
        self.env.streaming_now.clear()

    # -- segments ------------------------------------------------------------
    async def _run_segment(self, segment: Segment) -> None:
        for key in segment.waits_for:
            await self.ready[key].wait()
        self.reruns.enter(segment.index, segment.waits_for)  # it reads an answer that ran again: it runs
        try:
            if self.approval.blocks(segment.waits_for):
                raise SegmentPaused  # an answer it reads waits for approval decisions
            conversation = self._inherited(segment)
            if self.options.options["stop_at"] is None or self.options.options["stop_at"] not in segment.keys:
                await self._walk(segment.nodes, conversation, segment.index)
            else:
                with anyio.CancelScope() as scope:
                    self._stop_scope, self._stop_segment = scope, segment.index  # cancelled after that slot
                    await self._walk(segment.nodes, conversation, segment.index)
        except SegmentPaused:
            self.approval.block(segment.keys, self.results)  # the rest of the run goes on beside it
            return
        finally:
            self.guards.skip(segment.guards)
            for key in segment.keys:
                guard = self.guards.states.get(key)
                if guard is None or not guard.started or guard.done.is_set():  # a pending verdict: set when stored
                    self._ready(key)
        # an unnamed checkpoint is "Checkpoint N" (the Nth checkpoint), as 0.18 named them
        name = segment.name or (f"Checkpoint {segment.index}" if segment.index else None)
        await self.emit(CheckpointReached(segment.index, name))

    def _inherited(self, segment: Segment) -> Conversation:
        """System/header text carried in from earlier segments (global scope only),
        as each was rendered (once per run: `_instructions` and `_branch` remember)."""
        conversation = Conversation()
        nodes: list[Node] = []
        for earlier in self.program.segments[: segment.index]:
            nodes += earlier.carried
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

    # -- walking the AST: one method per node class ----------------------------
    async def _walk(self, nodes: Sequence[Node], conversation: Conversation, segment: int) -> None:
        for node in nodes:
            if segment == self._stop_segment and self._stop_scope is not None and self._stop_scope.cancel_called:
                return  # stop_at: nothing after its slot runs (not even text without an await)
            await getattr(self, f"_run_{type(node).__name__}")(node, conversation, segment)

    async def _run_Text(self, node: Text, conversation: Conversation, segment: int) -> None:
        conversation.add_text(self._render(node.source))

    async def _run_Instructions(self, node: Instructions, conversation: Conversation, segment: int) -> None:
        self._instructions(node, conversation)

    async def _run_Turn(self, node: Turn, conversation: Conversation, segment: int) -> None:
        conversation.add_turn(node.role, self._render_body(node.body))

    async def _run_If(self, node: If, conversation: Conversation, segment: int) -> None:
        branch = self._branch(node)
        if branch is not None:
            await self._walk(branch, conversation, segment)

    async def _run_Action(self, node: Action, conversation: Conversation, segment: int) -> None:
        await self._action(node, conversation, segment)

    async def _run_Slot(self, node: Slot, conversation: Conversation, segment: int) -> None:
        if node.is_guard:
            self._start_guard(node, conversation, segment)
        else:
            await self._slot(node, conversation, segment)

    async def _run_Together(self, node: Together, conversation: Conversation, segment: int) -> None:
        await self._together(node, conversation, segment)

    def _render(self, source: str) -> str:
        try:
            defined: dict[str, Any] = {}
            text = self.renderer.render_text(source, self.variables, self.program.compiled, defined)
        except Exception as exc:
            raise TemplateRuntimeError(f"rendering failed: {exception_text(exc)}") from exc
        self.variables.update(defined)  # {% set %} values and macros carry to later text (0.18)
        return text

    def _render_body(self, body: Sequence[Node]) -> str:
        return "".join(self._render(n.source) for n in body if isinstance(n, Text)).strip()

    def _instructions(self, node: Instructions, conversation: Conversation) -> None:
        layers: Layers = conversation.system if node.kind == "system" else conversation.header
        text = self._rendered.get(id(node))
        if text is None:
            text = self._rendered[id(node)] = self._render_body(node.body)
        layers.apply(text, node.scope, node.mode)

    def _branch(self, node: If) -> tuple[Node, ...] | None:
        """The branch taken, decided once per run (later segments inherit the same one)."""
        if id(node) not in self._taken:
            self._taken[id(node)] = self._decide(node)
        return self._taken[id(node)]

    def _decide(self, node: If) -> tuple[Node, ...] | None:
        for branch in node.branches:
            if branch.condition is None:
                return branch.body
            try:
                taken = self.renderer.evaluate(branch.condition, self.variables)
            except Exception as exc:
                raise TemplateRuntimeError(
                    f"line {branch.pos.line}: condition {branch.condition!r} failed: {exc}"
                ) from exc
            if taken:
                return branch.body
        return None

    def _store(self, result: SlotResult) -> SlotResult:
        if self.flow_labels:
            labels = answer_labels(self, result.key)
            if labels != result.labels:
                result = replace(result, labels=labels)
        self.results[result.key] = result
        self.variables[result.key] = result.output
        self._ready(result.key)
        return result

    def _ready(self, key: str) -> None:
        """The answer `key` exists (or never will): the segments waiting for it go on."""
        event = self.ready.get(key)
        if event is not None:
            event.set()

    async def _slot(self, node: Slot, conversation: Conversation, segment: int) -> None:
        prompt = conversation.take_prompt()
        history, user_prompt = conversation.request(prompt)
        env, changed = self._slot_env(segment), self.reruns.changed(segment)
        result = await self._fill(node, history, user_prompt, conversation.instructions(), env, changed)
        self.reruns.after(segment, [result])
        conversation.record(prompt, as_text(result.output))
        self._after(node.key)

    async def _fill(
        self,
        node: Slot,
        history: list[Any],
        prompt: str | None,
        instructions: str | None,
        env: SlotEnv,
        changed: bool = False,
    ) -> SlotResult:
        plan = self.program.plan(node)
        with self.blaming(node.key), slot_span(self.options.tracing, node.key, plan.slot.type_name, node.is_guard) as span:
            resolved = resolve_plan(plan, self.variables, self.renderer)
            spec = output_for(plan, resolved, self.program.environment.types)
            restored = self.approval.restored(node.key, spec)  # finished before the pause: not run again
            if restored is not None:
                self._store(restored)
                return restored
            # SPEC §25: with a journal, an unchanged request is answered from it
            pending, result = self.reruns.lookup(env, plan, resolved, spec, history, prompt, instructions, changed)
            if result is not None and result.tool_calls and not await self.reruns.still_same(env, node.key, result):
                result = None  # SPEC §29: a read-only tool of the reused slot answers differently now
            if result is None:
                try:
                    result = await run_model_slot(
                        env, plan, resolved, spec, history=history, prompt=prompt, instructions=instructions
                    )
                except SlotPaused as paused:
                    self.approval.hold(paused.record)
                    raise SegmentPaused from None
                self.reruns.record(pending, result)
            span(result)
        self.env.streaming_now.discard(node.key)
        result = self._store(result)
        await self.emit(
            SlotCompleted(node.key, result, result.elapsed_ms, result.cached, result.truncated, result.confidence)
        )
        return result

    def _slot_env(self, segment: int) -> SlotEnv:
        """A slot's tools and first token wait for the guards preceding it in its segment
        (one env per segment, made on its first slot: the run's env is complete by then)."""
        env = self._segment_envs.get(segment)
        if env is None:
            env = self._segment_envs[segment] = replace(self.env, join_guards=partial(self.guards.join, segment, None))
        return env

    def _guard_env(self, segment: int, key: str) -> SlotEnv:
        """A guard neither streams nor waits before its model call (its calls never count
        as "beside" a guard), and its own tools do not wait for its verdict."""
        quiet = replace(self.options, stream=False) if self.options.stream else self.options
        return replace(self.env, join_guards=partial(self.guards.join, segment, key), run=quiet, capabilities=self._limit)

    def _after(self, key: str) -> None:
        if self.options.options["stop_at"] == key and self._stop_scope is not None:
            self._stop_scope.cancel()

    def _start_guard(self, node: Slot, conversation: Conversation, segment: int) -> None:
        prompt = conversation.take_prompt()
        history, user_prompt = conversation.request(prompt, with_history=False)
        self.guards.start(node.key, self.program.plan(node).when)
        instructions = conversation.instructions()
        assert self._tg is not None
        changed = self.reruns.changed(segment)
        self._tg.start_soon(self._guard_task, node, history, user_prompt, instructions, segment, changed)

    async def _guard_task(
        self, node: Slot, history: list[Any], prompt: str | None, instructions: str | None, segment: int, changed: bool
    ) -> None:
        result = await self._fill(node, history, prompt, instructions, self._guard_env(segment, node.key), changed)
        verdict = result.output if isinstance(result.output, dict) else {"triggered": False, "reason": ""}
        if self.guards.finish(node.key, verdict):
            raise self.guards.halted(self.guards.states[node.key])

    async def _action(self, node: Action, conversation: Conversation, segment: int) -> None:
        spec = self.program.environment.actions.get(node.name)
        replayed, value = self.approval.replayed_action(node) if node.key is None else (False, None)
        restored = self.approval.restored(node.key, None) if node.key is not None else None
        if replayed or restored is not None:  # it ran before the pause: not again
            if restored is not None:
                self._store(restored)
                value = restored.output
            else:
                self.approval.ran_action(node, value)
            spec.add_to(conversation, value, node)
            if node.key is not None:
                self._after(node.key)
            return
        if spec.side_effects:
            await self.guards.join(segment)
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for option in spec.without_role(node).options:  # role= says which turn the value becomes
            value = option.value
            if isinstance(value, JinjaValue):
                value = evaluate_option(self.renderer, value.expression, self.variables, f"@{node.name}")
            else:
                value = option_argument(option, self.variables)  # an unquoted name passes its variable (0.x)
            if option.key is None:
                args.append(value)
            else:
                kwargs[option.key] = value
        policy = self.env.environment.policy
        if spec.authority and not policy.permissive:  # SPEC §30: the values it reaches, as computed
            for argument, kinds in spec.authority.items():
                if argument in kwargs:
                    allow(kinds, kwargs[argument], policy, option=f"@{node.name} {argument}")
        started = time.perf_counter()
        with self.blaming(node.key or f"@{node.name}"):
            try:
                value = await call_action(spec, args, kwargs, self.variables)
            except Exception as exc:
                raise TemplateRuntimeError(f"action @{node.name} failed: {exception_text(exc)}") from exc
        if node.key is None:
            self.approval.ran_action(node, value)  # for the state of a pause
        if node.key is not None:
            result = SlotResult(node.key, f"@{node.name}", value, elapsed_ms=(time.perf_counter() - started) * 1000)
            self._store(result)
            await self.emit(SlotCompleted(node.key, result, result.elapsed_ms, False))
        spec.add_to(conversation, value, node)
        if node.key is not None:
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
        paused: list[str] = []
        changed = self.reruns.changed(segment)  # decided before the block: members run beside each other

        async def member(node: Slot, question: str) -> None:
            prompt = "\n\n".join(p for p in (shared, question) if p)
            history = list(base_history)
            env = self._slot_env(segment)
            try:
                answers[node.key] = await self._fill(node, history, prompt or None, conversation.instructions(), env, changed)
            except SegmentPaused:  # its siblings go on; the block pauses once they are done
                paused.append(node.key)

        async with anyio.create_task_group() as tg:
            for node, question in members:
                if not node.is_guard:
                    tg.start_soon(member, node, question)
        await self.guards.join(segment)
        if paused:
            raise SegmentPaused
        self.reruns.after(segment, answers.values())
        if shared:
            conversation.history.append(user_turn(shared))
        for node, question in members:
            if node.key in answers:
                conversation.record(question, as_text(answers[node.key].output))
        for node, _ in members:
            if node.key in answers:
                self._after(node.key)


def _awaited(program: Program) -> frozenset[str]:
    """The answers some segment waits for (once per Program)."""
    awaited = program.memo.get("awaited")
    if awaited is None:
        awaited = program.memo["awaited"] = frozenset(key for seg in program.segments for key in seg.waits_for)
    return awaited


def _cache(cache: Any, stores: dict[Any, Any]) -> Any:
    """The run's response cache; the sqlite-backed module loads only when one is asked for."""
    if cache is None or cache is False:
        return None
    from ..cache import resolve_cache

    return resolve_cache(cache, stores)

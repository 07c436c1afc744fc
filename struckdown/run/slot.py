"""One slot = one pydantic-ai Agent run with the slot's output type, limits and history."""

from __future__ import annotations

import functools
import json
import operator
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pydantic_ai.messages import (
    ModelMessage,
)
from pydantic_ai.settings import ModelSettings

from .. import slot_options as opts
from ..approval.state import PausedSlot
from ..errors import TemplateRuntimeError
from ..limits import Limits, clamp_limits
from ..media.turns import prepare_prompt, redact
from ..models import model_label, slot_run_defaults
from ..plan import SlotPlan
from ..results import SlotResult, Usage
from ..types import OutputSpec
from . import confidence, prompted
from .approval import answers as answer_approval
from .attempts import SlotAttempts, is_truncated, model_name, slot_error
from .budgets import slot_budget
from .context_window import context_left, has_context_window
from .deadline import CutRun, cut_at_deadline, slot_seconds, within
from .loop_retry import LoopWatch, finish_of, guarded_run, loop_watch
from .partials import Partials, streams_partials
from .prompt_cache import with_cache_settings
from .resolve import Resolved, model_settings
from .slot_run import entered
from .text_stream import TextStream
from .tools import ToolBox, ToolWrap
from .wrappers import model_stack
from .wrappers.cached import CacheRun, store_answer

if TYPE_CHECKING:
    from ..env_view import EnvironmentView
    from .settings import RunSettings

@dataclass
class SlotEnv:
    """What a slot needs from its run (everything the caller passed reaches here): the run's
    settings as they are (`run`: the merged options, read, not copied) and what the run made."""

    emit: Callable[[Any], Awaitable[None]]
    join_guards: Callable[[], Awaitable[None]]
    resolve_model: Callable[[str | None], Any]
    toolbox: ToolBox
    run: RunSettings
    environment: EnvironmentView
    capabilities: tuple[Any, ...] = ()  # per-run pydantic-ai capabilities (the guard join before a model call)
    cache: Any = None  # a resolved response cache (aget/aput) or None
    streaming_now: set[str] = field(default_factory=set)
    approval: Any = None  # the run's ApprovalRun (run/approval.py): who decides calls that need approval
    ledger: Any = None  # the run's usage ledger (run/ledger.py): every request metered, priced, limited
    resolve_fallback: Callable[..., Any] = lambda model, **_: model  # a fallback model (or its name) → a Model
    prompt_cache: Any = None  # run/prompt_cache.PromptCachePlan: what requests ask the provider to cache
    effects: Any = None  # SPEC §25: the run's journal scope (run/effects.EffectScope), or None

    # the run's options, as the slot reads them
    @property
    def loop_guard(self) -> bool:  # SPEC §34: free-text answers that loop are stopped (run/loop_retry.py)
        return bool(self.run.options["loop_guard"])

    @property
    def deps(self) -> Any:
        return self.run.options["deps"]

    @property
    def limits(self) -> Any:  # the caller's ceiling (pydantic_ai UsageLimits or None)
        return self.run.options["limits"]

    @property
    def settings(self) -> Mapping[str, Any] | None:
        return self.run.options["settings"]

    @property
    def stream(self) -> bool:
        return self.run.stream

    @property
    def tool_timeout(self) -> float | None:  # the host's ceiling for one tool call
        return self.run.options["tool_timeout"]

    @property
    def max_seconds(self) -> float | None:  # the host's ceiling for one slot's answer (`max_seconds=` lowers it)
        return self.run.options["max_seconds"]

    @property
    def max_tool_result(self) -> int | None:  # characters of one tool result the model reads (the host's)
        return self.run.options["max_tool_result"]

    @property
    def mcp(self) -> Any:  # the run's MCPSessions, None without MCP servers
        return self.run.mcp

    @property
    def tool_limits(self) -> Mapping[str, int]:  # the host's per-tool call ceilings
        return self.run.tool_limits or {}

    @property
    def tracing(self) -> Any:  # struckdown spans (observe.py), or None
        return self.run.tracing

    @property
    def resilience(self) -> Any:  # retries, fallback, on_truncate (None: defaults)
        return self.run.resilience


def _attempt_settings(
    env: SlotEnv, plan: SlotPlan, resolved: Resolved, model: Any, attempts: SlotAttempts, family: str,
    ours: Mapping[str, Any], left: int | None,
) -> ModelSettings | Callable[[Any], ModelSettings]:
    """The settings of one attempt on `model`: struckdown's defaults under the caller's under
    the slot's, the prompt-cache settings beneath those, the attempt's own (output cap, SDK
    retries off, a forced tool choice)."""
    defaults = slot_run_defaults(model, env.environment, plan.slot.type_name, env.settings, resolved.settings)
    merged = with_cache_settings(model_settings(env.settings, resolved.settings, defaults), ours)
    return attempts.model_settings(merged, env.settings, family, left)


def _usage(run_usage: Any, hits: int = 0, meter: Any = None, earlier_tool_calls: int = 0) -> Usage:
    """The slot's bill: what its meter counted (every real request, each retry and fallback
    attempt included, with its price), with the tool calls of this run and of the earlier
    attempts'; requests answered from the response cache cost nothing."""
    if meter is not None:
        metered: Usage = meter.account.usage(tool_calls=run_usage.tool_calls + earlier_tool_calls)
        return metered
    return Usage(
        requests=run_usage.requests - hits,
        tool_calls=run_usage.tool_calls,
        input_tokens=run_usage.input_tokens or 0,
        output_tokens=run_usage.output_tokens or 0,
        cache_read_tokens=run_usage.cache_read_tokens or 0,
        cache_write_tokens=run_usage.cache_write_tokens or 0,
    )


async def run_model_slot(
    env: SlotEnv,
    plan: SlotPlan,
    resolved: Resolved,
    spec: OutputSpec,
    *,
    history: list[ModelMessage],
    prompt: str | None,
    instructions: str | None,
) -> SlotResult:
    """The attempt loop: one attempt per model, the slot's own, then its fallbacks (SPEC
    §14), and with `confidence=`, the measure and the escalation (SPEC §27)."""
    key = plan.key
    started = time.perf_counter()
    resumed_answer = answer_approval.resumed_decision(env.approval, key)  # escalate=approve, decided
    if resumed_answer is not None:
        return _decided_answer(plan, resolved, spec, *resumed_answer)
    slot = await _Slot.start(env, plan, resolved, spec, history, prompt, instructions)
    attempts, method, model = slot.attempts, slot.method, slot.model
    measured: float | None = None
    escalated_to: str | None = None
    decided: tuple[Any, ...] = ()  # escalate=approve: (the person's answer,)
    while True:
        measuring = method is not None and escalated_to is None
        try:
            run, cache_run, ask = await slot.attempt(model, measuring)
        except Exception as exc:
            if slot.refused_tools(exc, model):
                continue  # SPEC §37: ask again, the schema in the prompt (PromptedOutput)
            error = slot_error(exc, key, model)
            if error is None:
                raise
            fallback = await attempts.fall_back(error)
            if fallback is None:
                if error is exc:
                    raise
                raise error from exc
            model = fallback
            continue
        answered = run
        if not measuring or method is None:
            break
        if method.logprobs:
            measured = confidence.logprob_confidence(run.new_messages(), key, model_label(model))
        else:
            answered, measured, run = await confidence.vote(run, method.votes, ask, spec.to_value)
        target = confidence.escalation(resolved.control, measured)
        if target == "approve":
            decided = (await _ask_person(env, key, answered, attempts, measured, spec, resolved),)
            break
        if target is None:
            break
        model = attempts.escalate(target, key)
        escalated_to = model_name(model)
    value, messages, usage = await slot.finish(run, answered, cache_run, decided)
    wrap = slot.wrap
    return SlotResult(
        key=key,
        type=plan.slot.type_name,
        output=value,
        messages=tuple(messages),
        usage=usage,
        elapsed_ms=(time.perf_counter() - started) * 1000,
        cached=cache_run is not None and cache_run.hits > 0,
        tool_calls=tuple(wrap.calls) if wrap else (),
        truncated=is_truncated(messages),
        finish=finish_of(slot.watch, is_truncated(messages)),
        fallback_used=attempts.fallback_used,
        confidence=measured,
        escalated_to=escalated_to,
        response_schema=schema_of(spec.output_type),
    )


@dataclass
class _Slot:
    """What the attempts of one model slot share: its tools and approvals, output type,
    deadline, streams, models and meter. The attempt loop holds it; the layers below an
    attempt read their part of it from the attempt's `SlotRun` (`slot_run`)."""

    env: SlotEnv
    plan: SlotPlan
    resolved: Resolved
    spec: OutputSpec
    history: list[ModelMessage]
    prompt: str | None
    instructions: str | None
    mcp: Any  # the slot's MCP tools (tools/mcp.SlotTools), or None
    use_tools: bool
    limits: Limits
    meter: Any  # the slot's share of the usage ledger (run/ledger.SlotMeter), or None
    wrap: ToolWrap | None
    gate: Any  # SPEC §12: the slot's approvals (run/approval/calls.SlotGate), or None
    output_type: Any = None
    seconds: float | None = None
    streamer: TextStream | None = None
    watch: LoopWatch | None = None  # SPEC §34: the loop guard (run/loop_retry.py), or None
    partials: Partials | None = None
    model: Any = None  # the slot's own model (its fallbacks are the attempts')
    attempts: SlotAttempts = field(init=False)
    method: Any = None  # SPEC §27: how confidence is measured (confidence.Method), or None
    paused_before: tuple[int, ...] | None = None  # what the paused run spent (its usage grows during this run)
    no_tools: set[int] = field(default_factory=set)  # ids of the models that refused tool calling here (run/prompted.py)
    asked_type: Any = None  # the output type the attempt in progress asked for

    @classmethod
    async def start(
        cls, env: SlotEnv, plan: SlotPlan, resolved: Resolved, spec: OutputSpec, history: list[ModelMessage],
        prompt: str | None, instructions: str | None,
    ) -> _Slot:
        key, control = plan.key, resolved.control
        # opens the servers' sessions on first use
        mcp = await _mcp_tools(env, key, control) if env.mcp is not None or "mcp" in control else None
        use_tools = _uses_tools(env, plan, resolved, mcp)
        limits = _limits(env, plan, resolved)
        meter = env.ledger.meter(key) if env.ledger is not None else None
        wrap, gate = await _tools(env, plan, resolved, mcp, limits, meter) if use_tools else (None, None)
        slot = cls(env, plan, resolved, spec, history, prompt, instructions, mcp, use_tools, limits, meter, wrap, gate)
        caches = env.environment.engine_caches()
        slot.output_type = caches.text_output(spec) if spec.is_text else spec.output_type
        if gate is not None and gate.may_pause:  # its run may end with DeferredToolRequests
            slot.output_type = caches.deferrable(slot.output_type)
        slot.seconds = seconds = slot_seconds(env.max_seconds, control.get("max_seconds"), key)
        # with a deadline a free-text answer streams even unseen: what came before it is the answer
        slot.watch = watch = loop_watch(env.loop_guard, key, spec.is_text, control, use_tools)  # SPEC §34
        if spec.is_text and (env.stream or seconds is not None):
            slot.streamer = TextStream(env, key, buffer_text=use_tools, quiet=not env.stream,
                                       guard=watch.detector if watch else None)  # fmt: skip
        if watch is not None:
            watch.streamer = slot.streamer
        slot.partials = Partials(env, key, spec) if env.stream and streams_partials(spec) else None  # SPEC §26
        slot.model = env.resolve_model(resolved.settings.get("model"))
        slot.attempts = SlotAttempts.start(
            key, env.emit, env.resilience, control, slot.model, env.resolve_fallback, env.toolbox.names
        )
        slot.attempts.restart = (
            slot.streamer.retract if slot.streamer else slot.partials.retract if slot.partials else None
        )
        if gate is not None and gate.resumed is not None:
            spent = gate.resumed.usage
            slot.paused_before = (
                spent.requests, spent.input_tokens or 0, spent.output_tokens or 0,
                spent.cache_read_tokens or 0, spent.cache_write_tokens or 0,
            )
        slot.method = confidence.method_of(control)  # SPEC §27
        return slot

    @property
    def family(self) -> str:
        plan = self.plan
        return opts.type_family(plan.slot.type_name, plan.slot.quantifier, self.spec.is_text)

    def slot_run(self, cache_run: CacheRun | None = None) -> entered:
        """`with` the attempt's `SlotRun`, around its `agent.run`: what the model and tool layers read."""
        return entered(meter=self.meter, tools=self.wrap, retries=self.attempts.retries(), cache=cache_run)

    async def settings(self, model: Any, measuring: bool) -> ModelSettings | Callable[[Any], ModelSettings]:
        """The model settings of an attempt on `model`."""
        env, plan, resolved, attempts = self.env, self.plan, self.resolved, self.attempts
        ours: Mapping[str, Any] = {}  # SPEC §24: the provider caches what later requests resend
        if env.prompt_cache is not None:
            ours = env.prompt_cache.settings(
                model, plan.key, instructions=bool(self.instructions), tools=self.use_tools,
                asked=resolved.control.get("prompt_cache"),
            )
        # a local server's n_ctx (issue 40)
        left = await context_left(model, self.instructions, self.history, self.prompt) if has_context_window(model) else None
        settings: ModelSettings | Callable[[Any], ModelSettings]
        if plan.dynamic or ours or left is not None:
            settings = _attempt_settings(env, plan, resolved, model, attempts, self.family, ours, left)
        else:  # the same every time this slot runs on this model: made once
            settings = env.environment.engine_caches().attempt_settings(
                plan, model, env.settings, env.environment.types.custom(plan.slot.type_name),
                lambda: _attempt_settings(env, plan, resolved, model, attempts, self.family, ours, left),
            )
        if measuring and self.method is not None and self.method.logprobs:
            settings = confidence.with_logprobs(settings)
        return settings

    async def attempt(self, model: Any, measuring: bool) -> tuple[Any, CacheRun | None, Callable[[], Awaitable[Any]]]:
        """One `agent.run` on `model`: (its run, its response-cache state, an asker of the
        same request again, for `confidence=vote:N`). Raises what ended it."""
        env, spec, attempts, seconds = self.env, self.spec, self.attempts, self.seconds
        self.asked_type = None
        settings = await self.settings(model, measuring)
        caches = env.environment.engine_caches()
        # agent slots are never served from the cache, nor answers whose confidence is measured
        cached = env.cache is not None and not self.use_tools and self.method is None
        cache_run = _cache_run(env.cache, model, spec) if cached else None
        served_by = model_stack(caches, model, cached=cached)  # run/wrappers: MODEL_STACK, folded
        message_history, text_prompt = attempts.request(self.history, self.prompt)
        user_prompt = prepare_prompt(message_history, text_prompt)  # images placed in the question: content parts
        with self.slot_run(cache_run), attempts.running() as run_usage:
            arguments: dict[str, Any] = {
                "user_prompt": user_prompt, "message_history": message_history or None, "usage": run_usage,
                "capabilities": list(env.capabilities) or None,
            }
            if self.gate is not None and self.gate.resumed is not None:  # the paused run's messages and the decisions
                arguments = self.gate.resume_arguments(arguments)
            asked_type = self.output_type
            if measuring and self.method is not None and self.method.logprobs:
                asked_type = caches.content_output(asked_type, confidence.native_json(model))
            elif not spec.is_text and not self.use_tools and (id(model) in self.no_tools or prompted.known_to_refuse(model)):
                asked_type = caches.content_output(asked_type, False)  # the server has no tools
            self.asked_type = asked_type
            agent = caches.agent_for(asked_type, served_by, env.toolbox if self.use_tools else None)
            streamer, partials = self.streamer, self.partials
            call: dict[str, Any] = {
                "instructions": self.instructions, "deps": env.deps, "model_settings": settings,
                "usage_limits": self.limits.usage_limits(),
                "event_stream_handler": (
                    (streamer.handle if _streams(model) else None) if streamer else partials.handle if partials else None
                ),
                "toolsets": self.mcp.toolsets if self.mcp else None, **arguments,
            }
            if seconds is None:  # no deadline: no task group, no extra frames
                got, late = await guarded_run(self.watch, attempts, agent, call), False
            else:

                async def request() -> Any:
                    return await guarded_run(self.watch, attempts, agent, call)

                got, late = await within(seconds, request)
        run: Any = got
        if late:  # SPEC §14 as for max_tokens: the text so far is the answer, cut
            assert seconds is not None
            run = cut_at_deadline(attempts, spec, seconds, streamer, message_history, user_prompt, model)
            cache_run = None  # a cut answer is never stored
        elif self.watch is not None and self.watch.looped:
            cache_run = None  # nor one cut at a loop
        cut = attempts.truncated_error(run, typed=not spec.is_text)
        if cut is not None:
            raise cut
        return run, cache_run, self.asker(agent, call)

    def refused_tools(self, exc: Exception, model: Any) -> bool:
        """SPEC §37: a typed answer asked with an output tool of a server that has no tool
        calling is asked again on the same model with the schema in the prompt."""
        spec = self.spec
        if self.asked_type is self.output_type and not spec.is_text and not self.use_tools and prompted.refuses_tools(exc):
            self.no_tools.add(id(model))
            prompted.remember(model)
            return True
        return False

    def asker(self, agent: Any, call: dict[str, Any]) -> Callable[[], Awaitable[Any]]:
        """Asks the same request again (`confidence=vote:N`): each ask is a billed, metered run."""
        attempts = self.attempts

        async def ask() -> Any:
            attempts.spent_runs.append(attempts.usage)
            with self.slot_run(), attempts.running() as usage:
                return await agent.run(**{**call, "usage": usage})

        return ask

    async def finish(
        self, run: Any, answered: Any, cache_run: CacheRun | None, decided: tuple[Any, ...]
    ) -> tuple[Any, list[ModelMessage], Usage]:
        """After the last attempt: (the answer's value, its messages, the slot's bill)."""
        gate, wrap = self.gate, self.wrap
        if gate is not None and wrap is not None and not isinstance(answered, CutRun):
            gate.check(answered, wrap.calls)  # ended on calls waiting for a decision: SlotPaused
        if self.streamer is not None:
            await self.streamer.flush()
        value = decided[0] if decided else self.spec.to_value(answered.output)
        messages = redact(answered.all_messages())  # each image or file as a short placeholder
        if cache_run is not None:
            await store_answer(cache_run, run.new_messages())
        if self.meter is not None:
            self.meter.finished = True
        return value, messages, self.bill(run, cache_run.hits if cache_run is not None else 0)

    def bill(self, run: Any, hits: int) -> Usage:
        """What the slot spent: every attempt that got a response, its tool calls, and (resumed)
        what the paused run spent."""
        meter, attempts, wrap, paused_before = self.meter, self.attempts, self.wrap, self.paused_before
        if meter is None:
            usage = _usage(run.usage, hits)
            for spent_run in attempts.spent_runs:  # every attempt that got a response is billed
                usage = usage + _usage(spent_run)
        else:  # the meter saw every request of every attempt; tool calls are the runs' (earlier attempts' included)
            usage = _usage(run.usage, hits, meter, sum(r.tool_calls for r in attempts.spent_runs))
        if wrap is not None:  # pydantic-ai counts the calls that succeeded; those that ran and failed count too
            usage = replace(usage, tool_calls=usage.tool_calls + wrap.failed)
        if meter is not None and paused_before is not None:
            # the paused run's requests were metered in the process that paused: add them back
            usage = replace(
                usage,
                requests=usage.requests + paused_before[0],
                input_tokens=usage.input_tokens + paused_before[1],
                output_tokens=usage.output_tokens + paused_before[2],
                cache_read_tokens=usage.cache_read_tokens + paused_before[3],
                cache_write_tokens=usage.cache_write_tokens + paused_before[4],
            )
        return usage


def _uses_tools(env: SlotEnv, plan: SlotPlan, resolved: Resolved, mcp: Any) -> bool:
    """Whether the slot gathers with tools (its own or its MCP servers')."""
    control = resolved.control
    use_tools = (bool(control.get("use_tools")) and bool(env.toolbox.tools)) or mcp is not None
    if control.get("use_tools") and not env.toolbox.tools and mcp is None:
        raise TemplateRuntimeError(
            f"slot {plan.key!r} has use_tools=true but no tools were given; pass tools=[…] (or --tools FILE.py)"
        )
    return use_tools and control.get("tool_choice") != "none"  # SPEC §14: no gathering tools


async def _tools(
    env: SlotEnv, plan: SlotPlan, resolved: Resolved, mcp: Any, limits: Limits, meter: Any
) -> tuple[ToolWrap, Any]:
    """The tool state of a slot that gathers with tools, and its approval gate (or None)."""
    key, control = plan.key, resolved.control
    gate = None  # SPEC §12: the slot's approvals (run/approval/calls.py)
    if env.approval is not None:
        gate = env.approval.gate(key, control.get("approve"), env.join_guards, plan.slot.is_guard, mcp)
    readonly = (env.toolbox.readonly_names | mcp.readonly) if mcp else env.toolbox.readonly_names
    if gate is not None:
        readonly = readonly - gate.names  # approval wins over @readonly (and readOnlyHint)
    every = set(env.toolbox.names) | (set(mcp.names) if mcp else set())
    if not every <= readonly or (mcp is not None and not mcp.listed):
        await env.join_guards()
    last_request = limits.request_limit if control.get("max_iter") is not None else None
    if last_request is not None and gate is not None:
        last_request -= gate.steps  # a resumed agent run counts its steps from 0 again
    wrap = ToolWrap(
        slot=key, emit=env.emit, join_guards=env.join_guards,
        readonly_names=readonly,
        last_request=last_request,
        timeout=_tool_timeout(env.tool_timeout, control.get("tool_timeout"), key),
        max_result=env.max_tool_result,
        approval=gate.names if gate is not None else frozenset(),
        defer=gate.handle if gate is not None else None,
        budget=slot_budget(control.get("budget"), env.tool_limits, meter, key),
        tracing=env.tracing,
        effects=env.effects,
    )
    if gate is not None:
        gate.restore_calls(wrap)
        gate.unsettled = env.effects is not None and env.effects.journal.unsettled()
    return wrap, gate


async def _ask_person(
    env: SlotEnv, key: str, answered: Any, attempts: SlotAttempts, measured: float, spec: OutputSpec,
    resolved: Resolved,
) -> Any:
    """escalate=approve: the person's answer (or the run pauses for one)."""
    value = spec.to_value(answered.output)
    choices = resolved.positional if resolved.positional and not spec.is_text and "enum" in spec.answer_schema_json else ()

    def paused(request: Any) -> PausedSlot:
        usage = functools.reduce(operator.add, [*attempts.spent_runs, attempts.usage])
        return PausedSlot(key, answered.all_messages(), usage, [], [], [(request, [])], asked=1)

    decision = await answer_approval.ask_person(env.approval, key, value, measured, choices, env.join_guards, paused)
    return answer_approval.decided_value(decision, value, spec, key, choices)


def _decided_answer(plan: SlotPlan, resolved: Resolved, spec: OutputSpec, paused: PausedSlot, decision: Any) -> SlotResult:
    """A slot resumed with the person's decision on its less confident answer: no model call."""
    request = paused.requests[0][0]
    kept = json.dumps(request.arguments["answer"]) if decision is True else decision
    value = answer_approval.decided_value(kept, None, spec, plan.key, request.arguments.get("choices", ()))
    spent = paused.usage
    return SlotResult(
        key=plan.key, type=plan.slot.type_name, output=value, messages=tuple(redact(paused.messages)),
        usage=Usage(spent.requests, 0, spent.input_tokens or 0, spent.output_tokens or 0),
        confidence=request.arguments["confidence"], response_schema=schema_of(spec.output_type),
    )


def schema_of(output_type: Any) -> dict[str, Any] | None:
    try:
        hash(output_type)
    except TypeError:
        return _schema_of.__wrapped__(output_type)
    return _schema_of(output_type)


@functools.lru_cache(maxsize=256)
def _schema_of(output_type: Any) -> dict[str, Any] | None:
    """The JSON schema of an answer's type (0.x's `SlotResult.response_schema`), once per type."""
    from pydantic import TypeAdapter

    try:
        schema: dict[str, Any] = TypeAdapter(output_type).json_schema()
    except Exception:  # noqa: BLE001 - a type pydantic cannot describe has no schema to show
        return None
    return schema


async def _mcp_tools(env: SlotEnv, slot: str, control: Mapping[str, Any]) -> Any:
    """The slot's MCP tools (struckdown.mcp_tools.SlotTools), or None: no MCP here."""
    if env.mcp is None and "mcp" not in control:
        return None
    from ..tools.mcp import tools_for_slot

    return await tools_for_slot(env.mcp, slot, control)


def _streams(model: Any) -> bool:
    """Whether the slot's request may stream; a model that cannot (a FunctionModel without a
    `stream_function`) gets a plain request and one warning per model, and its whole answer
    is shown when it arrives."""
    from ..models import can_stream, model_label

    if can_stream(model):
        return True
    from ..notices import warn

    warn(f"model {model_label(model)} cannot stream (a FunctionModel without stream_function=): its answers arrive whole")
    return False


def _tool_timeout(ceiling: float | None, asked: float | None, slot: str) -> float | None:
    """The host's tool timeout, lowered (never raised) by the slot's `tool_timeout=`."""
    if asked is None:
        return ceiling
    if ceiling is not None and asked > ceiling:
        from ..log import logger
        from ..notices import warn

        message = f"template asked for tool_timeout={asked:g} but the caller's ceiling is {ceiling:g}; using {ceiling:g}"
        logger.warning("slot %s: %s", slot, message)
        warn(message)
        return ceiling
    return asked


def _limits(env: SlotEnv, plan: SlotPlan, resolved: Resolved) -> Limits:
    """The plan's limits when the run's ceiling is the one the plan was clamped
    against; clamped afresh otherwise (and for `{{ }}`-valued max_iter/max_calls).
    Asking above the ceiling warns at every run."""
    control = resolved.control
    if env.limits is env.environment.limits and not plan.dynamic:
        if plan.asks_above_ceiling:
            clamp_limits(env.limits, control.get("max_iter"), control.get("max_calls"), plan.key)
        return plan.limits
    return clamp_limits(env.limits, control.get("max_iter"), control.get("max_calls"), plan.key)


def _cache_run(cache: Any, model: Any, spec: OutputSpec) -> CacheRun:
    from .._version import __version__
    from ..models import endpoint_of, model_label

    return CacheRun(cache, endpoint_of(model), model_label(model), spec.answer_schema, __version__)

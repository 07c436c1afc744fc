"""What the runs of one Environment reuse: agents, tool boxes, text-output wrappers.

pydantic-ai builds an agent's output schema and tool schemas once and resolves
its model once; building an agent per slot run would redo that every time. The
keys are identities of long-lived, cached objects (output types from the type
registry's cache, resolved models, tool boxes), pinned while held so an id is
never reused for another object.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from pydantic_ai import Agent, ModelRetry
from pydantic_ai.output import TextOutput

from ..types import OutputSpec
from .tools import ToolBox, WrapSlotTools

_MAX_AGENTS = 4096
_MAX_TOOLBOXES = 256
_MAX_TEXT_OUTPUTS = 1024


V = TypeVar("V")


class _ByIdentity(Generic[V]):
    """One value per object, made on first use, keyed by the object's identity and
    pinned while held (so an id is never taken for another object's)."""

    __slots__ = ("_held", "_limit", "_lock")

    def __init__(self, limit: int, lock: threading.Lock) -> None:
        self._held: dict[int, tuple[Any, V]] = {}
        self._limit = limit
        self._lock = lock

    def get(self, key: Any, make: Callable[[Any], V]) -> V:
        held = self._held.get(id(key))
        if held is not None and held[0] is key:
            return held[1]
        value = make(key)
        with self._lock:
            if len(self._held) >= self._limit:
                self._held.clear()
            self._held[id(key)] = (key, value)
        return value


class EngineCaches:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._agents: dict[tuple[int, int, int], tuple[Agent[Any, Any], tuple[Any, ...]]] = {}
        self._toolboxes: dict[tuple[int, ...], ToolBox] = {}
        self._text_outputs: _ByIdentity[Any] = _ByIdentity(_MAX_TEXT_OUTPUTS, self._lock)
        self._deferrable: _ByIdentity[list[Any]] = _ByIdentity(_MAX_TEXT_OUTPUTS, self._lock)
        self._native_outputs: _ByIdentity[Any] = _ByIdentity(_MAX_TEXT_OUTPUTS, self._lock)
        self._prompted_outputs: _ByIdentity[Any] = _ByIdentity(_MAX_TEXT_OUTPUTS, self._lock)
        self._stacks: _ByIdentity[list[Any]] = _ByIdentity(_MAX_AGENTS, self._lock)
        self._settings: dict[tuple[int, int, int], tuple[tuple[Any, ...], Any]] = {}

    def agent_for(self, output_type: Any, model: Any = None, tools: ToolBox | None = None) -> Agent[Any, Any]:
        """One agent per (output type, model, tool box), reused by every run.

        Instructions, settings, limits and the per-slot tool wrapper stay per-run
        arguments, so an agent is safe to share between runs and threads.
        """
        key = (id(output_type), id(model), id(tools))
        held = self._agents.get(key)
        if held is not None:
            agent, pinned = held
            if pinned[0] is output_type and pinned[1] is model and pinned[2] is tools:
                return agent
        agent = Agent(
            model,
            output_type=output_type,
            tools=tools.tools if tools is not None else (),
            capabilities=[WrapSlotTools()] if tools is not None else None,
            name="struckdown",  # an unnamed agent inspects the caller's frames on every run
            defer_model_check=True,
            retries=2,
        )
        with self._lock:
            if len(self._agents) >= _MAX_AGENTS:
                self._agents.clear()
            self._agents[key] = (agent, (output_type, model, tools))
        return agent

    def toolbox(self, tools: Sequence[Any]) -> ToolBox:
        """One box per distinct tool list, by identity (a `pydantic_ai.Tool` is not
        hashable): a batch reuses the box, and with it the agent and the tools' schemas."""
        listed = tuple(tools)
        key = tuple(map(id, listed))
        cached = self._toolboxes.get(key)
        if cached is None or any(a is not b for a, b in zip(cached.tools, listed)):
            cached = ToolBox.build(listed)
            with self._lock:
                if len(self._toolboxes) >= _MAX_TOOLBOXES:
                    self._toolboxes.clear()
                self._toolboxes[key] = cached
        return cached

    def deferrable(self, output_type: Any) -> list[Any]:
        """The output type or `DeferredToolRequests`: what a slot whose calls may wait for
        approval asks for (SPEC §12). One list per type, so its agent is reused."""
        from pydantic_ai.tools import DeferredToolRequests

        return self._deferrable.get(output_type, lambda kind: [kind, DeferredToolRequests])

    def model_stack(self, model: Any, cached: bool, build: Callable[..., Any]) -> Any:
        """`build(model, cached=cached)`, the model's stack with or without the cache layer
        (`wrappers.model_stack`), kept per model."""
        stacks = self._stacks.get(model, lambda _: [None, None])
        stack = stacks[cached]
        if stack is None:
            stack = stacks[cached] = build(model, cached=cached)
        return stack

    def attempt_settings(self, plan: Any, model: Any, caller: Any, custom_type: Any, make: Callable[[], Any]) -> Any:
        """A static slot's model settings on `model` under the caller's `settings=` (and its
        custom type's registration, when it has one): `make()` once, then the same object
        (pydantic-ai merges it into new dicts, never changes it)."""
        key = (id(plan), id(model), id(caller))
        held = self._settings.get(key)
        if held is not None:
            pinned, made = held
            if pinned[0] is plan and pinned[1] is model and pinned[2] is caller and pinned[3] is custom_type:
                return made
        made = make()
        with self._lock:
            if len(self._settings) >= _MAX_AGENTS:
                self._settings.clear()
            self._settings[key] = ((plan, model, caller, custom_type), made)
        return made

    def content_output(self, output_type: Any, native: bool) -> Any:
        """The typed answer as JSON content (SPEC §27: its tokens carry logprobs); one per
        output type, so its agent is reused."""
        from .confidence import content_output

        held = self._native_outputs if native else self._prompted_outputs
        return held.get(output_type, lambda kind: content_output(kind, native))

    def text_output(self, spec: OutputSpec) -> Any:
        """Text with rules (pattern, lengths): a failed check goes back to the model."""
        if not spec.has_text_rules:
            return str
        return self._text_outputs.get(spec, _checked_text)


def _checked_text(spec: OutputSpec) -> Any:
    async def check(text: str) -> str:  # async: pydantic-ai would run a sync one in a thread
        try:
            return spec.check_text(text)
        except ValueError as exc:
            raise ModelRetry(str(exc)) from None

    return TextOutput(check)

"""Incremental re-runs (SPEC §25): a journaled run reuses every slot whose request is unchanged.

A run with a journal (`journal=`, `sd run --journal`, `sd batch -o`) records each slot's
answer under a **request key**: a hash of the exact request the slot would send (its
instructions, history and question, the model, the run's and the slot's settings and
options, the answer's schema, and for a slot with tools their names, descriptions and
code). Run again with the same journal after an edit and a slot whose key the journal holds
is answered from it, no request sent; the first slot whose key changed runs, and so does
everything after it in its conversation (its answer is their history) and every segment
that reads its answer. `rerun_from=SLOT` runs that slot and every slot after it in the
template whatever their keys. Write tools' finished calls replay from the journal anyway
(`run/durable/effects.py`); read-only tools run again when their slot does.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ...results import RerunReport

if TYPE_CHECKING:
    from ...plan import Program, SlotPlan
    from ...results import SlotResult
    from ...types import OutputSpec
    from ..resolve import Resolved
    from ..slot import SlotEnv
    from .effects import EffectJournal

#: Bumped when what the key covers changes (old answers then simply run again).
KEY_VERSION = 2


def check_rerun_from(program: Program, name: str | None, journal: Any) -> None:
    """`rerun_from=` names a slot of the template, in a run with a journal (before any request)."""
    if name is None:
        return
    if name not in program.keys:
        import difflib

        close = difflib.get_close_matches(name, program.keys, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        known = ", ".join(program.keys) or "none"
        raise ValueError(f"rerun_from={name!r} is not a slot of this template (its slots: {known}){hint}")
    if journal is None:
        raise ValueError(
            f"rerun_from={name!r} re-runs part of a journaled run: give journal= (--journal FILE) too; "
            "without a journal every slot runs anyway"
        )


def _content(value: Any, digest: Any) -> None:
    """A message part's content into the digest: text, or each media item's bytes or URL."""
    if isinstance(value, str):
        digest.update(b"s" + value.encode("utf-8", "surrogatepass") + b"\0")
        return
    for item in value if isinstance(value, (list, tuple)) else (value,):
        if isinstance(item, str):
            digest.update(b"s" + item.encode("utf-8", "surrogatepass") + b"\0")
        else:
            data = getattr(item, "data", None)
            digest.update(data if isinstance(data, bytes) else str(getattr(item, "url", item)).encode())
            digest.update(b"\0" + str(getattr(item, "media_type", "")).encode() + b"\0")


def _messages(messages: Sequence[Any], digest: Any) -> None:
    """The turns as the model reads them (kind, part kinds, content), without timestamps."""
    for message in messages:
        digest.update(type(message).__name__.encode() + b"\0")
        for part in message.parts:
            digest.update(type(part).__name__.encode() + b"\0")
            _content(getattr(part, "content", ""), digest)


_TOOLS: dict[int, tuple[Any, str]] = {}


def tools_identity(tools: Sequence[Any]) -> str:
    """The tools a slot may call: each one's name, description and code as a
    `FunctionModel`'s key has it (models/function_key.py: bytecode, constants, defaults,
    and the functions and plain values it reads from its closure and module, transitively),
    so an edit to a helper or a module constant the tool uses changes it. Once per tool set."""
    held = _TOOLS.get(id(tools))
    if held is not None and held[0] is tools:
        return held[1]
    from ...models.function_key import function_digest

    digest = hashlib.sha256()
    for tool in tools:
        function = getattr(tool, "function", tool)
        digest.update(f"{getattr(tool, 'name', '')}\0{getattr(tool, 'description', '')}\0".encode())
        digest.update(function_digest(function).encode() + b"\0")
    identity = digest.hexdigest()
    if len(_TOOLS) > 64:
        _TOOLS.clear()  # tool sets come and go (a server's requests): hold a few
    _TOOLS[id(tools)] = (tools, identity)
    return identity


def model_identity(model: Any) -> list[Any]:
    """Who answers, not only by name (SPEC §29): the model's class, name, system and
    endpoint, and for a scripted `FunctionModel` the code of its functions (model_label)."""
    from ...models import model_label

    base_url = getattr(model, "base_url", None)
    try:
        base = str(base_url) if base_url is not None else None
    except Exception:  # noqa: BLE001 - a provider without a URL to show
        base = None
    return [model_label(model), f"{type(model).__module__}.{type(model).__qualname__}",
            getattr(model, "model_name", None), getattr(model, "system", None), base]


def _callable_identity(value: Any) -> Any:
    """True/False/None as they are; a function (an approval decider) by its code."""
    if value is None or isinstance(value, bool | str):
        return value
    from ...models.function_key import function_digest

    return "fn:" + function_digest(value)


def _deps_identity(deps: Any) -> Any:
    """`deps` as JSON when it is data, else by its type (and a function's code)."""
    if deps is None:
        return None
    try:
        return json.loads(json.dumps(deps, sort_keys=True, default=str))
    except (TypeError, ValueError):
        return f"{type(deps).__module__}.{type(deps).__qualname__}"


def request_key(
    env: SlotEnv, plan: SlotPlan, resolved: Resolved, spec: OutputSpec,
    history: Sequence[Any], prompt: str | None, instructions: str | None,
) -> str | None:
    """The hash of the request a slot would send; None: a slot never reused (MCP tools,
    whose code is elsewhere)."""
    control = resolved.control
    if control.get("use_tools", "mcp" in control) and (env.mcp is not None or "mcp" in control):
        return None  # the slot may call MCP tools
    model = env.resolve_model(resolved.settings.get("model"))
    uses_tools = bool(control.get("use_tools")) and bool(env.toolbox.tools) and control.get("tool_choice") != "none"
    fallback = control.get("fallback")
    fallbacks = [str(fallback)] if fallback is not None else [
        model_identity(m) if not isinstance(m, str) else m
        for m in (env.resilience.fallback if env.resilience is not None else ())
    ]
    approval = env.approval
    head = [
        KEY_VERSION, plan.key, plan.slot.type_name, plan.slot.quantifier, model_identity(model), fallbacks,
        env.settings, _deps_identity(env.deps),
        resolved.positional, resolved.type_options, resolved.settings, control, spec.answer_schema_json,
        instructions, prompt, tools_identity(env.toolbox.tools) if uses_tools else None,
        # who decides the calls that need approval: a denial the user has since changed re-runs the slot
        _callable_identity(approval.decide if approval is not None else None) if uses_tools else None,
    ]
    digest = hashlib.sha256(json.dumps(head, sort_keys=True, default=repr).encode("utf-8", "surrogatepass"))
    from ...media.scope import MARK

    if prompt and MARK in prompt:  # images placed in the question: their bytes
        from ...media.turns import user_content

        _content(user_content(prompt), digest)
    _messages(history, digest)
    return digest.hexdigest()[:32]


@dataclass
class Pending:
    """A slot about to run: its request key (None: not recorded) and whether a change before it forces it."""

    slot: str
    key: str | None
    forced: bool


@dataclass
class Reruns:
    """One journaled run's reuse: which slots were answered from the journal, which ran."""

    journal: EffectJournal | None  # None: a run without a journal (nothing reused, nothing recorded)
    row: int | None
    forced: frozenset[str] = frozenset()  # rerun_from= and every slot after it
    reused: list[str] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)
    dirty: set[int] = field(default_factory=set)  # segments whose conversation changed

    @classmethod
    def off(cls) -> Reruns:
        return cls(None, None)

    @classmethod
    def start(
        cls, journal: EffectJournal, row: int | None, program: Program, rerun_from: str | None, resume: Any
    ) -> Reruns:
        """`resume`: the ResumePoint of a resumed run, whose paused slots go on with their decisions."""
        keys = program.keys
        forced = set(keys[keys.index(rerun_from):]) if rerun_from is not None else set()
        forced.update(resume.paused if resume is not None else ())
        return cls(journal, row, frozenset(forced))

    def enter(self, segment: int, reads: Sequence[str]) -> None:
        """A segment that reads an answer that ran again runs again too."""
        if any(key in self.ran for key in reads):
            self.dirty.add(segment)

    def changed(self, segment: int) -> bool:
        return segment in self.dirty

    def after(self, segment: int, results: Iterable[SlotResult]) -> None:
        """A slot that ran (not reused) changes the conversation after it."""
        if self.journal is not None and not all(result.reused for result in results):
            self.dirty.add(segment)

    def lookup(
        self, env: SlotEnv, plan: SlotPlan, resolved: Resolved, spec: OutputSpec,
        history: Sequence[Any], prompt: str | None, instructions: str | None, changed: bool,
    ) -> tuple[Pending, SlotResult | None]:
        """The slot's answer from the journal when its request is unchanged and nothing before
        it ran again; else (None) what `record` needs once it has run."""
        slot = plan.key
        if self.journal is None:
            return Pending(slot, None, True), None
        key = request_key(env, plan, resolved, spec, history, prompt, instructions)
        pending = Pending(slot, key, changed or slot in self.forced)
        if key is None or pending.forced:
            return pending, None
        at = self.journal.answers.get((self.row, slot, key))
        stored = self.journal.stored_answer(at) if at is not None else None
        if stored is None:
            return pending, None
        from ...approval.state import restore_slot
        from ...results import Usage

        try:
            result = restore_slot(stored, spec)
        except (ValueError, KeyError, TypeError):
            return pending, None  # no longer readable as this slot's answer: it runs
        if self._undecided(slot, result):
            return pending, None  # SPEC §29: built on a call whose outcome nobody decided yet: it runs (and asks)
        self.reused.append(slot)
        return pending, replace(result, usage=Usage(), elapsed_ms=0.0, cached=False, reused=True)

    def _undecided(self, slot: str, result: SlotResult) -> bool:
        """Whether the answer's slot called a write tool whose call the journal still holds
        as started (cut off, and denied or never decided since)."""
        from .effects import effect_id

        journal = self.journal
        assert journal is not None
        if not journal.open:
            return False
        calls = [(call.tool_name, call.arguments) for call in result.tool_calls]
        for message in result.messages:  # a denied call never reached the tool: it is in the messages only
            for part in getattr(message, "parts", ()):
                if getattr(part, "part_kind", "") == "tool-call":
                    try:
                        calls.append((part.tool_name, part.args_as_dict()))
                    except (ValueError, TypeError, AssertionError):
                        continue
        return any(effect_id(journal.job, self.row, slot, name, arguments) in journal.open for name, arguments in calls)

    async def still_same(self, env: SlotEnv, slot: str, result: SlotResult) -> bool:
        """SPEC §29: the calls a reused slot made to `@readonly` tools run again and are
        compared with what the journal holds; a different result (or a tool that cannot be
        called outside a run, or fails) means the slot runs again (it is then not reused)."""
        import functools
        import inspect

        import anyio
        from pydantic_core import to_jsonable_python

        box = env.toolbox
        same = True
        for call in result.tool_calls:
            if call.tool_name not in box.readonly_names or call.tool_name not in box.names:
                continue
            tool = box.tools[box.names.index(call.tool_name)]
            function = getattr(tool, "function", tool)
            if getattr(tool, "takes_ctx", False) or not callable(function):
                same = False
                break
            try:
                if inspect.iscoroutinefunction(function):
                    output = await function(**call.arguments)
                else:
                    output = await anyio.to_thread.run_sync(functools.partial(function, **call.arguments))
                same = to_jsonable_python(output, fallback=repr) == to_jsonable_python(call.output, fallback=repr)
            except Exception:  # noqa: BLE001 - a tool that fails now: the slot runs and the model reads it
                same = False
            if not same:
                break
        if not same and slot in self.reused:
            self.reused.remove(slot)
        return same

    def record(self, pending: Pending, result: SlotResult) -> None:
        """A slot that ran: its answer goes to the journal under its request key."""
        if self.journal is None:
            return
        self.ran.append(pending.slot)
        if pending.key is None:
            return
        from ...approval.state import slot_json

        self.journal.answer(self.row, pending.slot, pending.key, slot_json(result))

    def report(self) -> RerunReport | None:
        """None without a journal, and on a first run (the journal held no answer of this row)."""
        if self.journal is None or self.row not in self.journal.answered_rows:
            return None
        previous: dict[str, Any] = {}
        for slot in self.ran:
            at = self.journal.latest.get((self.row, slot))
            stored = self.journal.stored_answer(at) if at is not None else None
            if stored is not None:
                previous[slot] = stored.get("output")
        return RerunReport(tuple(self.reused), tuple(self.ran), previous)

"""The pause of a run that waits for approval decisions, as plain JSON (SPEC §12).

`Paused.state` is built here from what the engine holds when a run pauses (the slots that
finished, the slots that paused with their conversation so far, the context), and
`read_state` turns such a dict, plus the caller's decisions, back into a `ResumePoint` the
engine continues from. Everything is checked before any model call: a state of another
format, a template that is not the paused one, a decision that misses or invents a
request id; each is a `ValueError` that names what differs.

Nothing here imports the engine; pydantic-ai's message codec is imported when a state is
built or read.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from ..codec import jsonable
from ..results import SlotResult, ToolCall, Usage

if TYPE_CHECKING:
    from ..types import OutputSpec

#: The `format` of every state this version writes and reads.
STATE_FORMAT = "struckdown.paused/1"

#: What the model receives for a call denied with `False`.
DENIED = "The user denied this call."



@dataclass(frozen=True)
class Happened:
    """SPEC §29: the decision "it happened" on a call whose outcome is unknown (it started
    in an earlier run and never finished): the call does not run again, the model reads
    `result` as its result, and the journal records it as done. In a state's decisions
    (JSON) it is `{"happened": result}`."""

    result: Any = "It happened (its result was not recorded)."


Decision = bool | str | Happened
#: The `tool_name` of a request for a person to pick a slot's answer (`escalate=approve`, SPEC §27).
ANSWER_TOOL = "@answer"


@dataclass(frozen=True)
class ApprovalRequest:
    """One tool call waiting for a decision. `id` is unique in the run (`<slot>.<n>`),
    so a decision names it: `{request.id: True | False | "reason"}`."""

    id: str
    slot: str
    tool_name: str
    arguments: dict[str, Any]
    #: SPEC §25: "unknown" for a call a journal holds as started and never finished (the
    #: process died in it): approving runs it again, denying leaves it as it is
    outcome: str | None = None

    @property
    def kind(self) -> str:
        """`unknown_outcome` (answered happened / did not happen / deny), `answer`
        (escalate=approve, SPEC §27) or `tool_call`."""
        if self.outcome == "unknown":
            return "unknown_outcome"
        return "answer" if self.tool_name == ANSWER_TOOL else "tool_call"

    def label(self) -> str:
        """`issue_refund(order_id="A1", amount=30)`: how a person reads the call;
        `outcome unknown: did refund(order="R7") happen?` for an unknown outcome."""
        args = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False, default=str)}" for k, v in self.arguments.items())
        if self.outcome == "unknown":
            return f"outcome unknown: did {self.tool_name}({args}) happen?"
        return f"{self.tool_name}({args})"

    def to_dict(self) -> dict[str, Any]:
        shown = {"id": self.id, "slot": self.slot, "tool_name": self.tool_name, "arguments": jsonable(self.arguments)}
        return {**shown, "outcome": self.outcome, "kind": self.kind} if self.outcome is not None else shown

    def call_hash(self) -> str:
        """What a decision on this request binds: the tool's name and its exact arguments."""
        from .signing import call_hash

        return call_hash(self.tool_name, jsonable(self.arguments))


def check_decision(value: Any, request_id: str, outcome: str | None = None) -> Decision:
    """A decision as the SPEC has it: True, False or the text the model receives; for a
    call whose outcome is unknown also `Happened(result)` (`{"happened": result}` in JSON)."""
    if isinstance(value, (bool, str)):
        return value
    if isinstance(value, Mapping) and set(value) == {"happened"}:
        value = Happened(value["happened"])
    if isinstance(value, Happened):
        if outcome != "unknown":
            raise ValueError(
                f"the decision for {request_id!r} says the call happened, but its outcome is not unknown: "
                "decide with True (run the call), False or a string (deny it)"
            )
        return value
    extra = " or Happened(result) / {\"happened\": result} (it happened: do not run it)" if outcome == "unknown" else ""
    raise ValueError(
        f"the decision for {request_id!r} is {value!r}; decide with True (run the call), "
        f"False (deny it) or a string (deny it, and the model reads that text){extra}"
    )


def answer_decided(decision: Decision) -> tuple[bool, str | None]:
    """(approved, message) of an `@answer` decision's event: True keeps the model's answer
    (no message); a string is the person's answer (the message); False rejects it."""
    if decision is True:
        return True, None
    if decision is False or not str(decision).strip():
        return False, "rejected"
    return True, str(decision)


def denial_message(decision: Decision) -> str | None:
    """None for an approval (and for "it happened"); the text the model receives for a denial."""
    if decision is True or isinstance(decision, Happened):
        return None
    if decision is False or not str(decision).strip():
        return DENIED
    return str(decision)


@dataclass
class PausedSlot:
    """A slot whose agent run stopped at calls that need a decision: what its resume needs
    (its conversation so far, the usage and tool calls spent, the decisions it holds for
    identical calls, and the open requests with the pydantic-ai tool call ids each covers)."""

    slot: str
    messages: list[Any]  # pydantic-ai ModelMessage objects, the last one holds the calls' response
    usage: Any  # pydantic-ai RunUsage of the slot so far
    tool_calls: list[ToolCall]
    decided: list[tuple[str, dict[str, Any], Decision]]  # (tool, arguments, decision) held for identical calls
    requests: list[tuple[ApprovalRequest, list[str]]]  # each open request and its tool_call_ids
    asked: int = 0  # requests this slot has made (the next id is `<slot>.<asked + 1>`)


@dataclass
class ResumePoint:
    """A checked state with the caller's decisions: where `resume` continues."""

    template: str
    template_path: str | None
    context: dict[str, Any]
    finished: dict[str, dict[str, Any]]  # slot key → its stored SlotResult (JSON form)
    actions: dict[str, list[Any]]  # keyless actions that ran: position → their values in order
    paused: dict[str, PausedSlot]
    decisions: dict[str, Decision]
    extra: dict[str, Any] = field(default_factory=dict)  # what the host stored beside the run (the CLI's flags)

    def requests(self) -> list[ApprovalRequest]:
        return [request for slot in self.paused.values() for request, _ in slot.requests]


# -- building a state ----------------------------------------------------------------
def build_state(
    *,
    template: str,
    template_path: str | None,
    included_files: Sequence[tuple[str, int]],
    context: Mapping[str, Any],
    finished: Mapping[str, SlotResult],
    actions: Mapping[str, list[Any]],
    paused: Sequence[PausedSlot],
    tools: Sequence[str],
    options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    from .._version import __version__
    from .signing import sign_state

    return sign_state({
        "format": STATE_FORMAT,
        "struckdown": __version__,
        "template": template,
        "template_path": os.path.abspath(template_path) if template_path else None,
        "includes": {name: _file_hash(name) for name, _ in included_files},
        "context": jsonable(dict(context)),
        "tools": sorted(tools),
        "finished": [_slot_to_json(result) for result in finished.values()],
        "actions": {where: jsonable(values) for where, values in actions.items()},
        "paused": [_paused_to_json(slot) for slot in paused],
        "requests": [{**request.to_dict(), "call_hash": request.call_hash()} for slot in paused for request, _ in slot.requests],
        "options": dict(options or {}),  # the recorded run options, plain (run_options.OPTIONS[…].recorded)
        "extra": {},
    })


def _file_hash(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return None


def _messages_to_json(messages: Sequence[Any]) -> list[Any]:
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    dumped: list[Any] = ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")
    return dumped


def _scalars(value: Any, skip: frozenset[str]) -> dict[str, Any]:
    """The plain fields of a dataclass (what other features add to it travels too)."""
    return {
        f.name: getattr(value, f.name)
        for f in fields(value)
        if f.name not in skip and isinstance(getattr(value, f.name), (str, int, float, bool, type(None)))
    }


def _call_to_json(call: ToolCall) -> dict[str, Any]:
    return {**_scalars(call, frozenset({"arguments", "output"})), "arguments": jsonable(call.arguments),
            "output": jsonable(call.output)}


_SLOT_SPECIAL = frozenset({"output", "messages", "usage", "tool_calls"})


def _slot_to_json(result: SlotResult) -> dict[str, Any]:
    return {
        **_scalars(result, _SLOT_SPECIAL),
        "output": jsonable(result.output),
        "usage": _scalars(result.usage, frozenset()),
        "tool_calls": [_call_to_json(c) for c in result.tool_calls],
        "messages": _messages_to_json(result.messages),
    }


def slot_json(result: SlotResult) -> str:
    """A finished slot as one JSON text (the journal's answer lines, run/durable/rerun.py), in one
    pass of pydantic's serializer (messages as pydantic-ai's codec writes them: bytes in
    base64). `restore_slot` reads it back."""
    from pydantic_core import to_json

    plain: dict[str, Any] = {name: value for name in _scalar_fields()
                             if isinstance(value := getattr(result, name), (str, int, float, bool, type(None)))}
    plain.update(output=jsonable(result.output), usage=result.usage, tool_calls=result.tool_calls,
                 messages=result.messages)
    try:
        return to_json(plain, bytes_mode="base64", fallback=str).decode("utf-8", "surrogatepass")
    except ValueError:  # a lone surrogate (pydantic's serializer refuses it): JSON's \udfff escape keeps it
        return json.dumps(_slot_to_json(result), default=str)


@functools.cache
def _scalar_fields() -> tuple[str, ...]:
    return tuple(f.name for f in fields(SlotResult) if f.name not in _SLOT_SPECIAL and f.name != "response_schema")


def _paused_to_json(slot: PausedSlot) -> dict[str, Any]:
    from dataclasses import asdict

    return {
        "slot": slot.slot,
        "messages": _messages_to_json(slot.messages),
        "usage": jsonable(asdict(slot.usage)),
        "tool_calls": [_call_to_json(c) for c in slot.tool_calls],
        "decided": [{"tool_name": t, "arguments": jsonable(a), "decision": _decision_json(d)} for t, a, d in slot.decided],
        "requests": [{"id": r.id, "tool_call_ids": ids} for r, ids in slot.requests],
        "asked": slot.asked,
    }


# -- reading a state -------------------------------------------------------------------
def read_state(
    state: Mapping[str, Any] | str,
    decisions: Mapping[str, Any],
    *,
    template: str | None = None,
    tools: Sequence[str] = (),
    servers: Sequence[str] = (),
) -> ResumePoint:
    """Check a state and the decisions for it; every problem is a ValueError naming it.
    A paused call's tool is one of `tools`, or an MCP tool `<server>_<tool>` of one of the
    run's `servers` (whose tools are listed when the paused slot runs again)."""
    if isinstance(state, str):
        try:
            state = json.loads(state)
        except json.JSONDecodeError as exc:
            raise ValueError(f"the paused state is not JSON: {exc}") from None
    if not isinstance(state, Mapping) or state.get("format") != STATE_FORMAT:
        found = state.get("format") if isinstance(state, Mapping) else type(state).__name__
        raise ValueError(f"not a paused struckdown run (format {found!r}, expected {STATE_FORMAT!r})")
    from .signing import verify_state

    verify_state(state)  # before anything in it is used: an edited state names what differs
    try:
        text = str(state["template"])
        path = state.get("template_path")
        _same_template(text, path, template, state.get("includes") or {})
        paused = [_paused_from_json(item, state["requests"]) for item in state["paused"]]
        point = ResumePoint(
            template=text,
            template_path=path,
            context=dict(state.get("context") or {}),
            finished={item["key"]: item for item in state["finished"]},
            actions={k: list(v) for k, v in (state.get("actions") or {}).items()},
            paused={slot.slot: slot for slot in paused},
            decisions={},
            extra=dict(state.get("extra") or {}),
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"the paused state is incomplete or damaged ({type(exc).__name__}: {exc})") from None
    point.decisions = _check_decisions(point.requests(), decisions)
    prefixes = tuple(f"{server}_" for server in servers)
    missing = sorted(
        name for name in {r.tool_name for r in point.requests()} - set(tools) - {ANSWER_TOOL}
        if not name.startswith(prefixes)
    )
    if missing:
        raise ValueError(
            f"the paused calls use tool{'s' if len(missing) > 1 else ''} {', '.join(missing)}, "
            f"which {'are' if len(missing) > 1 else 'is'} not among this run's tools; pass tools=[…] "
            "(and mcp=… for an MCP tool) as the paused run had them"
        )
    return point


def _same_template(text: str, path: str | None, given: str | None, includes: Mapping[str, str | None]) -> None:
    if given is not None and given != text:
        raise ValueError(f"template= is not the template the run paused with: {_first_difference(text, given)}")
    if path is not None and os.path.isfile(path):
        try:
            with open(path, encoding="utf-8") as handle:
                now = handle.read()
        except (OSError, UnicodeDecodeError):
            now = text
        if now != text:
            raise ValueError(f"{path} changed since the run paused: {_first_difference(text, now)}")
    for name, digest in includes.items():
        if digest is not None and _file_hash(name) != digest:
            raise ValueError(f"the included file {name} changed since the run paused")


def _first_difference(old: str, new: str) -> str:
    old_lines, new_lines = old.splitlines(), new.splitlines()
    for number, (a, b) in enumerate(zip(old_lines, new_lines), start=1):
        if a != b:
            return f"line {number} was {a!r}, now {b!r}"
    if len(old_lines) != len(new_lines):
        return f"it had {len(old_lines)} lines, now {len(new_lines)}"
    return "the texts differ in line endings or trailing whitespace"


def _paused_from_json(item: Mapping[str, Any], listed: Sequence[Mapping[str, Any]]) -> PausedSlot:
    from pydantic_ai.messages import ModelMessagesTypeAdapter
    from pydantic_ai.usage import RunUsage

    by_id = {r["id"]: r for r in listed}
    try:
        messages = ModelMessagesTypeAdapter.validate_python(item["messages"])
    except Exception as exc:  # noqa: BLE001 - pydantic's ValidationError, shown as one line
        raise ValueError(f"the paused state's messages of slot {item.get('slot')!r} cannot be read: {exc}") from None
    known = {f.name for f in fields(RunUsage)}
    calls = _pending_calls(messages)
    requests = []
    for entry in item["requests"]:
        shown = by_id[entry["id"]]
        request = ApprovalRequest(
            entry["id"], item["slot"], shown["tool_name"], dict(shown["arguments"]), shown.get("outcome")
        )
        ids = list(entry["tool_call_ids"])
        _check_binding(request, shown.get("call_hash"), ids, calls)
        requests.append((request, ids))
    return PausedSlot(
        slot=item["slot"],
        messages=list(messages),
        usage=RunUsage(**{k: _usage_value(k, v) for k, v in item["usage"].items() if k in known}),
        tool_calls=[_call_from_json(c) for c in item["tool_calls"]],
        decided=[
            (d["tool_name"], dict(d["arguments"]), check_decision(d["decision"], "decided", "unknown"))
            for d in item["decided"]
        ],
        requests=requests,
        asked=int(item.get("asked", len(requests))),
    )


def _pending_calls(messages: Sequence[Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """The tool calls of the paused slot's last response, by id: the calls that run when approved."""
    from pydantic_ai.messages import ModelResponse, ToolCallPart

    last = next((m for m in reversed(messages) if isinstance(m, ModelResponse)), None)
    if last is None:
        return {}
    return {p.tool_call_id: (p.tool_name, p.args_as_dict()) for p in last.parts if isinstance(p, ToolCallPart)}


def _check_binding(
    request: ApprovalRequest, stored: Any, ids: Sequence[str], calls: Mapping[str, tuple[str, dict[str, Any]]]
) -> None:
    """The call a person is shown (the request) is the call that runs (each tool call it
    covers), and both are the call the state bound when it paused (`call_hash`)."""
    from .signing import call_hash

    bound = request.call_hash()
    if stored != bound:
        raise ValueError(f"request {request.id!r} ({request.label()}) is not the call the run paused with (its hash differs)")
    for tool_call_id in ids:
        found = calls.get(tool_call_id)
        if found is None or call_hash(found[0], jsonable(found[1])) != bound:
            runs = "nothing" if found is None else ApprovalRequest(request.id, request.slot, *found).label()
            raise ValueError(f"request {request.id!r} shows {request.label()}, but the call it would run is {runs}")


def _usage_value(name: str, value: Any) -> Any:
    """JSON keeps a usage's cost (a Decimal) as text: read it back as a Decimal."""
    if name == "cost" and value is not None:
        from decimal import Decimal

        return Decimal(str(value))
    return value


def _check_decisions(requests: Sequence[ApprovalRequest], decisions: Mapping[str, Any]) -> dict[str, Decision]:
    if not isinstance(decisions, Mapping):
        raise ValueError(f"decisions must be a mapping {{request_id: True | False | 'reason'}}, not {type(decisions).__name__}")
    wanted = {r.id: r for r in requests}
    unknown = sorted(set(decisions) - set(wanted))
    missing = [r for r in requests if r.id not in decisions]
    if unknown or missing:
        parts = []
        if unknown:
            parts.append(f"no paused request has the id{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}")
        if missing:
            parts.append("no decision for " + ", ".join(f"{r.id!r} ({r.label()})" for r in missing))
        listed = ", ".join(f"{r.id!r} ({r.label()})" for r in requests)
        raise ValueError(f"{'; '.join(parts)}; the paused requests are: {listed}")
    return {key: check_decision(decisions[key], key, wanted[key].outcome) for key in wanted}


def _decision_json(decision: Decision) -> Any:
    return {"happened": jsonable(decision.result)} if isinstance(decision, Happened) else decision


def _call_from_json(item: Mapping[str, Any]) -> ToolCall:
    known = {f.name for f in fields(ToolCall)}
    return ToolCall(**{k: v for k, v in item.items() if k in known})


def restore_slot(stored: Mapping[str, Any], spec: OutputSpec | None) -> SlotResult:
    """A slot that finished before the pause, as it was (its output turned back into its
    type through the slot's output spec: dates are dates again)."""
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    output = stored["output"]
    if spec is not None and not spec.is_text:
        try:
            output = spec.to_value(spec.output_type.model_validate_json(json.dumps({"response": output})))
        except Exception as exc:  # noqa: BLE001 - the type changed since the pause
            raise ValueError(f"slot {stored['key']!r}: its stored answer no longer fits its type: {exc}") from None
    known = {f.name for f in fields(SlotResult)}
    usage_fields = {f.name for f in fields(Usage)}
    plain = {k: v for k, v in stored.items() if k in known and k not in _SLOT_SPECIAL}
    return SlotResult(
        **plain,
        output=output,
        messages=tuple(ModelMessagesTypeAdapter.validate_python(stored.get("messages") or [])),
        usage=Usage(**{k: v for k, v in stored["usage"].items() if k in usage_fields}),
        tool_calls=tuple(_call_from_json(c) for c in stored.get("tool_calls") or ()),
    )

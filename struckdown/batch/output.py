"""A finished batch row as data: its journal line, and its row of the output table.

Shared by `sd batch` (which writes them as rows finish) and the playground's batch
(which keeps them in memory).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import describe_error
from .tables import columns_of


def journal_entry(index: int, outcome: Any, input_hash: str, template_hash: str) -> dict[str, Any]:
    """One journal line for a finished row (a Result, or the exception it failed with)."""
    entry: dict[str, Any] = {"index": index, "ok": False, "answers": {}, "error": None, "usage": {}, "halted": None}
    if isinstance(outcome, BaseException):
        entry.update(error=describe_error(outcome), usage=row_usage(outcome))  # a failed row's requests count too
        unknown = unknown_of(outcome)
        if unknown is not None:  # SPEC §29: neither ok nor failed, it waits for a decision
            entry.update(error=None, unknown={
                "effect": unknown.effect, "tool": unknown.tool_name, "arguments": unknown.arguments,
                "label": unknown.label(),
            })
        if not_run(outcome):
            entry["not_run"] = True  # the batch budget kept it from starting: --resume runs it
    else:
        halted = outcome.halted
        usage = outcome.usage.to_dict()
        if getattr(outcome.usage, "cost", None) is not None:  # what --head projects (prices known)
            usage.setdefault("cost", outcome.usage.cost)
        entry.update(answers=outcome.to_dict(), usage=usage, ok=halted is None)
        cached = sum(1 for slot in outcome.results.values() if getattr(slot, "cached", False))
        if cached:
            entry["cached"] = cached  # answers the response cache served (sd batch and the playground say so)
        denied = denied_calls(outcome)
        if denied:
            entry["denied"] = denied  # calls that needed approval and were denied (sd batch notes them)
        entry.update(confidence_of(outcome))
        if halted is not None:
            entry.update(error=describe_error(halted), halted={"slot": halted.slot, "reason": halted.reason})
    entry.update(input_hash=input_hash, template_hash=template_hash)
    return entry


def denied_calls(result: Any) -> int:
    """How many tool calls of a run were denied (SPEC §12): the model read a denial."""
    from pydantic_ai.messages import ModelRequest, ToolReturnPart

    return sum(
        1
        for slot in result.results.values()
        for message in slot.messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart) and part.outcome == "denied"
    )


def confidence_of(outcome: Any) -> dict[str, Any]:
    """SPEC §27: a row's confidences and escalations by slot (nothing when no slot measured one)."""
    found: dict[str, Any] = {}
    for key, slot in outcome.results.items():
        if getattr(slot, "confidence", None) is not None:
            found.setdefault("confidence", {})[key] = slot.confidence
        if getattr(slot, "escalated_to", None) is not None:
            found.setdefault("escalated", {})[key] = slot.escalated_to
    return found


def confidence_columns(program: Any) -> dict[str, str]:
    """slot → its confidence column: `_confidence` for a template's one slot with
    `confidence=`, `_confidence_<slot>` for each of several."""
    keys = [s.key for s in program.slots() if any(o.key == "confidence" for o in s.options)]
    if len(keys) == 1:
        return {keys[0]: "_confidence"}
    return {key: f"_confidence_{key}" for key in keys}


def output_row(
    row: dict[str, Any], entry: dict[str, Any], renames: dict[str, str] | None = None,
    confident: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    out = {**row, **renamed(entry["answers"], renames or {})}
    for key, column in (confident or {}).items():
        out[column] = entry.get("confidence", {}).get(key)
    if entry.get("unknown"):
        out["_unknown"] = entry["unknown"]["label"]
    elif not entry["ok"]:
        out["_error"] = entry["error"]
    return out


def unknown_of(outcome: BaseException) -> Any:
    """The `OutcomeUnknown` that ended a row (SPEC §29), also inside a group or as a cause."""
    from ..errors import OutcomeUnknown

    seen: set[int] = set()
    todo: list[BaseException | None] = [outcome]
    while todo:
        exc = todo.pop()
        if exc is None or id(exc) in seen:
            continue
        seen.add(id(exc))
        if isinstance(exc, OutcomeUnknown):
            return exc
        todo.extend(getattr(exc, "exceptions", ()) or ())
        todo += [exc.__cause__, exc.__context__]
    return None


def output_columns(
    rows: list[dict[str, Any]], entries: list[dict[str, Any]], keys: Sequence[str], renames: dict[str, str] | None = None,
    confident: Mapping[str, str] | None = None,
) -> list[str]:
    """Input columns, then answers in template order, then `_error` if a row failed
    (for rows in memory: the playground's batch; `sd batch` counts them as it goes)."""
    columns = columns_of(rows)
    answered = columns_of(e["answers"] for e in entries)
    ranked = sorted(answered, key=lambda k: keys.index(k) if k in keys else len(keys))
    columns += [c for c in ((renames or {}).get(k, k) for k in ranked) if c not in columns]
    columns += [c for c in (confident or {}).values() if c not in columns]
    if any(not e["ok"] and not e.get("unknown") for e in entries):
        columns.append("_error")
    if any(e.get("unknown") for e in entries):
        columns.append("_unknown")
    return columns


def renamed(answers: Mapping[str, Any], renames: Mapping[str, str]) -> dict[str, Any]:
    return {renames.get(k, k): v for k, v in answers.items()}


def row_usage(outcome: Any) -> dict[str, Any]:
    """A batch row's usage for its journal line: a Result's, or what its error carries."""
    from ..run.accounting import usage_of

    usage = usage_of(outcome)
    return usage.to_dict() if usage is not None else {}


def not_run(outcome: Any) -> bool:
    """A row the batch budget kept from starting (recorded as not run; --resume runs it)."""
    from ..errors import BudgetExceeded

    return isinstance(outcome, BudgetExceeded) and outcome.scope == "batch"

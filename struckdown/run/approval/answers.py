"""`escalate=approve` (SPEC §27): a less confident answer goes to a person, who keeps it or
picks another. The same machinery as a tool call's approval (SPEC §12): `approve=fn`
decides inline; without it the run pauses, and `resume` continues with the decision.

The request's `tool_name` is `@answer` (no tool can have that name) and its arguments are
the model's answer, its confidence and the choices. A decision is `True` (keep the model's
answer) or a string: the answer the person picked, read as the slot's type.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ...approval.state import ANSWER_TOOL, ApprovalRequest, PausedSlot, answer_decided
from ...codec import jsonable
from ...errors import TemplateRuntimeError
from ...incremental import ApprovalDecided, ApprovalRequested
from ...types import OutputSpec
from .calls import ApprovalRun, SlotPaused


def resumed_decision(approval: ApprovalRun | None, slot: str) -> tuple[PausedSlot, Any] | None:
    """The paused answer of `slot` and its decision, when this run resumes one."""
    if approval is None or approval.resume is None:
        return None
    paused = approval.resume.paused.get(slot)
    if paused is None or not paused.requests or paused.requests[0][0].tool_name != ANSWER_TOOL:
        return None
    request = paused.requests[0][0]
    return paused, approval.resume.decisions[request.id]


async def ask_person(
    approval: ApprovalRun | None, slot: str, value: Any, confidence: float, choices: Sequence[str],
    join: Callable[[], Awaitable[None]], paused: Callable[[ApprovalRequest], PausedSlot],
) -> Any:
    """The decision of whoever decides the run's approvals; pauses the run (`SlotPaused`) when
    nobody does."""
    arguments: dict[str, Any] = {"answer": jsonable(value), "confidence": confidence}
    if choices:
        arguments["choices"] = list(choices)
    request = ApprovalRequest(f"{slot}.1", slot, ANSWER_TOOL, arguments)
    if approval is None:
        raise TemplateRuntimeError(f"slot {slot!r}: escalate=approve needs a run that can ask or pause")
    await approval.join_pending(join, None)
    await approval.emit(ApprovalRequested(slot, request.id, request.tool_name, request.arguments))
    if approval.decide is None:
        raise SlotPaused(paused(request))
    async with approval.lock():
        decision = await approval.ask(request)
    await approval.emit(ApprovalDecided(slot, request.id, *answer_decided(decision)))
    return decision


def decided_value(decision: Any, value: Any, spec: OutputSpec, slot: str, choices: Sequence[str]) -> Any:
    """The slot's answer after the decision: the model's (True) or the person's (a string,
    read as the slot's type)."""
    if decision is True:
        return value
    if decision is False or not str(decision).strip():
        raise TemplateRuntimeError(
            f"slot {slot!r}: the less confident answer {value!r} was rejected and no answer was given; "
            "decide with True (keep it) or the answer itself" + (f" (one of {', '.join(choices)})" if choices else "")
        )
    text = str(decision).strip()
    try:
        given = json.loads(text)
    except ValueError:
        given = text
    for candidate in (given, text):
        try:
            return spec.to_value(spec.output_type.model_validate({"response": candidate}))
        except Exception:  # noqa: BLE001, S112 - pydantic's ValidationError: try it as plain text next
            continue
    raise TemplateRuntimeError(
        f"slot {slot!r}: the answer {text!r} does not fit the slot"
        + (f"; give one of {', '.join(choices)}" if choices else "")
    )

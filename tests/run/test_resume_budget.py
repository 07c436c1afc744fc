"""A resumed run's budget counts what its part before the pause spent (SPEC §22, §13)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from pydantic_ai.usage import UsageLimits

import struckdown as sd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

from scripted import Call, Script, Tools, auto_answer  # noqa: E402

TEMPLATE = "Refund the order. [[r|use_tools=true]]\nThen say b. [[b]]\nThen say c. [[c]]\n"


def _run() -> tuple[Script, list[str], sd.Paused]:
    ran: list[str] = []

    @sd.needs_approval
    def refund(order_id: str) -> str:
        """Refund an order."""
        ran.append(order_id)
        return "refunded"

    def answer(call: Call) -> object:
        if call.tool_names and not any(role == "call" for role, _ in call.turns):
            return Tools([("refund", {"order_id": "A1"})])
        return auto_answer(call)

    script = Script(answer)
    with pytest.raises(sd.Paused) as paused:
        sd.complete(TEMPLATE, model=script.model(), tools=[refund], run_limits=UsageLimits(request_limit=3))
    assert len(script.calls) == 1 and ran == []
    return script, ran, paused.value


def test_the_requests_before_a_pause_count_against_the_recorded_run_limits() -> None:
    script, ran, paused = _run()
    state = json.loads(json.dumps(paused.state))
    assert state["options"]["run_limits"]["request_limit"] == 3

    @sd.needs_approval
    def refund(order_id: str) -> str:
        """Refund an order."""
        ran.append(order_id)
        return "refunded"

    with pytest.raises(sd.BudgetExceeded) as spent:  # the tools are given again: functions are not recorded
        sd.resume(state, {paused.requests[0].id: True}, model=script.model(), tools=[refund])
    # 1 request before the pause + r's answer + b = 3; c would be the 4th
    assert spent.value.limit == "request_limit"
    assert ran == ["A1"] and len(script.calls) == 3


def test_a_limit_given_again_at_resume_still_counts_the_earlier_requests() -> None:
    script, ran, paused = _run()

    @sd.needs_approval
    def refund(order_id: str) -> str:
        """Refund an order."""
        ran.append(order_id)
        return "refunded"

    result = sd.resume(paused.state, {paused.requests[0].id: True}, model=script.model(), tools=[refund],
                       run_limits=UsageLimits(request_limit=4))
    assert result.usage.requests == 4 and ran == ["A1"]

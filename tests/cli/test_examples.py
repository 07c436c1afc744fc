"""Every example template runs with a scripted model and gives typed answers."""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

import struckdown as sd
from scripted import Call, Script, Tools, auto_answer

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def context_for(template: Path) -> dict[str, Any]:
    for suffix in (".json", ".yaml"):
        path = template.with_suffix(suffix)
        if path.exists():
            text = path.read_text()
            return json.loads(text) if suffix == ".json" else yaml.safe_load(text)
    return {}


def run_example(name: str, answer: Any = auto_answer, **kwargs: Any) -> tuple[sd.Result, Script]:
    path = EXAMPLES / f"{name}.sd"
    script = Script(answer)
    result = sd.complete(path.read_text(), context_for(path), model=script.model(), template_path=path, **kwargs)
    return result, script


def test_every_example_parses() -> None:
    names = sorted(p.stem for p in EXAMPLES.glob("*.sd"))
    assert len(names) >= 6
    for name in names:
        path = EXAMPLES / f"{name}.sd"
        sd.parse(path.read_text(), template_path=path)


def test_quickstart() -> None:
    result, script = run_example("quickstart")
    assert list(result) == ["summary", "positive"]
    assert result["positive"] is True
    assert script.calls[0].instructions == "You are a concise assistant. Answer briefly."
    assert "The kettle boils fast" in script.calls[0].last_user


def test_extraction_with_types() -> None:
    result, script = run_example("extract_invoice")
    assert list(result) == ["vendor", "issued", "total", "items", "paid"]
    assert result["issued"] == dt.date(2025, 3, 3)
    assert isinstance(result["total"], float) and result["total"] >= 0
    assert isinstance(result["items"], list)
    assert all(c.turns[0][1].startswith("Invoice text:") for c in script.calls)  # header first


def test_classification_with_pick_and_condition() -> None:
    def answer(call: Call) -> Any:
        if call.schema and "billing" in json.dumps(call.schema):
            return "technical"
        return auto_answer(call)

    result, script = run_example("classify_ticket", answer)
    assert result["team"] == "technical"
    assert result["urgency"] == 3  # index into low, normal, high, critical
    assert result["area"] == "api"
    assert list(result) == ["team", "urgency", "area", "reply"]


def test_classification_skips_the_branch_not_taken() -> None:
    def answer(call: Call) -> Any:
        if call.schema and "billing" in json.dumps(call.schema):
            return "billing"
        return auto_answer(call)

    result, _ = run_example("classify_ticket", answer)
    assert "area" not in result


def test_checkpointed_chain_carries_values() -> None:
    result, script = run_example("research_chain")
    assert list(result) == ["outline", "draft", "improvements", "ready"]
    draft_call = next(c for c in script.calls if "Write the explainer" in c.last_user)
    assert draft_call.turns == [("user", draft_call.last_user)]  # fresh conversation
    assert result["outline"] in draft_call.last_user
    assert 1 <= len(result["improvements"]) <= 3


def test_together_fan_out() -> None:
    script = Script(auto_answer, meet=4)
    path = EXAMPLES / "review_fanout.sd"
    result = sd.complete(path.read_text(), context_for(path), model=script.model())
    assert script.peak == 4
    assert list(result) == ["finance", "security", "usability", "feasibility", "recommendation"]
    final = next(c for c in script.calls if "Combine" in c.last_user)
    assert [r for r, _ in final.turns].count("assistant") == 4


def test_json_plan() -> None:
    plan = {"days": [{"title": "Alfama", "activities": ["tiles museum", "viewpoint"]}]}

    def answer(call: Call) -> Any:
        return plan if call.schema and "JSON" in call.last_user else auto_answer(call)

    result, _ = run_example("trip_plan", answer)
    assert result["plan"] == plan
    assert isinstance(result["activity_count"], int)


def _support_tools() -> Any:
    spec = importlib.util.spec_from_file_location("support_tools", EXAMPLES / "support_tools.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def support_model(verdict: dict[str, Any]) -> Any:
    def answer(call: Call) -> Any:
        if call.schema and "triggered" in json.dumps(call.schema):
            return verdict
        if "lookup_order" in call.tool_names:
            done = [t for r, t in call.turns if r == "call"]
            if not done:
                return Tools([("lookup_order", {"order_id": "5531"})])
            if len(done) == 1:
                return Tools([("issue_refund", {"order_id": "5531", "reason": "damaged"})])
            return "Your order 5531 was refunded."
        return auto_answer(call)

    return answer


def test_agent_example_looks_up_then_refunds() -> None:
    tools = _support_tools()
    result, script = run_example(
        "support_agent", support_model({"triggered": False, "reason": "polite"}),
        tools=[tools.lookup_order, tools.issue_refund],
    )
    assert tools.REFUNDS == ["5531"]
    assert result["reply"] == "Your order 5531 was refunded."
    assert [c.tool_name for c in result.results["reply"].tool_calls] == ["lookup_order", "issue_refund"]
    assert result["abusive"] == {"triggered": False, "reason": "polite"}


def test_agent_example_guard_blocks_the_refund() -> None:
    tools = _support_tools()
    with pytest.raises(sd.Halted):
        run_example(
            "support_agent", support_model({"triggered": True, "reason": "manipulation"}),
            tools=[tools.lookup_order, tools.issue_refund],
        )
    assert tools.REFUNDS == []

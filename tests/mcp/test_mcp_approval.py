"""`destructiveHint: true` needs approval (SPEC §16 with §12): the MCP side marks such a
tool `kind='unapproved'`; the approval machinery (issue 15) asks `approve=`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from mcp_support import HttpServer
from pydantic_ai.capabilities import MCP
from scripted import Call, Script, Tools

import struckdown as sd

pytestmark = pytest.mark.process  # real MCP server over streamable HTTP

TRIP = {"triggered": True, "reason": "unsafe"}
PASS = {"triggered": False, "reason": "fine"}
TEMPLATE = "Judge [[halt:g]]\nLook [[look|mcp=dictionary]]\nClean up [[clean|mcp=notes]]"


def is_guard(call: Call) -> bool:
    return bool(call.schema) and "triggered" in str(call.schema)


def servers(notes: HttpServer) -> list[Any]:
    """`dictionary`: the read-only tool alone (it may run beside a guard); `notes`: all
    of them, `erase` (destructiveHint) among them."""
    from pydantic_ai.mcp import MCPToolset

    dictionary = MCP(local=MCPToolset(notes.url), id="dictionary", allowed_tools=["lookup"])
    return [dictionary, MCP(local=MCPToolset(notes.url), id="notes")]


def model_for(verdict: dict[str, Any], order: list[str], notes: HttpServer) -> Script:
    looked_up = notes.record.event("lookup")

    async def verdict_after_the_lookup(call: Call) -> None:
        if is_guard(call):
            await asyncio.to_thread(looked_up.wait, 20)  # the read-only tool ran beside the pending guard
            order.append("verdict")

    def answer(call: Call) -> object:
        if is_guard(call):
            return verdict
        if call.turns[-1][0] != "user":
            return f"answer: {call.turns[-1][1]}"
        if "dictionary_lookup" in call.tool_names:
            return Tools([("dictionary_lookup", {"word": "owl"})])
        return Tools([("notes_erase", {"name": "owl"})])

    return Script(answer, gate=verdict_after_the_lookup)


def test_a_destructive_mcp_tool_waits_for_the_guard_verdict_and_for_approval(notes: HttpServer) -> None:
    order: list[str] = []

    def approve(request: Any) -> bool:
        order.append(f"approve {request.slot} {request.tool_name} {request.arguments}")
        assert notes.record.calls == [("lookup", {"word": "owl"})]  # erase has not run
        return True

    script = model_for(PASS, order, notes)
    events = list(sd.complete_incremental(TEMPLATE, model=script.model(), mcp=servers(notes), approve=approve))
    assert order == ["verdict", "approve clean notes_erase {'name': 'owl'}"]
    assert notes.record.calls == [("lookup", {"word": "owl"}), ("erase", {"name": "owl"})]
    asked = [e for e in events if e.type == "approval_requested"]
    decided = [e for e in events if e.type == "approval_decided"]
    assert [(e.slot, e.tool_name, e.arguments) for e in asked] == [("clean", "notes_erase", {"name": "owl"})]
    assert [(e.request_id, e.approved, e.message) for e in decided] == [(asked[0].request_id, True, None)]
    assert events[-1].result["clean"] == "answer: erased owl"


def test_a_denied_destructive_call_never_reaches_the_server(notes: HttpServer) -> None:
    order: list[str] = []
    script = model_for(PASS, order, notes)
    result = sd.complete(TEMPLATE, model=script.model(), mcp=servers(notes), approve=lambda request: "not today")
    assert notes.record.calls == [("lookup", {"word": "owl"})]
    assert result["clean"] == "answer: not today"


def test_a_tripped_guard_means_nobody_is_asked(notes: HttpServer) -> None:
    order: list[str] = []
    asked: list[Any] = []
    script = model_for(TRIP, order, notes)
    result = sd.complete(
        TEMPLATE, model=script.model(), mcp=servers(notes), approve=asked.append, on_halt="return"
    )
    assert result.halted is not None and result.halted.slot == "g"
    assert asked == [] and notes.record.calls == [("lookup", {"word": "owl"})]

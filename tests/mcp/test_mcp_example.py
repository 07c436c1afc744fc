"""examples/library_assistant.sd with its bundled MCP server, examples/library.py (served
here over streamable HTTP, in this process, so the test can read the server's state)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from mcp_support import serving
from scripted import Call, Script, Tools

import struckdown as sd

pytestmark = pytest.mark.process  # the example's real MCP server over streamable HTTP

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
HITCHHIKER = "978-0345391803"


def load_library() -> Any:
    spec = importlib.util.spec_from_file_location("library_example", EXAMPLES / "library.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_library_assistant_searches_reads_and_reserves() -> None:
    library = load_library()
    steps = [
        Tools([("library_search", {"query": "science fiction"})]),
        Tools([("library_details", {"isbn": HITCHHIKER})]),
        Tools([("library_reserve", {"isbn": HITCHHIKER, "reader": "R-17"})]),
        "I reserved The Hitchhiker's Guide to the Galaxy for you.",
    ]
    replies = iter(steps)

    def answer(call: Call) -> object:
        if call.schema and "triggered" in str(call.schema):
            return {"triggered": False, "reason": "polite"}
        if call.schema:
            return True  # [[bool:reserved]]
        return next(replies)

    script = Script(answer)
    template = EXAMPLES / "library_assistant.sd"
    context = json.loads((EXAMPLES / "library_assistant.json").read_text())
    with serving(library.server.streamable_http_app()) as url:
        result = sd.complete(
            template.read_text(), context, model=script.model(), template_path=template, mcp={"library": url}
        )
    assert result["reply"] == "I reserved The Hitchhiker's Guide to the Galaxy for you."
    assert result["reserved"] is True
    assert library.RESERVATIONS == [(HITCHHIKER, "R-17")]
    (call, *_) = [c for c in script.calls if c.tool_names]
    kinds = {tool.name: tool.kind for tool in call.info.function_tools}
    assert kinds == {
        "library_search": "function", "library_details": "function",
        "library_reserve": "function", "library_withdraw": "unapproved",
    }  # fmt: skip
    searched = result.results["reply"].tool_calls[0]
    assert [book["title"] for book in searched.output] == [
        "The Martian", "Dune", "The Hitchhiker's Guide to the Galaxy",
    ]  # fmt: skip

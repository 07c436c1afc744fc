"""SPEC §19: instrument= gives pydantic-ai's spans plus struckdown's run → slot → tool spans."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import struckdown as sd
from scripted import Call, Script, Tools


def provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    return tracer_provider, exporter


def ancestors(span: ReadableSpan, by_id: dict[int, ReadableSpan]) -> list[str]:
    names: list[str] = []
    parent = span.parent
    while parent is not None and parent.span_id in by_id:
        found = by_id[parent.span_id]
        names.append(found.name)
        parent = found.parent
    return names


def test_run_slot_tool_nesting_with_the_documented_attributes() -> None:
    @sd.readonly
    def lookup(q: str) -> str:
        """Look up."""
        return "42"

    def answer(call: Call) -> Any:
        if "Judge" in call.last_user:
            return {"triggered": False, "reason": "fine"}
        if call.turns[-1][0] == "user":
            return Tools([("lookup", {"q": "x"}), ("lookup", {"q": "x"})])
        return "It is 42"

    tracer_provider, exporter = provider()
    result = sd.complete(
        "Judge [[halt:g]]\n\nAsk [[a|use_tools=true]]", model=Script(answer).model(), tools=[lookup],
        instrument=tracer_provider, template_path=None,
    )
    assert result["a"] == "It is 42"
    spans = exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans}
    (run,) = [s for s in spans if s.name == "struckdown run"]
    assert dict(run.attributes or {}) == {"struckdown.template": "<string>", "struckdown.segments": 1, "struckdown.slots": 2}
    assert run.parent is None
    (slot,) = [s for s in spans if s.name == "struckdown slot"]
    assert dict(slot.attributes or {}) == {
        "struckdown.slot.key": "a", "struckdown.slot.type": "respond", "struckdown.slot.cached": False,
        "struckdown.slot.truncated": False, "struckdown.slot.requests": 2,
    }
    assert slot.parent is not None and slot.parent.span_id == run.context.span_id
    tools = [s for s in spans if s.name == "struckdown tool"]
    assert sorted((dict(t.attributes or {})["struckdown.tool.was_cached"], dict(t.attributes or {})["struckdown.tool.ok"])
                  for t in tools) == [(False, True), (True, True)]
    for tool in tools:
        assert dict(tool.attributes or {})["struckdown.tool.name"] == "lookup"
        chain = ancestors(tool, by_id)
        assert chain[-2:] == ["struckdown slot", "struckdown run"]  # run → slot → (pydantic-ai's spans) → tool
        assert any("agent" in name or "running" in name for name in chain[:-2])  # pydantic-ai's own spans between
    (guard,) = [s for s in spans if s.name == "struckdown guard"]
    attributes = dict(guard.attributes or {})
    assert (attributes["struckdown.slot.key"], attributes["struckdown.guard.triggered"], attributes["struckdown.guard.reason"]) == (
        "g", False, "fine"
    )
    assert guard.parent is not None and guard.parent.span_id == run.context.span_id
    chats = [s for s in spans if s.name.startswith("chat")]
    assert len(chats) == 3  # pydantic-ai's instrumentation: one span per model request (guard 1, slot 2)


def test_without_instrument_no_span_is_made() -> None:
    tracer_provider, exporter = provider()
    sd.complete("Q [[a]]", model=Script(lambda c: "x").model())
    assert exporter.get_finished_spans() == ()

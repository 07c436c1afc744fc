"""Every example template against the real local model (issue 23 item 7).

Each example runs as a user runs it (its context file, its tools file or MCP server, an
approver for the calls it asks approval for), and every answer is checked against what the
template declares: the Python type of its type, the choices of a `pick`, the levels of a
`score`, `min=`, a quantifier's bounds, a guard's verdict shape, and that no answer was cut
at its token limit. The assertions are about types and structure, never the model's wording.

What the test gives the CI model (qwen2.5-coder 0.5B on llama.cpp, ~10 tokens/s on 2
cores): a fixed `seed` (the types keep their own default temperatures: greedy decoding makes
this model repeat itself until the cap) and a call-wide `max_tokens` of 400 instead of the
per-type defaults (4096 for text would let one runaway answer take minutes); an example's
own `max_tokens=` still wins. An answer that does not fit is a failure (`truncated`).

`receipt.sd` reads a photo; the CI model has no vision projector, so llama-server refuses
the image. That case asserts the clear error a user gets (a `ModelError` naming the model
and carrying the server's "image input is not supported"), raised at the first request,
before any slot is answered.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

import struckdown as sd
from struckdown.cli.loading import load_tools
from struckdown.syntax.nodes import If, Slot, walk

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES_DIR = ROOT / "examples"
EXAMPLES = sorted(EXAMPLES_DIR.glob("*.sd"))
SETTINGS = {"seed": 7, "max_tokens": 400}

#: The Python type of one answer of each builtin type the examples use (docs/types.md).
PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "respond": (str,), "think": (str,), "speak": (str,), "extract": (str,), "pick": (str,),
    "bool": (bool,), "int": (int,), "number": (float,), "score": (int,),
    "date": (dt.date,), "datetime": (dt.datetime,), "time": (dt.time,), "duration": (dt.timedelta,),
    "record": (dict,), "halt": (dict,), "json": (dict, list, str, int, float, bool),
}


@dataclass(frozen=True)
class Case:
    """How a user runs one example: the tools file (`--tools`), the MCP server (`--mcp`),
    whether its tool calls need approval, and whether it needs a model that reads images."""

    tools: str | None = None
    mcp: str | None = None
    approves: bool = False
    image: str | None = None


CASES: dict[str, Case] = {
    "classify_ticket.sd": Case(),
    "extract_invoice.sd": Case(),
    "library_assistant.sd": Case(mcp="library.py"),
    "quickstart.sd": Case(),
    "receipt.sd": Case(image="receipt.png"),
    "refund_agent.sd": Case(tools="refund_tools.py", approves=True),
    "research_chain.sd": Case(),
    "review_fanout.sd": Case(),
    "support_agent.sd": Case(tools="support_tools.py"),
    "trip_plan.sd": Case(),
}


def _context(template: Path) -> dict[str, Any]:
    for suffix, load in ((".json", json.loads), (".yaml", yaml.safe_load), (".yml", yaml.safe_load)):
        path = template.with_suffix(suffix)
        if path.exists():
            return dict(load(path.read_text(encoding="utf-8")))
    return {}


def _positional(slot: Slot) -> list[str]:
    return [str(option.value) for option in slot.options if option.key is None]


def _named(slot: Slot) -> dict[str, Any]:
    return {option.key: option.value for option in slot.options if option.key is not None}


def _check_item(value: Any, slot: Slot) -> None:
    name = slot.type_name
    assert value is not None, f"{slot.key} ({name}) answered null"
    kinds = PYTHON_TYPES[name]
    assert isinstance(value, kinds), f"{slot.key}: {name} answered {type(value).__name__}: {value!r}"
    if name in ("int", "score"):
        assert not isinstance(value, bool), f"{slot.key}: {name} answered a bool"
    if name == "date":
        assert not isinstance(value, dt.datetime), f"{slot.key}: date answered a datetime"
    if name == "pick":
        assert value in _positional(slot), f"{slot.key}: {value!r} is not one of {_positional(slot)}"
    if name == "score":
        assert 0 <= value < len(_positional(slot)), f"{slot.key}: {value} is not a level index"
    if name in ("int", "number"):
        options = _named(slot)
        if "min" in options:
            assert value >= options["min"], f"{slot.key}: {value} < min={options['min']}"
        if "max" in options:
            assert value <= options["max"], f"{slot.key}: {value} > max={options['max']}"
    if name == "halt":
        assert set(value) == {"triggered", "reason"}, value
        assert isinstance(value["triggered"], bool) and isinstance(value["reason"], str)
    if name in ("respond", "think", "speak", "extract") and slot.quantifier is None:
        assert value.strip(), f"{slot.key}: empty text"


def _check(value: Any, slot: Slot) -> None:
    if slot.quantifier is None:
        _check_item(value, slot)
        return
    assert isinstance(value, list), f"{slot.key}: a quantified slot answers a list, got {value!r}"
    low, high = slot.quantifier
    assert len(value) >= max(low, 1), f"{slot.key}: {len(value)} items, wanted at least {max(low, 1)}"
    assert high is None or len(value) <= high, f"{slot.key}: {len(value)} items, at most {high}"
    for item in value:
        _check_item(item, slot)


def _tool_names(case: Case, tools: list[Any]) -> set[str]:
    if case.mcp is not None:
        prefix = Path(case.mcp).stem
        return {f"{prefix}_{name}" for name in ("search", "details", "reserve", "withdraw")}
    return {getattr(tool, "__name__", getattr(tool, "name", "")) for tool in tools}


def _uses_tools(slot: Slot) -> bool:
    options = _named(slot)
    return str(options.get("use_tools", "")).lower() == "true" or "mcp" in options


def test_every_example_has_a_case() -> None:
    assert sorted(CASES) == [path.name for path in EXAMPLES]


@pytest.mark.parametrize("template", EXAMPLES, ids=[path.name for path in EXAMPLES])
def test_example_runs_on_the_local_model_with_typed_answers(template: Path, model: Any) -> None:
    case = CASES[template.name]
    program = sd.parse(template.read_text(encoding="utf-8"), template_path=template)
    context = _context(template)
    tools = load_tools(EXAMPLES_DIR / case.tools) if case.tools else []
    options: dict[str, Any] = {"tools": tools}
    if case.mcp is not None:
        options["mcp"] = [str(EXAMPLES_DIR / case.mcp)]
    asked: list[Any] = []
    if case.approves:
        approve: Callable[[Any], bool] = lambda request: asked.append(request) or True  # noqa: E731
        options["approve"] = approve

    if case.image is not None:
        context[template.stem] = sd.Image(EXAMPLES_DIR / case.image)
        with pytest.raises(sd.ModelError) as raised:
            sd.complete(program, context, model=model, cache=False, settings=SETTINGS, **options)
        message = str(raised.value)
        assert "image input is not supported" in message and model.model_name in message, message
        return

    result = sd.complete(program, context, model=model, cache=False, settings=SETTINGS, **options)

    assert result.halted is None, f"a guard tripped on the example's own context: {result.halted}"
    answered = result.results
    conditional = {
        inner.key for node in walk(program.template.nodes) if isinstance(node, If)
        for inner in walk(tuple(n for branch in node.branches for n in branch.body)) if isinstance(inner, Slot)
    }
    known_tools = _tool_names(case, tools)
    for slot in program.slots():
        if slot.key not in answered:
            assert slot.key in conditional, f"{slot.key} has no answer"
            continue
        slot_result = answered[slot.key]
        assert slot_result.truncated is False, f"{slot.key} was cut at its token limit: {slot_result.output!r}"
        _check(slot_result.output, slot)
        if _uses_tools(slot):
            calls = slot_result.tool_calls
            assert calls, f"{slot.key} answered without looking anything up"
            assert {call.tool_name for call in calls} <= known_tools, [call.tool_name for call in calls]
        else:
            assert slot_result.tool_calls == (), slot.key
    if case.approves:
        # approve=issue_refund: every refund the agent made was asked for first, nothing else was
        refunds = [call.arguments for call in answered["reply"].tool_calls if call.tool_name == "issue_refund"]
        assert [(r.slot, r.tool_name, r.arguments) for r in asked] == [("reply", "issue_refund", a) for a in refunds]

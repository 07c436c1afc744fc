"""Issue 55 (SPEC §37): a 0.x streaming client works unchanged — events dump as 0.x's
pydantic events did (`model_dump()`, `model_dump_json()`, `type` with 0.x's values,
`segment_index`), and a handler table keyed by 0.x's type strings fires."""

from __future__ import annotations

import json
from typing import Any

import struckdown as sd
from scripted import Call, Script

TEMPLATE = """Tell a joke about {{ topic }}. [[joke]]
Is it funny? [[bool:funny]]
<checkpoint>Rate</checkpoint>
Rate this joke: {{ joke }} ({{ funny }}) [[score:rating|bad,ok,good]]"""


#: the ten event types of 0.x
OX_TYPES = {"slot_completed", "stream_start", "token_delta", "thinking_delta", "tool_started", "tool_completed",
            "checkpoint", "complete", "error", "slot_retracted"}


def _answer(call: Call) -> Any:
    if "funny" in call.last_user:
        return True
    if "Rate" in call.last_user:
        return 2
    return "Why did the cat sit on the computer? To keep an eye on the mouse."


def _events() -> list[Any]:
    model = Script(_answer).model()
    return list(sd.complete_incremental(TEMPLATE, {"topic": "cats"}, model=model))


def test_events_dump_as_0x_events() -> None:
    events = _events()
    dumps = [json.loads(e.model_dump_json()) for e in events if e.type in OX_TYPES]
    summary = [(d["type"], d.get("slot_key"), d.get("segment_index")) for d in dumps]
    assert summary == [
        ("stream_start", "joke", 0),
        *[("token_delta", "joke", 0)] * (len(summary) - 7),
        ("slot_completed", "joke", 0),
        ("slot_completed", "funny", 0),
        ("checkpoint", None, 0),
        ("slot_completed", "rating", 1),
        ("checkpoint", None, 1),
        ("complete", None, None),
    ]
    assert dumps[-2]["segment_name"] == "Rate"  # the checkpoint that starts the segment (docs/migration.md)
    assert [e.segment_index for e in events if getattr(e, "slot", None) == "rating"] == [1, 1]  # and its model_responded
    token = next(d for d in dumps if d["type"] == "token_delta")
    assert set(token) >= {"type", "slot_key", "segment_index", "delta", "accumulated"}
    # model_dump() is the same dict, JSON-ready
    assert events[0].model_dump() == dumps[0]
    # events 0.x did not have say so by their type (docs/migration.md: a table reads them with .get)
    assert {e.model_dump()["type"] for e in events} - OX_TYPES == {"model_responded"}


def test_a_handler_table_keyed_by_0x_type_strings_fires() -> None:
    seen: list[str] = []
    handlers = {
        "stream_start": lambda e: seen.append(f"start {e.slot_key}"),
        "token_delta": lambda e: None,
        "slot_completed": lambda e: seen.append(f"done {e.slot_key} {e.segment_index}"),
        "checkpoint": lambda e: seen.append(f"checkpoint {e.segment_index} {e.segment_name}"),
        "complete": lambda e: seen.append(f"complete {e.early_termination}"),
        "error": lambda e: seen.append(f"error {e.error_message}"),
    }
    for event in _events():
        handler = handlers.get(event.type)
        if handler:
            handler(event)
    assert seen == [
        "start joke", "done joke 0", "done funny 0", "checkpoint 0 None",
        "done rating 1", "checkpoint 1 Rate", "complete False",
    ]  # fmt: skip
    # `event.type == ...` holds for both names; a table keyed by today's names reads str(event.type)
    last = _events()[-1]
    assert last.type == "complete" and last.type == "processing_complete"
    assert {"processing_complete": 1}[str(last.type)] == 1


def test_an_error_event_dispatches_as_0x_error() -> None:
    def fail(call: Call) -> Any:
        raise RuntimeError("the provider is down")

    events = list(sd.complete_incremental("Hi [[x]]", {}, model=Script(fail).model()))
    handled = {"error": lambda e: e.model_dump()}[events[-1].type](events[-1])
    assert [e.model_dump()["type"] for e in events if e.type in OX_TYPES] == ["error"]
    assert handled["type"] == "error" and "the provider is down" in handled["error_message"]
    assert handled["segment_index"] == 0

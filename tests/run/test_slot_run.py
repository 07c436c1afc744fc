"""What a slot's model requests and tool calls see of their slot run (run/slot_run.py): one
SlotRun, set for each attempt and put back after it, that a batch row's fields reach."""

from __future__ import annotations

from typing import Any

from scripted import Call, Script, Tools

import struckdown as sd
from struckdown.run.slot_run import NO_RUN, current


def _seen(call: Call, log: list[tuple[Any, ...]]) -> None:
    run = current()
    log.append((run.meter.slot, run.retries.slot, run.tools is not None, run.cache is not None, run.effect_row))


def test_each_request_sees_its_own_slots_run_and_none_is_left_after_it(tmp_path: Any) -> None:
    log: list[tuple[Any, ...]] = []

    def answer(call: Call) -> str:
        _seen(call, log)
        return "ok"

    sd.complete("One. [[a]]\nTwo. [[b]]", model=Script(answer).model(), cache=str(tmp_path))
    assert log == [("a", "a", False, True, None), ("b", "b", False, True, None)]
    assert current() is NO_RUN


def test_a_tool_call_and_the_request_after_it_see_the_slots_tool_state() -> None:
    log: list[tuple[Any, ...]] = []
    in_tool: list[tuple[str, str]] = []

    def lookup(city: str) -> str:
        """Look up the weather in a city."""
        run = current()
        in_tool.append((run.tools.slot, run.meter.slot))
        return f"sunny in {city}"

    def answer(call: Call) -> Any:
        _seen(call, log)
        return Tools([("lookup", {"city": "Oslo"})]) if len(call.messages) == 1 else "sunny"

    sd.complete("Weather? [[w|use_tools=true]]", model=Script(answer).model(), tools=[lookup])
    assert log == [("w", "w", True, False, None), ("w", "w", True, False, None)]
    assert in_tool == [("w", "w")]


def test_a_batch_rows_requests_see_their_row() -> None:
    log: list[tuple[Any, ...]] = []

    def answer(call: Call) -> str:
        _seen(call, log)
        return "ok"

    sd.complete_batch("Say {{ n }} [[a]]", [{"n": 1}, {"n": 2}], model=Script(answer).model(), concurrency=1)
    assert log == [("a", "a", False, False, 0), ("a", "a", False, False, 1)]

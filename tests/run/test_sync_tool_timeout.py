"""SPEC §14 / §22: `tool_timeout` fires for a sync tool too. A sync tool runs in a worker
thread, which cannot be stopped: at the deadline the slot stops waiting, the model reads the
same timeout message an async tool's timeout gives, and the thread's late result is dropped
(no event, no message, not the answer to an identical later call).

The tool blocks on a gate the test holds (released at teardown); nothing waits on the clock
but the deadline under test."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import struckdown as sd
from scripted import Call, Script, Tools, settled
from struckdown.incremental import ToolCompleted

GATE_GUARD_S = 10.0  # only so a slot that waits for the thread fails instead of hanging
MESSAGE = "TimeoutError: tool 'slow' took longer than 0.05 s"


class BlockedTool:
    """A sync tool that waits for the test's gate, then returns a late result."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.threads: list[threading.Thread] = []
        self.finished: list[str] = []  # what the tool returned once the gate opened
        self.guard_expired = False  # the slot waited for the thread (the bug): the gate never opened in time

    def tool(self) -> Any:
        def slow(city: str) -> str:
            """Look up the weather (slowly)."""
            self.threads.append(threading.current_thread())
            if not self.release.wait(GATE_GUARD_S):
                self.guard_expired = True
            self.finished.append(city)
            return f"late: sunny in {city}"

        return slow

    async def open_and_wait_for_thread(self) -> None:
        """Release the gate, wait until the thread has returned its late result and the loop
        has handled whatever that result scheduled."""
        self.release.set()
        loop = asyncio.get_running_loop()
        for thread in self.threads:  # joined from the loop's default executor, never a tool's own thread
            await loop.run_in_executor(None, thread.join, GATE_GUARD_S)
        await settled()


@pytest.fixture
def blocked() -> Iterator[BlockedTool]:
    tool = BlockedTool()
    yield tool
    tool.release.set()  # teardown: a failing test leaves no thread blocked


def test_a_sync_tool_past_its_deadline_is_left_and_its_late_result_discarded(blocked: BlockedTool) -> None:
    """Request 1 calls the tool; at the deadline the model reads the timeout message.
    Request 2 opens the gate, lets the thread finish, then calls the same tool with the same
    arguments: it reads the timeout again (the late result was never stored)."""

    async def gate(call: Call) -> None:
        if len(script.calls) == 2:
            await blocked.open_and_wait_for_thread()

    def answer(call: Call) -> Any:
        if len(script.calls) <= 2:
            return Tools([("slow", {"city": "Paris"})])
        return "done"

    script = Script(answer, gate=gate)

    async def collect() -> list[Any]:
        run = sd.complete_incremental_async(
            "Weather? [[a|use_tools=true]]", model=script.model(), tools=[blocked.tool()], tool_timeout=0.05,
            stream=False,
        )
        return [event async for event in run]

    events = asyncio.run(collect())

    assert not blocked.guard_expired, "the slot waited for the sync tool's thread past its deadline"
    assert blocked.finished == ["Paris"]  # the thread did run to its end, after the slot left it
    call = ("call", 'slow({"city": "Paris"})')
    assert [c.turns for c in script.calls] == [
        [("user", "Weather?")],
        [("user", "Weather?"), call, ("return", MESSAGE)],
        [("user", "Weather?"), call, ("return", MESSAGE), call, ("return", MESSAGE)],
    ]
    completed = [(e.tool_name, e.ok, e.output, e.error, e.was_cached) for e in events if isinstance(e, ToolCompleted)]
    assert completed == [("slow", False, MESSAGE, MESSAGE, False), ("slow", False, MESSAGE, MESSAGE, True)]
    assert not any("late: sunny" in repr(e) for e in events)  # the late result, in no event
    result = events[-1].result
    assert result["a"] == "done"
    assert [(t.tool_name, t.ok, t.output) for t in result.results["a"].tool_calls] == [
        ("slow", False, MESSAGE), ("slow", False, MESSAGE)
    ]


def test_a_sync_tool_that_raises_after_its_deadline_changes_nothing(blocked: BlockedTool) -> None:
    """The late outcome may be an error too: it is dropped the same way (no 'never retrieved'
    noise, no second ToolCompleted)."""
    release = blocked.release

    def slow(city: str) -> str:
        """Fails late."""
        blocked.threads.append(threading.current_thread())
        release.wait(GATE_GUARD_S)
        raise RuntimeError("late failure")

    async def gate(call: Call) -> None:
        if len(script.calls) == 2:
            await blocked.open_and_wait_for_thread()

    script = Script(lambda call: Tools([("slow", {"city": "Oslo"})]) if len(script.calls) == 1 else "done", gate=gate)
    result = sd.complete("Weather? [[a|use_tools=true]]", model=script.model(), tools=[slow], tool_timeout=0.05)
    assert result["a"] == "done"
    assert script.calls[1].turns[-1] == ("return", MESSAGE)
    assert [(t.ok, t.error) for t in result.results["a"].tool_calls] == [(False, MESSAGE)]

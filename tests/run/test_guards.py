"""`[[halt:…]]` guards: speculative, joined before anything irreversible (SPEC §4)."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

import struckdown as sd
from scripted import Call, Scheduler, Script, Tools, answered_last

TRIP = {"triggered": True, "reason": "abusive"}
PASS = {"triggered": False, "reason": "fine"}


def is_guard(call: Call) -> bool:
    return bool(call.schema) and "triggered" in str(call.schema)


def guarded(verdict: dict, other: object = "answer") -> object:
    return lambda call: verdict if is_guard(call) else other


# Every verdict below comes last (`answered_last`): only when the run stands still. What
# the engine does not hold back for the guard happens before it, and the test sees it.
VERDICT_LAST = answered_last(is_guard)


def test_guard_prompt_is_the_text_above_it_and_stays_out_of_later_turns() -> None:
    script = Script(guarded(PASS))
    result = sd.complete(
        "<system>Sys.</system>Q0 [[a]]\nJudge: {{ msg }}\n[[halt:bad]]\nReply to {{ msg }} [[reply]]",
        {"msg": "hello"},
        model=script.model(),
    )
    guard = next(c for c in script.calls if is_guard(c))
    assert guard.turns == [("user", "Judge: hello")]
    assert guard.instructions == "Sys."
    reply = next(c for c in script.calls if c.last_user == "Reply to hello")
    assert reply.turns == [("user", "Q0"), ("assistant", "answer"), ("user", "Reply to hello")]
    assert result["bad"] == PASS
    assert list(result) == ["a", "bad", "reply"]


def test_guard_runs_beside_the_next_slot() -> None:
    script = Script(guarded(PASS), meet=2)
    sd.complete("Judge {{ x }} [[halt:g]] Answer {{ x }} [[a]]", {"x": 1}, model=script.model())
    assert script.peak == 2  # guard and answer were in flight together


def test_trip_raises_halted_with_every_finished_slot() -> None:
    script = Script(guarded(TRIP), gate=VERDICT_LAST)
    with pytest.raises(sd.Halted) as info:
        sd.complete("Q0 [[a]] Judge [[halt:g]] Next [[b]] More [[c]]", model=script.model())
    halted = info.value
    assert (halted.slot, halted.reason) == ("g", "abusive")
    assert halted.results is not None
    assert halted.results["g"] == TRIP
    assert halted.results["a"] == "answer"
    assert "b" not in halted.results and "c" not in halted.results  # b was computed beside the guard
    assert sorted(c.last_user for c in script.calls) == ["Judge", "Next", "Q0"]  # c was never asked


def test_on_halt_return_gives_the_result_with_halted_set() -> None:
    script = Script(guarded(TRIP))
    result = sd.complete("Judge [[halt:g]] Next [[b]]", model=script.model(), on_halt="return")
    assert isinstance(result.halted, sd.Halted)
    assert result.halted.reason == "abusive"
    assert result["g"] == TRIP


def test_when_false_trips_on_a_false_verdict() -> None:
    script = Script(guarded({"triggered": False, "reason": "not on topic"}))
    with pytest.raises(sd.Halted, match="not on topic"):
        sd.complete("On topic? [[halt:on_topic|when=false]] Next [[b]]", model=script.model())


def test_non_streaming_trip_wastes_at_most_one_call_beside_the_guard() -> None:
    script = Script(guarded(TRIP), gate=VERDICT_LAST)
    with pytest.raises(sd.Halted):
        sd.complete("Judge [[halt:g]] One [[a]] Two [[b]] Three [[c]]", model=script.model())
    others = [c.last_user for c in script.calls if not is_guard(c)]
    assert others == ["One"]


def test_trip_prevents_the_write_tool_body() -> None:
    writes: list[str] = []

    def send_email(to: str) -> str:
        """Send an email (irreversible)."""
        writes.append(to)
        return "sent"

    script = Script(
        lambda c: TRIP if is_guard(c) else (Tools([("send_email", {"to": "x@y"})]) if c.tool_names else "ok"),
        gate=VERDICT_LAST,
    )
    with pytest.raises(sd.Halted):
        sd.complete("Judge [[halt:g]] Do it [[act|use_tools=true]]", model=script.model(), tools=[send_email])
    assert writes == []
    assert [c for c in script.calls if not is_guard(c)] == []  # joined before the slot started


def test_readonly_tool_runs_beside_the_guard() -> None:
    """Gate: the guard's verdict waits until the read-only tool has run. Were the tool
    held for the verdict, the two would wait for each other (the bounded wait only
    turns that into a failure instead of a hang; it decides nothing)."""
    import threading

    searched = threading.Event()

    @sd.readonly
    def search(q: str) -> str:
        """Search (read only)."""
        searched.set()
        return "found"

    def answer(call: Call) -> object:
        if is_guard(call):
            return TRIP
        return Tools([("search", {"q": "x"})]) if call.turns[-1][0] == "user" else "done"

    async def verdict_after_the_search(call: Call) -> None:
        if is_guard(call):
            await asyncio.to_thread(searched.wait, 20)

    script = Script(answer, gate=verdict_after_the_search)
    with pytest.raises(sd.Halted) as info:
        sd.complete("Judge [[halt:g]] Look [[look|use_tools=true]]", model=script.model(), tools=[search])
    assert searched.is_set()  # ran while the guard was pending
    assert info.value.results is not None and info.value.results["g"] == TRIP
    # the second model call of the slot waited for the verdict and never happened
    assert [c.turns[-1][0] for c in script.calls if not is_guard(c)] == ["user"]


def test_guard_that_interpolates_an_earlier_answer_waits_for_it() -> None:
    script = Script(lambda c: PASS if is_guard(c) else "draft text")
    sd.complete("Write [[draft]]\nIs this rude: {{ draft }} [[halt:rude]] Final [[final]]", model=script.model())
    guard = next(c for c in script.calls if is_guard(c))
    assert guard.turns == [("user", "Is this rude: draft text")]


def test_stop_at_still_joins_a_pending_guard() -> None:
    script = Script(guarded(TRIP), gate=VERDICT_LAST)
    with pytest.raises(sd.Halted):
        sd.complete("Judge [[halt:g]] A [[a]] B [[b]]", model=script.model(), stop_at="a")
    assert sorted(c.last_user for c in script.calls) == ["A", "Judge"]


def test_guard_inside_together_halts() -> None:
    script = Script(guarded(TRIP), gate=VERDICT_LAST)
    with pytest.raises(sd.Halted) as info:
        sd.complete("<together>Judge [[halt:g]] Q [[a]]</together> After [[b]]", model=script.model())
    assert info.value.slot == "g"
    assert all(c.last_user != "After" for c in script.calls)


def test_guard_in_an_earlier_segment_guards_a_write_in_a_later_one() -> None:
    writes: list[str] = []

    def write(x: str) -> str:
        """Write."""
        writes.append(x)
        return "ok"

    script = Script(
        lambda c: TRIP if is_guard(c) else (Tools([("write", {"x": "1"})]) if c.tool_names else "done"),
        gate=VERDICT_LAST,
    )
    with pytest.raises(sd.Halted):
        sd.complete("Slow [[a]] Judge [[halt:g]]<checkpoint>Act [[w|use_tools=true]]", model=script.model(), tools=[write])
    assert writes == []


@pytest.mark.parametrize("seed", range(40))
def test_no_write_tool_body_starts_before_a_pending_verdict(seed: int) -> None:
    """Every model call and tool body parks; a scheduler releases them one at a time in a
    seeded random order, each time the run stands still. In every order the invariant
    holds, judged by positions in one sequence of what happened (no clocks)."""
    rng = random.Random(seed)
    schedule = Scheduler(random.Random(f"order {seed}"))
    trip = rng.random() < 0.5

    async def write(slot: str) -> str:
        """Write an item."""
        schedule.note("write", slot)  # the body has started
        await schedule.park(f"write {slot}")
        return "written"

    @sd.readonly
    async def read(slot: str) -> str:
        """Read an item."""
        await schedule.park(f"read {slot}")
        return "value"

    async def gate(call: Call) -> None:
        if is_guard(call):
            schedule.note("asked", call.last_user)
        await schedule.gate(call)

    def answer(call: Call) -> object:
        if is_guard(call):
            schedule.note("verdict", call.last_user)
            return TRIP if trip and call.last_user == "G2" else PASS
        if call.tool_names and call.turns[-1][0] == "user":
            slot = call.last_user
            return Tools([(rng.choice(["write", "read"]), {"slot": slot}), ("read", {"slot": slot})])
        return "done"

    script = Script(answer, gate=gate)
    template = (
        "G1 [[halt:g1]] A [[a|use_tools=true]] G2 [[halt:g2]] B [[b|use_tools=true]]"
        "<checkpoint>C [[c|use_tools=true]]"
    )
    outcome = asyncio.run(
        schedule.run(sd.complete_async(template, model=script.model(), tools=[write, read], on_halt="return"))
    )
    assert (outcome.halted is not None) == trip
    at = {entry: i for i, entry in enumerate(schedule.log)}
    writes = [(i, slot) for i, (kind, slot) in enumerate(schedule.log) if kind == "write"]
    for start, slot in writes:
        for guard in ("G1", "G2"):
            if at.get(("asked", guard), start) < start:  # the guard was pending or done by then
                assert at.get(("verdict", guard), start) < start, (slot, guard, schedule.log)
        if slot in ("B", "C"):  # both guards precede these slots
            assert at[("verdict", "G1")] < start and at[("verdict", "G2")] < start, schedule.log
    if trip:
        assert [slot for _, slot in writes if slot in ("B", "C")] == []
    assert schedule.releases >= 3  # the scheduler decided the order (guards and slots parked)


def test_a_guard_may_use_tools_without_waiting_on_itself() -> None:
    checked: list[str] = []

    def check_blocklist(user: str) -> bool:
        """Is the user blocked?"""
        checked.append(user)
        return True

    def answer(call: Call) -> object:
        if call.tool_names and call.turns[-1][0] == "user":
            return Tools([("check_blocklist", {"user": "bob"})])
        return TRIP if is_guard(call) else "x"

    script = Script(answer)
    with pytest.raises(sd.Halted):
        sd.complete("Is bob blocked? [[halt:blocked|use_tools=true, max_iter=2]] Next [[b]]",
                    model=script.model(), tools=[check_blocklist])
    assert checked == ["bob"]


def test_the_answer_beside_a_tripped_guard_is_never_delivered_but_is_billed() -> None:
    """SPEC §4: the answer computed beside the guard is discarded from the Result (and
    so from --json, -o and batch outputs); its request still counts in the usage.
    Gate: the guard's verdict waits until the answer beside it has completed."""

    async def run() -> list[Any]:
        answered = asyncio.Event()

        async def verdict_after_the_answer(call: Call) -> None:
            if is_guard(call):
                await answered.wait()

        script = Script(guarded(TRIP), gate=verdict_after_the_answer)
        events: list[Any] = []
        async for event in sd.complete_incremental_async(
            "Judge {{ x }} [[halt:g]] Answer {{ x }} [[a]]", {"x": 1}, model=script.model(), on_halt="return",
            stream=False,
        ):
            events.append(event)
            if event.type == "slot_completed" and event.slot == "a":
                answered.set()
        return events

    events = asyncio.run(run())
    assert [e.slot for e in events if e.type == "slot_completed"] == ["a", "g"]  # it was computed
    result = events[-1].result
    assert dict(result) == {"g": TRIP} and result.halted.results is not None and "a" not in result.halted.results
    assert result.usage.requests == 2  # the guard's request and the discarded answer's

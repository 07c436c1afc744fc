"""Guard invariants (SPEC §4) under randomized release orders, over many seeds.

Random templates with several segments (independent or reading an earlier answer),
`<together>` blocks (with and without guards inside), streamed text slots and agent
slots whose model calls a readonly `read` and a side-effecting `write` tool, consumed
through `complete_incremental_async(stream=True)`. Every model call (guards too) and
every tool body parks; a scheduler the test drives releases one of them at a time, in a
seeded random order, each time the run stands still. Order is judged by positions in
one sequence of what happened, never by clocks. Whatever the order:

* no `write` body starts before the verdict of every guard that precedes its slot
  (a guard in an earlier segment, earlier in the same segment, or in the same
  `<together>` block);
* a slot preceded by a tripping guard never streams: no `SlotStreamStart` and no
  `TokenDelta` for it ever reaches the consumer, and no `write` body of it runs;
* the run halts exactly when some guard tripped, and then ends with
  `ProcessingComplete(early_termination=True)`.
"""

from __future__ import annotations

import asyncio
import random
import re
from dataclasses import dataclass, field
from typing import Any

import pytest

import struckdown as sd
from depth import cases
from scripted import Call, Scheduler, Script, Tools
from struckdown.incremental import ProcessingComplete, SlotStreamStart, TokenDelta

TRIP = {"triggered": True, "reason": "tripped"}
PASS = {"triggered": False, "reason": "fine"}
MARK = re.compile(r"@(\w+)@")


@dataclass
class Item:
    key: str
    kind: str  # "guard", "text" (streamed answer) or "tool" (agent slot)
    segment: int
    position: int  # document order
    block: int | None = None  # <together> block id


@dataclass
class Plan:
    template: str
    items: list[Item]
    trips: set[str]

    def item(self, key: str) -> Item:
        return next(i for i in self.items if i.key == key)

    def precedes(self, guard: Item, slot: Item) -> bool:
        if guard.segment != slot.segment:
            return guard.segment < slot.segment
        if guard.block is not None and guard.block == slot.block:
            return True  # a block's guards start before its members
        return guard.position < slot.position


def random_plan(rng: random.Random) -> Plan:
    items: list[Item] = []
    pieces: list[str] = []
    counter = {"s": 0, "g": 0, "b": 0}
    answers: list[str] = []  # text answers so far (to reference)

    def new_key(prefix: str) -> str:
        counter[prefix] += 1
        return f"{prefix}{counter[prefix]}"

    def slot_text(segment: int, block: int | None = None) -> str:
        roll = rng.random()
        if roll < 0.3 and block is None or roll < 0.15:
            key = new_key("g")
            items.append(Item(key, "guard", segment, len(items), block))
            ref = f" {{{{ {rng.choice(answers)} }}}}" if answers and block is None and rng.random() < 0.3 else ""
            return f"Judge @{key}@{ref}\n[[halt:{key}]]\n"
        key = new_key("s")
        kind = "tool" if rng.random() < 0.45 else "text"
        items.append(Item(key, kind, segment, len(items), block))
        if kind == "text" and block is None:
            answers.append(key)
        options = "|use_tools=true" if kind == "tool" else ""
        return f"Ask @{key}@\n[[{key}{options}]]\n"

    segments = rng.randint(1, 3)
    for segment in range(segments):
        if segment:
            name = f"<checkpoint>Part {segment}</checkpoint>\n"
            pieces.append(name)
            if answers and rng.random() < 0.4:  # this segment waits for an earlier answer
                pieces.append(f"Earlier: {{{{ {rng.choice(answers)} }}}}\n")
        for _ in range(rng.randint(1, 4)):
            if rng.random() < 0.25:
                counter["b"] += 1
                block = counter["b"]
                members = "".join(slot_text(segment, block) for _ in range(rng.randint(2, 3)))
                pieces.append(f"<together>\n{members}</together>\n")
            else:
                pieces.append(slot_text(segment))
    guards = [i.key for i in items if i.kind == "guard"]
    trips = {g for g in guards if rng.random() < 0.35}
    return Plan("".join(pieces), items, trips)


@dataclass
class Clock:
    """Positions in one sequence of what happened (a counter, not a clock)."""

    verdicts: dict[str, float] = field(default_factory=dict)  # guard -> when its answer was made
    writes: list[tuple[str, float]] = field(default_factory=list)  # (slot, body start)
    events: list[tuple[float, Any]] = field(default_factory=list)
    now: int = 0

    def tick(self) -> int:
        self.now += 1
        return self.now


def is_guard(call: Call) -> bool:
    return bool(call.schema) and "triggered" in str(call.schema)


def marker(call: Call) -> str:
    users = [t for r, t in call.turns if r == "user"]
    return MARK.findall(users[-1])[-1]


def scripted(plan: Plan, rng: random.Random, clock: Clock, schedule: Scheduler) -> Script:
    def answer(call: Call) -> object:
        key = marker(call)
        if is_guard(call):
            clock.verdicts[key] = clock.tick()
            return TRIP if key in plan.trips else PASS
        if call.tool_names and call.turns[-1][0] == "user":
            batch = [(rng.choice(["read", "write"]), {"slot": key}) for _ in range(rng.randint(1, 3))]
            return Tools(batch)
        return f"answer of {key} in a few streamed words"

    return Script(answer, gate=schedule.gate, chunk=rng.choice([0, 3, 7]))


async def run_plan(plan: Plan, rng: random.Random, schedule: Scheduler) -> tuple[Clock, Any]:
    clock = Clock()

    async def write(slot: str) -> str:
        """Write something (irreversible)."""
        clock.writes.append((slot, clock.tick()))  # the body has started
        await schedule.park(f"write {slot}")
        return "written"

    @sd.readonly
    async def read(slot: str) -> str:
        """Read something."""
        await schedule.park(f"read {slot}")
        return "read"

    script = scripted(plan, rng, clock, schedule)

    async def consume() -> Any:
        final = None
        async for event in sd.complete_incremental_async(
            plan.template, model=script.model(), tools=[write, read], on_halt="return", stream=True
        ):
            clock.events.append((clock.tick(), event))
            if isinstance(event, ProcessingComplete):
                final = event
        return final

    return clock, await schedule.run(consume())


def check_invariants(plan: Plan, clock: Clock, final: Any) -> None:
    guards = [i for i in plan.items if i.kind == "guard"]
    for slot_key, started in clock.writes:
        slot = plan.item(slot_key)
        for guard in guards:
            if plan.precedes(guard, slot):
                verdict = clock.verdicts.get(guard.key)
                assert verdict is not None and verdict <= started, (
                    f"write of {slot_key} started before the verdict of {guard.key}\n{plan.template}"
                )
    tripped = [g for g in guards if g.key in plan.trips and g.key in clock.verdicts]
    streamed = {e.slot for _, e in clock.events if isinstance(e, (SlotStreamStart, TokenDelta))}
    written = {s for s, _ in clock.writes}
    for guard in tripped:
        for item in plan.items:
            if item.kind != "guard" and plan.precedes(guard, item):
                assert item.key not in streamed, f"{item.key} streamed after trip of {guard.key}\n{plan.template}"
                assert item.key not in written, f"{item.key} wrote after trip of {guard.key}\n{plan.template}"
    assert final is not None
    assert final.early_termination == bool(tripped)
    assert (final.result.halted is not None) == bool(tripped)
    if tripped:
        assert final.result.halted.slot in {g.key for g in tripped}
    else:
        for item in plan.items:
            assert item.key in final.result, f"{item.key} missing from a run without a trip"


@pytest.mark.parametrize("seed", range(cases(80)))
def test_guard_joins_hold_in_random_release_orders(seed: int) -> None:
    rng = random.Random(seed)
    plan = random_plan(rng)
    # a guard's answer is released late more often than not (as a slow judge would answer)
    schedule = Scheduler(random.Random(f"order {seed}"), weight=lambda call: 0.1 if is_guard(call) else 1.0)
    clock, final = asyncio.run(run_plan(plan, rng, schedule))
    check_invariants(plan, clock, final)
    assert schedule.releases >= len(clock.verdicts)  # each answer came when the scheduler released it


def test_the_checker_sees_a_write_before_a_verdict() -> None:
    """The invariant check itself can fail."""
    plan = Plan("", [Item("g1", "guard", 0, 0), Item("s1", "tool", 0, 1)], set())
    clock = Clock(verdicts={"g1": 2.0}, writes=[("s1", 1.0)])
    with pytest.raises(AssertionError, match="before the verdict of g1"):
        check_invariants(plan, clock, None)
    plan = Plan("", [Item("g1", "guard", 0, 0), Item("s1", "text", 1, 1)], {"g1"})
    clock = Clock(verdicts={"g1": 1.0}, events=[(2.0, TokenDelta("s1", "x", "x"))])
    with pytest.raises(AssertionError, match="s1 streamed after trip of g1"):
        check_invariants(plan, clock, None)


def test_plans_cover_the_interesting_shapes() -> None:
    """The seeds above include every shape the invariants are about."""
    plans = [random_plan(random.Random(seed)) for seed in range(80)]
    assert any(p.trips for p in plans) and any(not p.trips for p in plans)
    assert any(any(i.block is not None and i.kind == "guard" for i in p.items) for p in plans)
    assert any(len({i.segment for i in p.items}) == 3 for p in plans)
    assert any("Earlier:" in p.template for p in plans)
    assert any(any(i.kind == "tool" for i in p.items) and p.trips for p in plans)

"""Budget invariants of agent slots (SPEC §3) under randomized scripted models.

Over many seeds, a scripted model calls tools at random (single calls and parallel
batches with identical and different calls, invented or mistyped arguments) and
answers typed slots with random validation failures. Whatever happens, per slot:

* model requests ≤ the clamped request limit (the caller's ceiling, lowered by
  `max_iter`; default ceiling 20 requests / 20 tool calls);
* tool body executions ≤ the clamped tool-call limit (lowered by `max_calls`);
* with `max_iter` set, the last permitted request offers no function tools, and
  every earlier one offers them all;
* asking above the ceiling warns, asking below it does not.

A run may end in `struckdown.ToolLimitExceeded` (a `UsageLimitExceeded`) or in
pydantic-ai's `UnexpectedModelBehavior` for exhausted retries; the invariants are
on counts, which are checked whatever the outcome.
"""

from __future__ import annotations

import random
import threading
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from depth import cases
from pydantic_ai.exceptions import UnexpectedModelBehavior, UsageLimitExceeded
from pydantic_ai.usage import UsageLimits

import struckdown as sd
from scripted import Call, Script, Tools

DEFAULT_REQUESTS = DEFAULT_TOOL_CALLS = 20
SLOT_TYPES = {
    # type: (slot head and options, a valid answer, an answer that fails validation)
    "respond": ("{key}|max_length=8", "short", "this answer is far too long"),
    "int": ("int:{key}", 7, "seven"),
    "record": ("record:{key}", {"ok": True}, ["not", "an", "object"]),
    "pick": ("pick:{key}|yes, no", "yes", "maybe"),
}


@dataclass
class Budget:
    """What the caller and the template ask for, and what the slots may use."""

    limits: UsageLimits | None
    max_iter: int | None
    max_calls: int | None

    @property
    def ceiling_requests(self) -> int:
        return DEFAULT_REQUESTS if self.limits is None else self.limits.request_limit  # type: ignore[return-value]

    @property
    def ceiling_tool_calls(self) -> int | None:
        return DEFAULT_TOOL_CALLS if self.limits is None else self.limits.tool_calls_limit

    @property
    def requests(self) -> int:
        return min(self.ceiling_requests, self.max_iter) if self.max_iter is not None else self.ceiling_requests

    @property
    def tool_calls(self) -> int | None:
        if self.max_calls is None:
            return self.ceiling_tool_calls
        ceiling = self.ceiling_tool_calls
        return self.max_calls if ceiling is None else min(ceiling, self.max_calls)

    @property
    def expected_warnings(self) -> int:
        iter_warns = self.max_iter is not None and self.max_iter > self.ceiling_requests
        ceiling = self.ceiling_tool_calls
        call_warns = self.max_calls is not None and ceiling is not None and self.max_calls > ceiling
        return int(iter_warns) + int(call_warns)


def random_budget(rng: random.Random) -> Budget:
    if rng.random() < 0.25:
        limits = None
    else:
        limits = UsageLimits(
            request_limit=rng.randint(1, 8),
            tool_calls_limit=rng.choice([None, 0, 1, 2, 3, 5, 8]),
        )
    max_iter = rng.choice([None, None, 1, 2, 3, 5, 12, 30])
    max_calls = rng.choice([None, None, 0, 1, 2, 4, 25])
    return Budget(limits, max_iter, max_calls)


@dataclass
class Bodies:
    """Tool body executions, per slot (the model passes the slot as an argument)."""

    runs: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, slot: str) -> None:
        with self.lock:
            self.runs[slot] += 1


def make_tools(bodies: Bodies) -> list[Any]:
    def lookup(slot: str, city: str) -> str:
        """Look up a city."""
        bodies.record(slot)
        return f"{city}: sunny"

    async def count(slot: str, n: int) -> int:
        """Count to n."""
        bodies.record(slot)
        return n + 1

    def explode(slot: str) -> str:
        """A tool that fails."""
        bodies.record(slot)
        raise RuntimeError("boom")

    return [lookup, count, sd.readonly(explode)]


def slot_of(call: Call) -> str:
    """The slot a request belongs to: its last "Task …" user turn (a text answer that
    fails validation comes back as a plain user turn with pydantic-ai's feedback)."""
    return next(t for r, t in reversed(call.turns) if r == "user" and t.startswith("Task ")).removeprefix("Task ")


def random_model(rng: random.Random, slots: dict[str, str], lock: threading.Lock) -> Script:
    """Per request, at random: a batch of tool calls (some identical, some with bad
    arguments), a valid answer, or an answer that fails validation."""

    def answer(call: Call) -> object:
        slot = slots[f"Task {slot_of(call)}"]
        kind = slots_types[slot]
        _, good, bad = SLOT_TYPES[kind]
        with lock:  # segments may run concurrently; keep the draw sequence sane
            roll = rng.random()
            if call.tool_names and roll < 0.65:
                batch: list[tuple[str, dict[str, Any]]] = []
                for _ in range(rng.choice([1, 1, 2, 3, 4])):
                    which = rng.random()
                    if which < 0.4:
                        batch.append(("lookup", {"slot": slot, "city": rng.choice(["Oslo", "Rome"])}))
                    elif which < 0.7:
                        batch.append(("count", {"slot": slot, "n": rng.randrange(3)}))
                    elif which < 0.8:
                        batch.append(("explode", {"slot": slot}))
                    elif which < 0.9:
                        batch.append(("count", {"slot": slot, "n": "not a number"}))
                    else:
                        batch.append(("lookup", {"slot": slot, "city": "Oslo", "invented": 1}))
                if rng.random() < 0.3:
                    batch.append(batch[0])  # identical call in the same batch
                return Tools(batch)
            return bad if rng.random() < 0.3 else good

    slots_types: dict[str, str] = {}
    script = Script(answer)
    script.slot_types = slots_types  # type: ignore[attr-defined]
    return script


def build_template(rng: random.Random, budget: Budget) -> tuple[str, dict[str, str], dict[str, str]]:
    """One to three agent slots, in one segment or across checkpoints."""
    pieces, prompts, kinds = [], {}, {}
    for i in range(rng.randint(1, 3)):
        key = f"s{i}"
        kind = rng.choice(list(SLOT_TYPES))
        head = SLOT_TYPES[kind][0].format(key=key)
        options = ["use_tools=true"]
        if budget.max_iter is not None:
            options.append(f"max_iter={budget.max_iter}")
        if budget.max_calls is not None:
            options.append(f"max_calls={budget.max_calls}")
        separator = "," if "|" in head else "|"
        prompt = f"Task {key}"
        if i and rng.random() < 0.4:
            pieces.append("<checkpoint>")
        pieces.append(f"{prompt} [[{head}{separator}{', '.join(options)}]]\n")
        prompts[prompt], kinds[key] = key, kind
    return "".join(pieces), prompts, kinds


def run_seed(seed: int) -> tuple[Budget, Script, Bodies, dict[str, str], BaseException | None, list[str]]:
    rng = random.Random(seed)
    budget = random_budget(rng)
    template, prompts, kinds = build_template(rng, budget)
    bodies = Bodies()
    script = random_model(rng, prompts, threading.Lock())
    script.slot_types.update(kinds)  # type: ignore[attr-defined]
    outcome: BaseException | None = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            sd.complete(template, model=script.model(), tools=make_tools(bodies), limits=budget.limits)
        except (UsageLimitExceeded, UnexpectedModelBehavior) as exc:
            outcome = exc
    budget_warnings = [str(w.message) for w in caught if "caller's ceiling" in str(w.message)]
    return budget, script, bodies, kinds, outcome, budget_warnings


@pytest.mark.parametrize("seed", range(cases(100)))
def test_requests_and_tool_bodies_stay_within_the_clamped_limits(seed: int) -> None:
    budget, script, bodies, kinds, outcome, budget_warnings = run_seed(seed)
    requests = Counter(slot_of(c) for c in script.calls)
    for slot in kinds:
        assert requests[slot] <= budget.requests, (slot, requests[slot], budget, outcome)
        if budget.tool_calls is not None:
            assert bodies.runs[slot] <= budget.tool_calls, (slot, bodies.runs[slot], budget, outcome)
    if isinstance(outcome, UsageLimitExceeded):
        assert isinstance(outcome, sd.ToolLimitExceeded)
    # a slot warns once per option asked above the ceiling, when it starts (a slot of a
    # concurrent segment may start and be cancelled before its first request)
    asked = sum(1 for slot in kinds if requests[slot])
    low, high = budget.expected_warnings * asked, budget.expected_warnings * len(kinds)
    assert low <= len(budget_warnings) <= high, (budget_warnings, budget)


@pytest.mark.parametrize("seed", range(150, 150 + cases(60)))
def test_the_last_permitted_request_offers_no_tools(seed: int) -> None:
    rng = random.Random(seed)
    while True:  # only budgets with max_iter are interesting here
        budget = random_budget(rng)
        if budget.max_iter is not None:
            break
    rng = random.Random(seed * 7919)
    template, prompts, kinds = build_template(rng, budget)
    bodies = Bodies()
    script = random_model(rng, prompts, threading.Lock())
    script.slot_types.update(kinds)  # type: ignore[attr-defined]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        try:
            sd.complete(template, model=script.model(), tools=make_tools(bodies), limits=budget.limits)
        except (UsageLimitExceeded, UnexpectedModelBehavior):
            pass
    last = budget.requests
    for slot in kinds:
        calls = [c for c in script.calls if slot_of(c) == slot]
        assert len(calls) <= last
        for number, call in enumerate(calls, 1):
            expected = [] if number == last else ["lookup", "count", "explode"]
            assert call.tool_names == expected, (slot, number, last, budget)


def test_a_model_that_always_calls_tools_uses_exactly_the_budget() -> None:
    """The bound is tight: a greedy model reaches it, then gets a tool-free round."""
    bodies = Bodies()
    calls = iter(range(1000))

    def greedy(call: Call) -> object:
        if call.tool_names:
            return Tools([("count", {"slot": "s0", "n": next(calls)})])
        return "done"

    script = Script(greedy)
    result = sd.complete(
        "Task s0 [[s0|use_tools=true, max_iter=4]]", model=script.model(), tools=make_tools(bodies),
        limits=UsageLimits(request_limit=6, tool_calls_limit=10),
    )
    assert result["s0"] == "done"
    assert [c.tool_names for c in script.calls] == [["lookup", "count", "explode"]] * 3 + [[]]
    assert bodies.runs["s0"] == 3

"""Agent slots (`use_tools=true`): tools, budgets, the tool-free last round, the
per-slot call cache and failing tools (SPEC §3)."""

from __future__ import annotations

import asyncio
import logging
import threading
import warnings
from dataclasses import dataclass

import pytest
from pydantic_ai import ModelRetry, RunContext, Tool
from pydantic_ai.usage import UsageLimits

from pydantic_ai.messages import ToolReturnPart

import struckdown as sd
from scripted import Call, Script, Tools


def lookup(city: str) -> str:
    """Look up the weather in a city."""
    lookup.calls.append(city)  # type: ignore[attr-defined]
    return f"sunny in {city}"


def fresh_lookup() -> None:
    lookup.calls = []  # type: ignore[attr-defined]


def always_call_tool(call: Call) -> object:
    """A model that calls the tool whenever it is offered, else answers."""
    if "lookup" in call.tool_names:
        return Tools([("lookup", {"city": f"c{len(call.messages)}"})])
    return "final answer" if not call.schema else {"city": "Paris", "temp": 20}


def test_max_iter_makes_the_last_request_tool_free() -> None:
    fresh_lookup()
    script = Script(always_call_tool)
    result = sd.complete("Weather? [[w|use_tools=true, max_iter=3]]", model=script.model(), tools=[lookup])
    assert [c.tool_names for c in script.calls] == [["lookup"], ["lookup"], []]
    assert result["w"] == "final answer"
    assert len(lookup.calls) == 2  # type: ignore[attr-defined]
    slot = result.results["w"]
    assert (slot.usage.requests, slot.usage.tool_calls) == (3, 2)
    assert [c.tool_name for c in slot.tool_calls] == ["lookup", "lookup"]


def test_typed_agent_slot_still_yields_its_type() -> None:
    fresh_lookup()
    script = Script(always_call_tool)
    result = sd.complete("Plan [[record:plan|use_tools=true, max_iter=2]]", model=script.model(), tools=[lookup])
    assert result["plan"] == {"city": "Paris", "temp": 20}
    assert [c.tool_names for c in script.calls] == [["lookup"], []]


def test_template_cannot_raise_the_callers_ceiling(caplog: pytest.LogCaptureFixture) -> None:
    fresh_lookup()
    script = Script(always_call_tool)
    message = "template asked for max_iter=9 but the caller's ceiling is 3; using 3"
    with caplog.at_level(logging.WARNING, logger="struckdown"), pytest.warns(UserWarning) as record:
        result = sd.complete(
            "Weather? [[w|use_tools=true, max_iter=9]]",
            model=script.model(),
            tools=[lookup],
            limits=UsageLimits(request_limit=3),
        )
    assert [str(w.message) for w in record] == [message]
    assert message in caplog.text
    assert [c.tool_names for c in script.calls] == [["lookup"], ["lookup"], []]
    assert result["w"] == "final answer"


def test_max_calls_lowers_the_tool_call_limit() -> None:
    fresh_lookup()
    script = Script(always_call_tool)
    with pytest.raises(sd.ToolLimitExceeded) as info:
        sd.complete("Weather? [[w|use_tools=true, max_calls=2]]", model=script.model(), tools=[lookup])
    assert len(lookup.calls) == 2  # type: ignore[attr-defined]
    assert "tool_calls_limit" in str(info.value) or "tool call" in str(info.value)


def test_without_max_iter_the_ceiling_is_an_error_after_exactly_20_requests() -> None:
    fresh_lookup()
    script = Script(always_call_tool)
    with pytest.raises(sd.ToolLimitExceeded) as info:
        sd.complete(
            "Weather? [[w|use_tools=true]]",
            model=script.model(),
            tools=[lookup],
            limits=UsageLimits(request_limit=20, tool_calls_limit=100),
        )
    assert len(script.calls) == 20
    assert all(c.tool_names == ["lookup"] for c in script.calls)
    assert info.value.slot == "w"
    from pydantic_ai.exceptions import UsageLimitExceeded

    assert isinstance(info.value, UsageLimitExceeded)


def test_default_ceiling_is_20_requests() -> None:
    fresh_lookup()
    script = Script(lambda call: Tools([("lookup", {"city": str(len(script.calls))})]))
    with pytest.raises(sd.ToolLimitExceeded):
        sd.complete("Go [[w|use_tools=true]]", model=script.model(), tools=[lookup])
    assert len(lookup.calls) == 20  # type: ignore[attr-defined]
    assert len(script.calls) == 20


def test_identical_calls_run_once_sequentially_and_in_one_parallel_batch() -> None:
    fresh_lookup()
    rounds = [
        Tools([("lookup", {"city": "Oslo"}), ("lookup", {"city": "Oslo"}), ("lookup", {"city": "Rome"})]),
        Tools([("lookup", {"city": "Oslo"})]),
        "done",
    ]
    script = Script(lambda call: rounds[len(script.calls) - 1])
    events = list(sd.complete_incremental("Go [[w|use_tools=true]]", model=script.model(), tools=[lookup]))
    assert sorted(lookup.calls) == ["Oslo", "Rome"]  # type: ignore[attr-defined]
    completed = [e for e in events if e.type == "tool_completed"]
    assert sorted((e.arguments["city"], e.was_cached) for e in completed) == [
        ("Oslo", False), ("Oslo", True), ("Oslo", True), ("Rome", False)
    ]
    kinds = [e.type for e in events if e.type.startswith("tool_")]
    assert kinds.count("tool_started") == kinds.count("tool_completed") == 4
    returns = [t for r, t in script.calls[1].turns if r == "return"]
    assert returns == ["sunny in Oslo", "sunny in Oslo", "sunny in Rome"]


def test_the_call_cache_is_per_slot_and_per_run() -> None:
    fresh_lookup()
    script = Script(lambda call: Tools([("lookup", {"city": "Oslo"})]) if call.turns[-1][0] == "user" else "ok")
    template = "A [[a|use_tools=true]] B [[b|use_tools=true]]"
    sd.complete(template, model=script.model(), tools=[lookup])
    sd.complete(template, model=script.model(), tools=[lookup])
    assert lookup.calls == ["Oslo"] * 4  # type: ignore[attr-defined]


def test_a_raising_tool_becomes_a_string_for_the_model_and_the_run_goes_on() -> None:
    def explode(x: int) -> int:
        """Always fails."""
        raise ValueError(f"bad x={x}")

    script = Script(lambda call: Tools([("explode", {"x": 3})]) if len(script.calls) == 1 else "recovered")
    events = list(sd.complete_incremental("Go [[w|use_tools=true]]", model=script.model(), tools=[explode]))
    done = next(e for e in events if e.type == "tool_completed")
    assert (done.ok, done.error, done.output) == (False, "ValueError: bad x=3", "ValueError: bad x=3")
    assert ("return", "ValueError: bad x=3") in script.calls[1].turns
    assert events[-1].result["w"] == "recovered"
    # pydantic-ai's ToolFailed: the history marks the result as a failed one
    returns = [p for m in script.calls[1].messages for p in m.parts if isinstance(p, ToolReturnPart)]
    assert [(p.content, p.outcome) for p in returns] == [("ValueError: bad x=3", "failed")]


def test_model_retry_keeps_its_pydantic_ai_meaning() -> None:
    def picky(x: int) -> int:
        """Wants x > 0."""
        if x <= 0:
            raise ModelRetry("x must be positive")
        return x * 2

    answers = iter([Tools([("picky", {"x": 0})]), Tools([("picky", {"x": 2})]), "4"])
    script = Script(lambda call: next(answers))
    result = sd.complete("Go [[w|use_tools=true]]", model=script.model(), tools=[picky])
    assert result["w"] == "4"
    assert any(r == "retry" and "x must be positive" in t for r, t in script.calls[1].turns) or any(
        "x must be positive" in t for _, t in script.calls[1].turns
    )
    assert ("return", "4") in script.calls[2].turns


def test_invented_arguments_are_refused_before_the_call() -> None:
    fresh_lookup()
    answers = iter([Tools([("lookup", {"city": "Oslo", "invented": 1})]), "ok"])
    script = Script(lambda call: next(answers))
    sd.complete("Go [[w|use_tools=true]]", model=script.model(), tools=[lookup])
    assert lookup.calls == []  # type: ignore[attr-defined]
    assert "invented" in " ".join(t for _, t in script.calls[1].turns)


@dataclass
class Deps:
    user_id: int


def test_deps_reach_run_context_tools_and_stay_out_of_the_schema() -> None:
    seen: list[int] = []

    def whoami(ctx: RunContext[Deps], verbose: bool) -> str:
        """Say who the user is."""
        seen.append(ctx.deps.user_id)
        return f"user {ctx.deps.user_id}"

    answers = iter([Tools([("whoami", {"verbose": True})]), "done"])
    script = Script(lambda call: next(answers))
    sd.complete("Who [[w|use_tools=true]]", model=script.model(), tools=[whoami], deps=Deps(7), deps_type=Deps)
    assert seen == [7]
    schema = script.calls[0].info.function_tools[0].parameters_json_schema
    assert list(schema["properties"]) == ["verbose"]
    assert script.calls[0].info.function_tools[0].description == "Say who the user is."


def test_pydantic_ai_tool_objects_and_async_tools() -> None:
    async def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    answers = iter([Tools([("plus", {"a": 2, "b": 3})]), "5"])
    script = Script(lambda call: next(answers))
    result = sd.complete("Sum [[s|use_tools=true]]", model=script.model(), tools=[Tool(add, name="plus")])
    assert result["s"] == "5"
    assert ("return", "5") in script.calls[1].turns


def test_sync_tools_run_in_a_worker_thread() -> None:
    threads: list[int] = []

    def where() -> str:
        """Report the thread."""
        threads.append(threading.get_ident())
        return "here"

    answers = iter([Tools([("where", {})]), "ok"])
    script = Script(lambda call: next(answers))

    async def main() -> None:
        loop_thread = threading.get_ident()
        await sd.complete_async("Go [[w|use_tools=true]]", model=script.model(), tools=[where])
        assert threads and threads[0] != loop_thread

    asyncio.run(main())


def test_tools_are_offered_only_to_use_tools_slots() -> None:
    fresh_lookup()
    script = Script(lambda call: "plain")
    sd.complete("Plain [[a]]", model=script.model(), tools=[lookup])
    assert script.calls[0].tool_names == []


def test_use_tools_without_tools_is_a_clear_error() -> None:
    script = Script(lambda call: "x")
    with pytest.raises(sd.TemplateRuntimeError, match="use_tools=true but no tools were given"):
        sd.complete("Go [[w|use_tools=true]]", model=script.model())
    assert script.calls == []


def test_readonly_marks_functions_and_tool_objects() -> None:
    from struckdown.run.tools import is_readonly

    @sd.readonly
    def read() -> str:
        """Read."""
        return "r"

    def write() -> str:
        """Write."""
        return "w"

    assert is_readonly(read) and not is_readonly(write)
    assert is_readonly(sd.readonly(Tool(write)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read() == "r"


def test_tool_slots_running_together_keep_their_own_calls_and_cache() -> None:
    """Two agent slots in flight at once: each runs its identical call once, and each
    reports only its own calls (the per-slot tool state is per run, not per agent)."""
    fresh_lookup()

    def answer(call: Call) -> object:
        slot = "a" if "First" in call.last_user else "b"
        returns = sum(1 for role, _ in call.turns if role == "return")
        if returns < 2:
            return Tools([("lookup", {"city": slot.upper()})])
        return f"done {slot}"

    script = Script(answer, meet=2, meet_when=lambda call: not any(r == "return" for r, _ in call.turns))
    result = sd.complete(
        "<together>First [[a|use_tools=true]] Second [[b|use_tools=true]]</together>",
        model=script.model(),
        tools=[lookup],
    )
    assert script.peak == 2  # both slots' first requests were in flight together
    assert (result["a"], result["b"]) == ("done a", "done b")
    assert sorted(lookup.calls) == ["A", "B"]  # type: ignore[attr-defined]
    for key, city in (("a", "A"), ("b", "B")):
        calls = result.results[key].tool_calls
        assert [(c.arguments, c.output, c.was_cached) for c in calls] == [
            ({"city": city}, f"sunny in {city}", False),
            ({"city": city}, f"sunny in {city}", True),
        ]


def test_a_tool_result_that_is_not_json_is_an_error_naming_the_tool() -> None:
    class Thing:
        pass

    def make() -> object:
        """Make a thing."""
        return Thing()

    script = Script(lambda call: Tools([("make", {})]) if len(script.calls) == 1 else "recovered")
    result = sd.complete("Go [[w|use_tools=true]]", model=script.model(), tools=[make])
    assert result["w"] == "recovered"
    (call,) = result.results["w"].tool_calls
    assert not call.ok and call.error is not None and "tool 'make' returned a Thing" in call.error
    assert ("return", call.error) in script.calls[1].turns


def test_a_tool_past_its_timeout_is_cancelled_and_the_model_reads_why() -> None:
    """SPEC §14 / issue 24 item 8: the host's tool_timeout, lowered by the slot option."""
    import asyncio

    cancelled: list[str] = []

    async def slow(q: str) -> str:
        """Never finishes by itself."""
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(q)
            raise
        return "never"

    script = Script(lambda call: Tools([("slow", {"q": "x"})]) if len(script.calls) == 1 else "gave up")
    result = sd.complete("Go [[w|use_tools=true, tool_timeout=0.2]]", model=script.model(), tools=[slow])
    assert result["w"] == "gave up" and cancelled == ["x"]
    (call,) = result.results["w"].tool_calls
    assert (call.ok, call.error) == (False, "TimeoutError: tool 'slow' took longer than 0.2 s")
    assert ("return", "TimeoutError: tool 'slow' took longer than 0.2 s") in script.calls[1].turns


def test_a_template_cannot_raise_the_hosts_tool_timeout() -> None:
    async def quick(q: str) -> str:
        """Answers at once."""
        return "ok"

    script = Script(lambda call: Tools([("quick", {"q": "x"})]) if len(script.calls) == 1 else "done")
    env = sd.Environment(tool_timeout=5)
    with pytest.warns(UserWarning, match="tool_timeout=600 but the caller's ceiling is 5; using 5"):
        env.complete("Go [[w|use_tools=true, tool_timeout=600]]", model=script.model(), tools=[quick])
    assert sd.Environment().tool_timeout == 60.0  # the documented default


def test_a_long_tool_result_is_cut_to_max_tool_result_with_a_note() -> None:
    """Issue 39 N18: a tool result is capped by the host's `max_tool_result`, and the model
    reads that it was cut; lists and dicts are measured (and cut) as their JSON."""

    def page() -> str:
        """A long page."""
        return "x" * 250

    def rows() -> list[dict[str, int]]:
        """Many rows."""
        return [{"n": n} for n in range(30)]

    def short() -> str:
        """A short answer."""
        return "fine"

    calls = [("page", {}), ("rows", {}), ("short", {})]
    script = Script(lambda call: Tools(calls) if len(script.calls) == 1 else "done")
    env = sd.Environment(max_tool_result=100)
    result = env.complete("Go [[w|use_tools=true]]", model=script.model(), tools=[page, rows, short])
    note = "\n[truncated by struckdown: the result of tool {!r} had {} characters; only the first 100 are shown (max_tool_result)]"
    rows_json = '[{"n":0},{"n":1},{"n":2},{"n":3},{"n":4},{"n":5},{"n":6},{"n":7},{"n":8},{"n":9},{"n":10},{"n":11},{'
    returned = [text for role, text in script.calls[1].turns if role == "return"]
    assert returned == ["x" * 100 + note.format("page", 250), rows_json + note.format("rows", 261), "fine"]
    assert [c.output for c in result.results["w"].tool_calls] == [
        "x" * 100 + note.format("page", 250), rows_json + note.format("rows", 261), "fine",
    ]  # fmt: skip
    # the default is 100,000 characters; a call's keyword overrides the Environment's, None lifts it
    script.calls.clear()
    env.complete("Go [[w|use_tools=true]]", model=script.model(), tools=[page, rows, short], max_tool_result=None)
    assert [text for role, text in script.calls[1].turns if role == "return"][0] == "x" * 250
    assert sd.Environment().max_tool_result == 100_000

"""SPEC §14 for tools: `tool_choice=` (first request only; `none` offers no tools; an
unknown name fails before any model call), `tool_timeout=` (host ceiling, template lower
only, the exact message), and call order (`parallel_tools=false`, `@sd.sequential`).
Concurrency is decided by checkpoints and gates, never by sleeps."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import anyio
import pytest
from pydantic_ai import Tool

import struckdown as sd
from scripted import Script, Tools
from struckdown.incremental import ToolCompleted


def lookup(word: str) -> str:
    """Look a word up."""
    return f"{word}: an animal"


def other(word: str) -> str:
    """Another tool."""
    return "other"


def call_then_answer(*calls: tuple[str, dict[str, Any]]) -> Script:
    """First request: these tool calls; then a text answer."""
    script = Script(lambda call: Tools(list(calls)) if len(script.calls) == 1 else "done")
    return script


def choices(script: Script) -> list[Any]:
    return [(c.info.model_settings or {}).get("tool_choice") for c in script.calls]


def test_tool_choice_required_is_sent_on_the_first_request_only() -> None:
    script = call_then_answer(("lookup", {"word": "cat"}))
    result = sd.complete("Cat? [[a|use_tools=true, tool_choice=required]]", model=script.model(), tools=[lookup, other])
    assert result["a"] == "done"
    assert choices(script) == ["required", None]
    assert [c.tool_names for c in script.calls] == [["lookup", "other"], ["lookup", "other"]]


def test_tool_choice_a_name_forces_that_tool_first() -> None:
    script = call_then_answer(("lookup", {"word": "cat"}))
    sd.complete("Cat? [[a|use_tools=true, tool_choice=lookup]]", model=script.model(), tools=[lookup, other])
    assert choices(script) == [["lookup"], None]


def test_tool_choice_required_on_a_typed_slot_then_answers() -> None:
    script = Script(lambda call: Tools([("lookup", {"word": "cat"})]) if len(script.calls) == 1 else 4)
    result = sd.complete("Legs? [[int:n|use_tools=true, tool_choice=required]]", model=script.model(), tools=[lookup])
    assert result["n"] == 4 and choices(script) == ["required", None]


def test_tool_choice_none_offers_no_tools() -> None:
    script = Script(lambda call: "no tools needed")
    result = sd.complete("Cat? [[a|use_tools=true, tool_choice=none]]", model=script.model(), tools=[lookup])
    assert result["a"] == "no tools needed"
    assert [c.tool_names for c in script.calls] == [[]]


def test_tool_choice_auto_is_the_default() -> None:
    script = call_then_answer(("lookup", {"word": "cat"}))
    sd.complete("Cat? [[a|use_tools=true, tool_choice=auto]]", model=script.model(), tools=[lookup])
    assert choices(script) == [None, None]


def test_an_unknown_tool_name_is_an_error_before_any_model_call() -> None:
    script = Script(lambda call: "never")
    with pytest.raises(sd.TemplateSyntaxError) as info:
        sd.complete("First [[x]]\nCat? [[a|use_tools=true, tool_choice=lookpu]]", model=script.model(), tools=[lookup])
    error = info.value
    assert (error.line, error.column) == (2, 38)  # at the value, as budget= and approve= (issue 40 item 4)
    assert error.message == "tool_choice= names 'lookpu', which is not a tool of this run"
    assert error.hint is not None and "did you mean 'lookup'?" in error.hint
    assert script.calls == []


def test_a_jinja_tool_choice_is_checked_when_its_slot_starts() -> None:
    script = Script(lambda call: "first")
    with pytest.raises(sd.TemplateRuntimeError, match="tool_choice=nope names no tool"):
        sd.complete("First [[x]] Cat? [[a|use_tools=true, tool_choice={{ pick }}]]", {"pick": "nope"},
                    model=script.model(), tools=[lookup])  # fmt: skip
    assert len(script.calls) == 1  # slot x ran; slot a made no request


def test_a_forcing_tool_choice_needs_use_tools() -> None:
    with pytest.raises(sd.TemplateSyntaxError, match="tool_choice=required needs use_tools=true"):
        sd.parse("Cat? [[a|tool_choice=required]]")


# -- tool timeouts ------------------------------------------------------------------------


def slow_tool(started: anyio.Event) -> Any:
    async def slow() -> str:
        """Takes 5 s (it waits for a gate nobody opens)."""
        started.set()
        await anyio.Event().wait()
        return "never"

    return slow


def run_slow(template: str, **options: Any) -> tuple[list[Any], Script]:
    script = call_then_answer(("slow", {}))

    async def collect() -> list[Any]:
        started = anyio.Event()
        return [
            e async for e in sd.complete_incremental_async(template, model=script.model(), tools=[slow_tool(started)], **options)
        ]

    return asyncio.run(collect()), script


def test_a_slow_tool_is_cut_at_the_slot_tool_timeout_with_the_exact_message() -> None:
    events, script = run_slow("Go [[a|use_tools=true, tool_timeout=0.2]]", stream=False)
    (done,) = [e for e in events if isinstance(e, ToolCompleted)]
    message = "TimeoutError: tool 'slow' took longer than 0.2 s"
    assert (done.tool_name, done.ok, done.error, done.output) == ("slow", False, message, message)
    assert ("return", message) in script.calls[1].turns  # what the model reads
    assert events[-1].result["a"] == "done"


def test_the_host_tool_timeout_is_a_ceiling_the_template_may_only_lower() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        events, _ = run_slow("Go [[a|use_tools=true, tool_timeout=5]]", stream=False, tool_timeout=0.2)
    (done,) = [e for e in events if isinstance(e, ToolCompleted)]
    assert done.error == "TimeoutError: tool 'slow' took longer than 0.2 s"
    assert [str(w.message) for w in caught if issubclass(w.category, UserWarning)] == [
        "template asked for tool_timeout=5 but the caller's ceiling is 0.2; using 0.2"
    ]


# -- call order -----------------------------------------------------------------------------


class Probe:
    """Tools that record their order and how many run at once; each yields to the event
    loop a few times while it runs, so calls run beside each other if the engine lets them."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.running = 0
        self.peak = 0

    def tool(self, name: str) -> Any:
        async def fn(n: int) -> str:
            self.running += 1
            self.peak = max(self.peak, self.running)
            self.order.append(f"{name}{n}")
            for _ in range(5):
                await anyio.lowlevel.checkpoint()
            self.running -= 1
            return "ok"

        fn.__name__ = fn.__qualname__ = name
        fn.__doc__ = f"Tool {name}."
        return fn


WRITTEN = [("a", {"n": 1}), ("b", {"n": 2}), ("a", {"n": 3}), ("b", {"n": 4})]


def test_tool_calls_of_one_response_run_beside_each_other_by_default() -> None:
    probe = Probe()
    sd.complete("Go [[x|use_tools=true]]", model=call_then_answer(*WRITTEN).model(), tools=[probe.tool("a"), probe.tool("b")])
    assert probe.peak == 4  # the control: without the option the calls overlap


def test_parallel_tools_false_runs_the_calls_one_after_another_in_written_order() -> None:
    probe = Probe()
    sd.complete("Go [[x|use_tools=true, parallel_tools=false]]", model=call_then_answer(*WRITTEN).model(),
                tools=[probe.tool("a"), probe.tool("b")])  # fmt: skip
    assert probe.peak == 1
    assert probe.order == ["a1", "b2", "a3", "b4"]


def test_a_sequential_tool_runs_alone_in_written_order() -> None:
    probe = Probe()
    seq = sd.sequential(probe.tool("a"))
    sd.complete("Go [[x|use_tools=true]]", model=call_then_answer(("a", {"n": 1}), ("a", {"n": 2})).model(), tools=[seq])
    assert probe.peak == 1 and probe.order == ["a1", "a2"]
    probe = Probe()
    as_tool = sd.sequential(Tool(probe.tool("a")))
    assert as_tool.sequential is True
    sd.complete("Go [[x|use_tools=true]]", model=call_then_answer(("a", {"n": 1}), ("a", {"n": 2})).model(), tools=[as_tool])
    assert probe.peak == 1 and probe.order == ["a1", "a2"]


def test_a_sequential_tool_keeps_its_readonly_mark() -> None:
    probe = Probe()
    tool = sd.readonly(sd.sequential(probe.tool("a")))
    box = sd.default_environment().engine_caches().toolbox([tool])
    assert box.readonly_names == frozenset({"a"}) and box.tools[0].sequential is True


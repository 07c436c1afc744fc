"""MCP servers as slot tools over streamable HTTP (SPEC §16), against the test server
`notes_server.py` running in this process on a free port of 127.0.0.1 (one per module).

The server counts the sessions clients open and records every tool call, so the
tests assert what reached it; gates it holds (threading events) decide concurrency.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from mcp_support import HttpServer
from pydantic_ai.capabilities import MCP
from scripted import Call, Script, Tools, answered_last

import struckdown as sd

pytestmark = pytest.mark.process  # real MCP server over streamable HTTP

NOTES_TOOLS = ["notes_lookup", "notes_remember", "notes_erase", "notes_hang", "notes_fail"]
TRIP = {"triggered": True, "reason": "unsafe"}
PASS = {"triggered": False, "reason": "fine"}


def is_guard(call: Call) -> bool:
    return bool(call.schema) and "triggered" in str(call.schema)


def first_calls(*calls: tuple[str, dict[str, Any]]) -> Any:
    """A model that makes these tool calls on a slot's first request, then answers with
    what the last tool returned (or that it failed)."""

    def answer(call: Call) -> object:
        if is_guard(call):
            return PASS
        if call.turns[-1][0] == "user":
            return Tools(list(calls))
        return f"answer: {call.turns[-1][1]}"

    return answer


def test_a_slot_calls_a_server_tool_and_uses_its_result(notes: HttpServer) -> None:
    script = Script(first_calls(("notes_lookup", {"word": "owl"})))
    events = list(
        sd.complete_incremental("Look up owl [[a|mcp=notes]]", model=script.model(), mcp={"notes": notes.url})
    )
    result = events[-1].result
    assert result["a"] == "answer: owl: a note about owl"
    assert [c.tool_names for c in script.calls] == [NOTES_TOOLS, NOTES_TOOLS]
    assert script.calls[1].turns == [
        ("user", "Look up owl"),
        ("call", 'notes_lookup({"word": "owl"})'),
        ("return", "owl: a note about owl"),
    ]
    tool_events = [(e.type, e.tool_name, e.arguments) for e in events if e.type.startswith("tool_")]
    assert tool_events == [
        ("tool_started", "notes_lookup", {"word": "owl"}),
        ("tool_completed", "notes_lookup", {"word": "owl"}),
    ]
    (call,) = result.results["a"].tool_calls
    assert (call.tool_name, call.output, call.ok, call.was_cached) == ("notes_lookup", "owl: a note about owl", True, False)
    assert notes.record.calls == [("lookup", {"word": "owl"})]
    assert notes.record.sessions == 1


def test_mcp_option_restricts_a_slot_to_its_servers_and_each_opens_once(notes: HttpServer) -> None:
    def clock() -> str:
        """The time."""
        return "noon"

    script = Script(lambda call: "ok")
    servers = {"notes": notes.url, "files": notes.url}  # two servers (one process serves both)
    template = (
        "A [[a|mcp=notes]]\nB [[b|mcp=files]]\nC [[c|use_tools=true]]\n"
        'D [[d|mcp="files, notes"]]\nE [[e]]'
    )
    sd.complete(template, model=script.model(), mcp=servers, tools=[clock])
    files = [name.replace("notes_", "files_") for name in NOTES_TOOLS]
    assert [sorted(c.tool_names) for c in script.calls] == [
        sorted(["clock", *NOTES_TOOLS]),
        sorted(["clock", *files]),
        sorted(["clock", *NOTES_TOOLS, *files]),
        sorted(["clock", *NOTES_TOOLS, *files]),
        [],
    ]
    assert notes.record.sessions == 2  # one per server for the run, not one per slot


def test_a_session_opens_on_first_use_only(notes: HttpServer) -> None:
    script = Script(lambda call: "ok")
    sd.complete("No tools here [[a]]", model=script.model(), mcp={"notes": notes.url, "files": notes.url})
    assert notes.record.sessions == 0
    sd.complete("One server [[a|mcp=files]]", model=script.model(), mcp={"notes": notes.url, "files": notes.url})
    assert notes.record.sessions == 1


def test_an_unknown_server_is_a_positioned_error_before_any_model_call(notes: HttpServer) -> None:
    script = Script(lambda call: "ok")
    with pytest.raises(sd.TemplateSyntaxError) as info:
        sd.complete("First [[a]]\nThen [[b|mcp=nots]]", model=script.model(), mcp={"notes": notes.url})
    assert (info.value.line, info.value.column) == (2, 10)
    assert "asks for MCP server 'nots', which this run does not have" in info.value.message
    assert info.value.hint == "this run's MCP servers: notes"
    with pytest.raises(sd.TemplateSyntaxError, match="'notes', which this run does not have") as info:
        sd.complete("Then [[b|mcp=notes]]", model=script.model())
    assert info.value.hint is not None and "--mcp" in info.value.hint
    assert script.calls == [] and notes.record.sessions == 0


def test_a_jinja_valued_mcp_option_is_checked_when_the_slot_runs(notes: HttpServer) -> None:
    script = Script(lambda call: "ok")
    servers = {"notes": notes.url, "files": notes.url}
    sd.complete("[[a|mcp={{ which }}]]", {"which": ["files"]}, model=script.model(), mcp=servers)
    assert sorted(script.calls[0].tool_names) == sorted(n.replace("notes_", "files_") for n in NOTES_TOOLS)
    with pytest.raises(sd.TemplateRuntimeError, match="asks for MCP server 'web'"):
        sd.complete("[[a|mcp={{ which }}]]", {"which": "web"}, model=script.model(), mcp=servers)


def test_a_read_only_mcp_tool_runs_beside_a_pending_guard(notes: HttpServer) -> None:
    """Gate: the guard's verdict waits until the server has run the read-only tool. Were
    the tool held for the verdict, the two would wait for each other (the bounded wait
    only turns that into a failure instead of a hang; it decides nothing)."""
    looked_up = notes.record.event("lookup")

    async def verdict_after_the_lookup(call: Call) -> None:
        if is_guard(call):
            await asyncio.to_thread(looked_up.wait, 20)

    def answer(call: Call) -> object:
        if is_guard(call):
            return TRIP
        return Tools([("dictionary_lookup", {"word": "owl"})]) if call.turns[-1][0] == "user" else "done"

    script = Script(answer, gate=verdict_after_the_lookup)
    dictionary = MCP(local=_toolset(notes.url), id="dictionary", allowed_tools=["lookup"])  # read-only tools only
    with pytest.raises(sd.Halted) as info:
        sd.complete("Judge [[halt:g]] Look [[look|mcp=dictionary]]", model=script.model(), mcp=[dictionary])
    assert looked_up.is_set() and notes.record.calls == [("lookup", {"word": "owl"})]
    assert info.value.results is not None and info.value.results["g"] == TRIP
    # the slot's second model call waited for the verdict and never happened
    assert [c.turns[-1][0] for c in script.calls if not is_guard(c)] == ["user"]
    assert [c.tool_names for c in script.calls if not is_guard(c)] == [["dictionary_lookup"]]


def test_a_slot_with_a_writing_mcp_tool_waits_for_the_guard(notes: HttpServer) -> None:
    """Gate: the verdict comes once the slot's tools are listed (the last wait on the
    server before the slot's join) and the run then stands still. A slot not held at its
    join would have sent its first request by then (the test would see it)."""
    toolset, listed = _listing_toolset(notes.url)

    async def tools_listed(call: Call) -> None:
        await listed.wait()

    script = Script(
        lambda c: TRIP if is_guard(c) else Tools([("notes_remember", {"note": "x"})]),
        gate=answered_last(is_guard, after=tools_listed),
    )
    with pytest.raises(sd.Halted):
        sd.complete("Judge [[halt:g]] Write [[w|mcp=notes]]", model=script.model(), mcp=[MCP(local=toolset, id="notes")])
    assert listed.is_set()
    assert [c for c in script.calls if not is_guard(c)] == []  # joined before the slot's first request
    assert notes.record.calls == []


def test_a_destructive_tool_is_offered_as_needing_approval(notes: HttpServer) -> None:
    script = Script(lambda call: "ok")
    sd.complete("[[a|mcp=notes]]", model=script.model(), mcp={"notes": notes.url})
    kinds = {tool.name: tool.kind for tool in script.calls[0].info.function_tools}
    assert kinds == {
        "notes_lookup": "function",
        "notes_remember": "function",
        "notes_erase": "unapproved",  # destructiveHint: true (the approval machinery acts on it, SPEC §12)
        "notes_hang": "function",
        "notes_fail": "function",
    }


def test_identical_mcp_calls_run_once_and_every_call_has_its_events(notes: HttpServer) -> None:
    rounds = [
        Tools([("notes_lookup", {"word": "owl"}), ("notes_lookup", {"word": "owl"})]),
        Tools([("notes_lookup", {"word": "owl"})]),
        "done",
    ]
    script = Script(lambda call: rounds[len(script.calls) - 1])
    events = list(sd.complete_incremental("[[a|mcp=notes]]", model=script.model(), mcp={"notes": notes.url}))
    completed = [e for e in events if e.type == "tool_completed"]
    assert sorted(e.was_cached for e in completed) == [False, True, True]  # the parallel pair may end in any order
    assert [e.type for e in events if e.type.startswith("tool_")].count("tool_started") == 3
    assert notes.record.calls == [("lookup", {"word": "owl"})]


def test_a_failing_server_tool_is_an_error_string_for_the_model(notes: HttpServer) -> None:
    script = Script(first_calls(("notes_fail", {"name": "owl"})))
    events = list(sd.complete_incremental("[[a|mcp=notes]]", model=script.model(), mcp={"notes": notes.url}))
    (completed,) = [e for e in events if e.type == "tool_completed"]
    assert (completed.ok, completed.error) == (False, "ToolError: Error executing tool fail: no note called owl")
    assert events[-1].result["a"] == "answer: ToolError: Error executing tool fail: no note called owl"


def test_the_tool_timeout_cancels_a_slow_mcp_tool(notes: HttpServer) -> None:
    script = Script(first_calls(("notes_hang", {})))
    result = sd.complete("[[a|mcp=notes]]", model=script.model(), mcp={"notes": notes.url}, tool_timeout=0.3)
    (call,) = result.results["a"].tool_calls
    assert (call.ok, call.error) == (False, "TimeoutError: tool 'notes_hang' took longer than 0.3 s")
    assert result["a"] == "answer: TimeoutError: tool 'notes_hang' took longer than 0.3 s"


def test_the_slots_call_budget_counts_mcp_calls(notes: HttpServer) -> None:
    script = Script(lambda call: Tools([("notes_lookup", {"word": str(len(script.calls))})]))
    with pytest.raises(sd.ToolLimitExceeded):
        sd.complete("[[a|mcp=notes, max_calls=2]]", model=script.model(), mcp={"notes": notes.url})
    assert notes.record.calls == [("lookup", {"word": "1"}), ("lookup", {"word": "2"})]


def test_a_20_row_batch_opens_one_session_per_server(notes: HttpServer) -> None:
    def answer(call: Call) -> object:
        if call.turns[-1][0] == "user":
            return Tools([("notes_lookup", {"word": call.last_user.split()[-1]}), ("web_lookup", {"word": "x"})])
        return "done"

    script = Script(answer)
    rows = [{"word": f"w{i}"} for i in range(20)]
    results = sd.complete_batch(
        "Look up {{ word }} [[a|use_tools=true]]", rows, model=script.model(), concurrency=8,
        mcp={"notes": notes.url, "web": notes.url},
    )  # fmt: skip
    assert all(isinstance(r, sd.Result) and r["a"] == "done" for r in results)
    assert sorted(args["word"] for name, args in notes.record.calls if args["word"] != "x") == sorted(
        f"w{i}" for i in range(20)
    )
    assert len(notes.record.calls) == 40
    assert notes.record.sessions == 2  # notes and web, each once for the batch, not 20 times


def test_runs_share_the_sessions_a_host_holds_and_leave_them_open(notes: HttpServer) -> None:
    script = Script(first_calls(("notes_lookup", {"word": "owl"})))

    async def main() -> tuple[bool, bool]:
        async with sd.MCPSessions({"notes": notes.url}) as sessions:
            for _ in range(3):
                await sd.complete_async("[[a|mcp=notes]]", model=script.model(), mcp=sessions)
            still_open = sessions.open_names == ("notes",)
        return still_open, sessions.open_names == ()

    assert asyncio.run(main()) == (True, True)
    assert notes.record.sessions == 1 and len(notes.record.calls) == 3


def test_the_session_closes_when_the_run_fails(notes: HttpServer) -> None:
    toolset = _toolset(notes.url)
    running: list[bool] = []

    def answer(call: Call) -> object:
        running.append(toolset.is_running)
        if len(script.calls) == 1:
            return Tools([("notes_lookup", {"word": "owl"})])
        raise RuntimeError("the provider fell over")

    script = Script(answer)
    with pytest.raises(RuntimeError, match="fell over"):
        sd.complete("[[a|mcp=notes]]", model=script.model(), mcp={"notes": toolset})
    assert running == [True, True] and not toolset.is_running


def test_an_environment_holds_default_servers_a_call_may_replace(notes: HttpServer) -> None:
    env = sd.Environment(mcp={"notes": notes.url})
    script = Script(lambda call: "ok")
    env.complete("[[a|mcp=notes]]", model=script.model())
    env.complete("[[a|use_tools=true]]", model=script.model(), mcp={"files": notes.url})
    assert sorted(script.calls[0].tool_names) == sorted(NOTES_TOOLS)
    assert sorted(script.calls[1].tool_names) == sorted(n.replace("notes_", "files_") for n in NOTES_TOOLS)


def test_a_server_that_cannot_be_reached_is_an_error_naming_it(notes: HttpServer) -> None:
    import socket

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
    port = closed.getsockname()[1]
    script = Script(lambda call: "ok")
    try:
        with pytest.raises(sd.MCPServerError) as info:
            sd.complete("First [[a]] then [[b|mcp=gone]]", model=script.model(), mcp={"gone": f"http://127.0.0.1:{port}/mcp"})
    finally:
        closed.close()
    assert info.value.server == "gone" and info.value.slot == "b"
    assert str(info.value).startswith("MCP server 'gone': could not open a session: ")
    assert len(script.calls) == 1  # slot a ran; b failed before its model call


def _toolset(url: str) -> Any:
    from pydantic_ai.mcp import MCPToolset

    return MCPToolset(url, id="notes")


def _listing_toolset(url: str) -> tuple[Any, asyncio.Event]:
    """An MCP toolset that sets the event once it has listed the server's tools."""
    from pydantic_ai.mcp import MCPToolset

    listed = asyncio.Event()

    class Listing(MCPToolset[Any]):
        async def list_tools(self) -> Any:
            tools = await super().list_tools()
            listed.set()
            return tools

    return Listing(url, id="notes"), listed




def test_a_dask_worker_opens_one_session_per_server_for_its_rows_of_a_batch(notes: HttpServer) -> None:
    """What runs on a worker, in this process: the rows of one batch share the worker's
    sessions; the executor's `close_mcp_sessions` ends them with the batch."""
    from struckdown.distributed import ship_kwargs
    from struckdown.distributed.packing import unpack_outcomes
    from struckdown.distributed.worker import close_mcp_sessions, run_rows

    shipped = ship_kwargs({"model_factory": "mcp_models:lookup_model", "mcp": {"notes": notes.url}})
    job = {"template": "Look up {{ word }} [[a|mcp=notes]]", "template_path": None, "include_paths": (),
           "kwargs": shipped, "semaphore": None, "retries": 0, "retry_delay": 0, "batch": "b1"}  # fmt: skip

    async def main() -> tuple[list[Any], int]:
        first, _ = await run_rows(job, [(i, {"word": f"w{i}"}) for i in range(3)])  # two chunks of one batch
        second, _ = await run_rows(job, [(i, {"word": f"w{i}"}) for i in range(3, 6)])
        outcomes = sorted([*unpack_outcomes(first, [0, 1, 2]), *unpack_outcomes(second, [3, 4, 5])], key=lambda pair: pair[0])
        return [outcome for _, outcome in outcomes], await close_mcp_sessions("b1")

    results, closed = asyncio.run(main())
    assert [r["a"] for r in results] == [f"got w{i}: a note about w{i}" for i in range(6)]
    assert (closed, notes.record.sessions) == (1, 1)
    with pytest.raises(ValueError, match="not toolset or capability objects"):
        ship_kwargs({"mcp": [_toolset(notes.url)]})


def test_an_mcp_tool_result_is_capped_by_max_tool_result_too(notes: HttpServer) -> None:
    """Issue 39 N18: a server's result is cut like a local tool's, with the same note."""
    script = Script(first_calls(("notes_lookup", {"word": "owl"})))
    result = sd.complete("Look up owl [[a|mcp=notes]]", model=script.model(), mcp={"notes": notes.url}, max_tool_result=8)
    cut = (
        "owl: a n\n[truncated by struckdown: the result of tool 'notes_lookup' had 21 characters; "
        "only the first 8 are shown (max_tool_result)]"
    )
    assert script.calls[1].turns[-1] == ("return", cut)
    assert result.results["a"].tool_calls[0].output == cut
    assert notes.record.calls == [("lookup", {"word": "owl"})]

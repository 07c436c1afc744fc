"""MCP servers over stdio (SPEC §16): real server processes of `notes_server.py`.

A stdio session is a process, so the server's `--log` file (one pid per process
start) counts the sessions, and the pids tell whether any process is left.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
from mcp_support import SERVER_SCRIPT, HttpServer, stdio_command
from scripted import Call, Script, Tools

import struckdown as sd

pytestmark = pytest.mark.process  # real MCP server processes over stdio


def pids(log: Path) -> list[int]:
    return [int(line) for line in log.read_text().split()] if log.exists() else []


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_20_row_batch_opens_one_session_per_server(
    tmp_path: Path, notes: HttpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both servers come from an mcp.json in the Claude Desktop format: one over stdio
    (its log file from an environment variable), one over streamable HTTP."""
    log = tmp_path / "pids"
    monkeypatch.setenv("NOTES_LOG", str(log))
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {
        "notes": {"command": sys.executable, "args": [str(SERVER_SCRIPT), "--log", "${NOTES_LOG}"]},
        "web": {"url": notes.url},
    }}))  # fmt: skip

    def answer(call: Call) -> object:
        word = call.last_user.split()[-1]
        if call.turns[-1][0] != "user":
            return f"got {call.turns[-1][1]}"
        if "web_lookup" in call.tool_names:
            return Tools([("notes_lookup", {"word": word}), ("web_lookup", {"word": word})])
        return Tools([("notes_lookup", {"word": word})])

    script = Script(answer)
    rows = [{"word": f"w{i}"} for i in range(20)]
    template = "Look up {{ word }} [[a|mcp=notes]]\n\nNow look up {{ word }}2 [[b|use_tools=true]]"
    results = sd.complete_batch(template, rows, model=script.model(), mcp=config)
    assert [(r["a"], r["b"]) for r in results] == [  # type: ignore[index]
        (f"got w{i}: a note about w{i}", f"got w{i}2: a note about w{i}2") for i in range(20)
    ]
    assert sorted(script.calls[0].tool_names) == ["notes_erase", "notes_fail", "notes_hang", "notes_lookup", "notes_remember"]
    kinds = {tool.name: tool.kind for tool in script.calls[0].info.function_tools}
    assert kinds["notes_erase"] == "unapproved" and kinds["notes_lookup"] == "function"  # the hints travel over stdio
    assert sorted(args["word"] for _, args in notes.record.calls) == sorted(f"w{i}2" for i in range(20))
    (pid,) = pids(log)  # one stdio process (one session) for the 20 rows and their 40 slots
    assert notes.record.sessions == 1  # and one HTTP session
    assert not running(pid)  # it ended with the batch


def test_cancelling_a_run_closes_its_sessions(tmp_path: Path) -> None:
    log = tmp_path / "pids"
    script = Script(lambda call: Tools([("notes_hang", {})]))

    async def main() -> list[str]:
        seen = []
        stream = sd.complete_incremental_async(
            "Wait [[a|mcp=notes]]", model=script.model(), mcp=[f"notes={stdio_command(log)}"], tool_timeout=None
        )
        async for event in stream:
            seen.append(event.type)
            if event.type == "tool_started":
                break
        await stream.aclose()  # cancels the run while the server's tool hangs
        return seen

    assert asyncio.run(main())[-1] == "tool_started"
    (pid,) = pids(log)
    assert not running(pid)
